/*
 * What the other hooks may call in the CUDA support (agent/cupti.c), and
 * what the event core is told through the kernel tags cupti.c registers
 * (agent/events.h).
 *
 * External correlation: module scopes, backward-node executions, NVTX
 * seq ranges (agent/nvtx.c) and operators (agent/ops.c) push an id
 * around their work so CUPTI tags every CUDA API call made inside with
 * it, and each kernel then carries its layer and phase (GT_R_EXT_CORR
 * joins the kernel's correlation id to the id pushed). The functions are
 * weak so callers may test for presence:
 *
 *     if (gt__cuda_ext_push)
 *         gt__cuda_ext_push(GT_EXT_NVTX_SEQ, seq);
 *     ...
 *     if (gt__cuda_ext_pop)
 *         gt__cuda_ext_pop(GT_EXT_NVTX_SEQ);
 *
 * Pushes and pops must pair on the same thread. Both are one relaxed load
 * and a branch while CUPTI is not running (no CUDA in the process, or CUPTI
 * failed to start); otherwise one CUPTI call. Any thread; never blocks;
 * not async-signal-safe.
 */
#ifndef GRADTRACE_AGENT_CUDA_H
#define GRADTRACE_AGENT_CUDA_H

#include <stdint.h>

/* kind: enum gt_ext_kind (wire.h); ext: the id the kernel records carry. */
extern void gt__cuda_ext_push(uint16_t kind, uint64_t ext)
    __attribute__((weak));
extern void gt__cuda_ext_pop(uint16_t kind) __attribute__((weak));

/*
 * Backward attribution (agent/cupti.c). The event core's
 * gt__node_created calls gt__cuda_node_created with the innermost module
 * when the node is made; gt__bwd_node_begin/end bracket the node's
 * execution with gt__cuda_bwd_begin/end, which push that module as
 * GT_EXT_LAYER_BWD (both through the kernel tags). Lock-free, no
 * allocation, any thread; no-ops while CUPTI is not running.
 */
extern void gt__cuda_node_created(uint64_t seq, uint64_t fwd_tid,
                                  uint32_t layer) __attribute__((weak));
extern void gt__cuda_bwd_begin(uint64_t seq, uint64_t fwd_tid)
    __attribute__((weak));
extern void gt__cuda_bwd_end(void) __attribute__((weak));
/* The layer remembered for a node, 0 when unknown. */
extern uint32_t gt__cuda_node_layer(uint64_t seq, uint64_t fwd_tid)
    __attribute__((weak));

/* @return 1 while CUPTI activity capture is running in this process. */
extern int gt__cuda_active(void) __attribute__((weak));

#endif
