/*
 * The agent's event core (agent/events.c): what every event source feeds
 * (the public C API, agent/api.c; the autograd hooks, agent/torch.c; NVTX
 * ranges, agent/nvtx.c; RecordFunction scopes through NVTX's stack): the
 * per-thread layer stack and user-scope stack, node creation, backward
 * nodes and passes, steps, instants and collectives, each recorded when
 * capturing and fed to the trigger engine when a trigger is armed.
 *
 * It calls only the base and the trigger engine. The CUDA support, a
 * hook, is told about layers and nodes through the table it registers
 * (gt__events_set_tags), so kernels carry their layer and phase.
 *
 * Every function here: any thread, never blocks, no allocation on the
 * capture path (a thread's first record registers it: cold), not
 * async-signal-safe. Layer and scope pairs must nest on one thread.
 */
#ifndef GRADTRACE_AGENT_EVENTS_H
#define GRADTRACE_AGENT_EVENTS_H

#include <stdint.h>

#include "agent/internal.h"

/* ------------------------------------------------------------ layers */

/*
 * Opens / closes a layer on the calling thread: the layer stack node
 * creations read, the module scope record, forward triggers and the
 * kernels' GT_EXT_LAYER_FWD tag. gt_module_begin/end call them when
 * GRADTRACE_LAYERS has capi, agent/nvtx.c for ranges taken as layers.
 */
void gt__layer_begin(uint32_t path_id, uint32_t class_id);
void gt__layer_end(void);

/*
 * Opens / closes a layer's backward range (agent/nvtx.c, rule 7 of
 * schema/torch.md "Layer sources"): a module scope flagged
 * GT_SCOPE_F_BACKWARD, backward triggers' segments and the kernels'
 * GT_EXT_LAYER_BWD tag. It sits on the layer stack but is no node's
 * layer. Nests with gt__layer_begin/end on one thread.
 */
void gt__layer_bwd_begin(uint32_t path_id);
void gt__layer_bwd_end(void);

/* @return the innermost module path id on this thread, 0 if none (a
 * backward range is skipped: the layer around it counts). */
uint32_t gt__current_layer(void);
/* Triggers (agent/trigger.c) matching a module on this thread's layer
 * stack; the node this thread created last while triggers were armed
 * (@return 0: none). */
uint32_t gt__trig_stack_mask(void);
int gt__trig_last_node(uint64_t *seq, uint64_t *fwd_tid);

/* ------------------------------------------------------------ user scopes */

/* gt_scope_begin/end (include/gradtrace/gradtrace.h). */
void gt__scope_begin(uint32_t name_id);
void gt__scope_end(void);

/* gt_comm_begin/end (include/gradtrace/gradtrace.h): communication
 * scopes, recorded while capturing; pairs nest on one thread. */
void gt__comm_begin(uint32_t name_id);
void gt__comm_end(uint32_t name_id);

/* ------------------------------------------------------------ autograd */

/* gt_node_created, gt_bwd_node_begin/end: a node made in the forward, a
 * backward node's run (include/gradtrace/gradtrace.h). */
void gt__node_created(uint64_t seq, uint64_t fwd_tid);
/* acc_layer: an AccumulateGrad's parameter's module when known, else 0
 * (gt__trig_bwd_node_begin). */
void gt__bwd_node_begin(uint32_t name_id, uint64_t seq, uint64_t fwd_tid,
                        uint32_t acc_layer);
void gt__bwd_node_end(uint64_t seq, uint64_t fwd_tid, uint32_t acc_layer);

/*
 * A backward pass begins / ends. Passes are counted as iterations even
 * while capture is off (triggers name them); a mark is recorded while
 * capturing. extra != 0: a pass that is no iteration (agent/torch.c:
 * autograd.grad, a retained graph's second pass). gt_bwd_pass_begin is
 * gt__bwd_pass_begin(0).
 */
void gt__bwd_pass_begin(int extra);
void gt__bwd_pass_end(void);

/*
 * Backward nodes running on this OS thread (Engine::evaluate_function
 * calls, nested when backward is reentrant), kept even while capture is
 * off: a layer opened while it is nonzero is a recomputed forward
 * (activation checkpointing), flagged GT_SCOPE_F_RECOMPUTE. Defined here,
 * moved only by gt__bwd_enter/leave (agent/torch.c), which are inline so
 * that the idle hook stays a few instructions.
 */
extern __thread unsigned gt__bwd_depth __attribute__((tls_model("initial-exec")));

static inline void gt__bwd_enter(void)
{
    gt__bwd_depth++;
}

static inline void gt__bwd_leave(void)
{
    gt__bwd_depth--;
}

/* ------------------------------------------------------------ marks */

/* gt_step (the current step ends), gt_instant, gt_collective
 * (include/gradtrace/gradtrace.h). */
void gt__step_end(void);
void gt__instant(uint32_t name_id);
void gt__collective(uint32_t op_id, uint32_t group, uint32_t ranks,
                    uint64_t seq, uint64_t begin_ns, uint64_t end_ns);

/* ------------------------------------------------------------ kernel tags */

/*
 * What the CUDA support does at the core's events so that every kernel
 * carries its layer and phase (agent/cuda.h says how): push / pop an
 * external correlation id of kind enum gt_ext_kind around a layer, note a
 * node's layer at its creation (only while capturing), bracket a backward
 * node's run. All five are set; each is lock-free and allocates nothing.
 */
struct gt__kernel_tags {
    void (*push)(uint16_t kind, uint64_t ext);
    void (*pop)(uint16_t kind);
    void (*node_created)(uint64_t seq, uint64_t fwd_tid, uint32_t layer);
    void (*bwd_begin)(uint64_t seq, uint64_t fwd_tid);
    void (*bwd_end)(void);
};

/*
 * Registers tags (kept, not copied; NULL: none). agent/cupti.c registers
 * its table once CUPTI runs, so without CUDA every event costs one load
 * of the pointer more and nothing else. A pop may come without its push
 * (registered in the middle of a layer): the table must tolerate it. Any
 * thread.
 */
void gt__events_set_tags(const struct gt__kernel_tags *tags);

#endif /* GRADTRACE_AGENT_EVENTS_H */
