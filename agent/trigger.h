/*
 * Capture windows opened and closed by triggers, evaluated inside the
 * agent at its hooks (no round trip to the daemon). See agent/trigger.c
 * for the semantics and schema/control.md for the spec syntax.
 */
#ifndef GRADTRACE_AGENT_TRIGGER_H
#define GRADTRACE_AGENT_TRIGGER_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/codec.h"
#include "common/trigspec.h"

#define GT__TRIG_MAX 11        /* armed triggers at once */

/* Phase bits: GT__PHASE_FORWARD (1), GT__PHASE_BACKWARD (2), BOTH (3). */
#define GT__TRIG_FORWARD GT__PHASE_FORWARD
#define GT__TRIG_BACKWARD GT__PHASE_BACKWARD

/*
 * 1 when layer path (len bytes) or one of its dotted ancestors matches glob
 * (fnmatch syntax: *, ?, [...]). Only used when with_ancestors is set;
 * otherwise the path itself must match.
 */
int gt__trig_glob_match(const char *glob, const char *path, size_t len,
                        int with_ancestors);

/*
 * Streamer thread (GT_CTL_TRIGGER) or the constructor (GRADTRACE_TRIGGER):
 * parses spec (len bytes, gt__trigger_parse_spec) and arms it unless its
 * pids/ranks exclude this process. @return 0 armed, 1 not for this
 * process, -EINVAL bad spec, -ENOSPC too many armed, -ENOMEM.
 */
int gt__trig_arm(const char *spec, size_t len);
/* Streamer thread (GT_CTL_TRIGGER_CLEAR): disarms all; closes an open window. */
void gt__trig_clear(void);

/* Hooks (agent/api.c), called only while a trigger is armed
 * (gt__capture_triggers(): one load and a branch otherwise). */
uint32_t gt__trig_layer_mask(uint32_t layer_id);
/* The trigger set's generation (bumps when it changes), and the triggers
 * whose glob matches path (len bytes) or one of its ancestors. */
uint32_t gt__trig_gen(void);
uint32_t gt__trig_path_mask(const char *path, size_t len);
/* A compiled forward region holding layers of triggers m begins / ends
 * (agent/compiled.c): forward segments as for a module call. */
void gt__trig_region_begin(uint32_t m);
void gt__trig_region_end(uint32_t m);
void gt__trig_module_begin(uint32_t path_id);
void gt__trig_module_end(uint32_t path_id);
/* mask: OR of gt__trig_layer_mask over the thread's module stack; layer:
 * the innermost module (the node's layer). */
void gt__trig_node_created(uint64_t seq, uint64_t fwd_tid, uint32_t mask,
                           uint32_t layer);
/* A backward node begins / ends. acc_layer: for a node without a forward
 * of its own whose layer the caller knows (an AccumulateGrad: its
 * parameter's module), else 0. A backward segment holds only its layer's
 * nodes (pausing at another layer's) and its parameters' AccumulateGrad
 * nodes, also those the engine runs after the layer's last counted node. */
void gt__trig_bwd_node_begin(uint64_t seq, uint64_t fwd_tid, uint32_t acc_layer);
void gt__trig_bwd_node_end(uint64_t seq, uint64_t fwd_tid, uint32_t acc_layer);
/* A layer's backward range (gt__layer_bwd_begin/end): path_id's
 * backward triggers open a segment at the outermost one, close at its end. */
void gt__trig_bwd_range_begin(uint32_t path_id);
void gt__trig_bwd_range_end(uint32_t path_id);

/*
 * Iterations, always counted (also without triggers): training steps once
 * the program steps an optimizer, else counted outermost backward passes
 * (agent/trigger.c). gt__trig_pass_begin: extra != 0 for a pass that is
 * no iteration (autograd.grad, a second pass over a retained graph); only
 * the outermost pass's flag counts.
 */
void gt__trig_pass_begin(int extra);
void gt__trig_pass_end(void);
/* From now on iterations are steps (gt_step_expect, or the first step). */
void gt__trig_step_expect(void);
/* gt_step: the current step ends. @return its number (from 0). */
uint64_t gt__trig_step(void);
/* GT_MARK_F_* flags for the open outermost pass's BWD_PASS marks. */
uint32_t gt__trig_pass_flags(void);
/* 1 while the open window's trigger asked for operators (ops=1): the
 * operator callback records them then, as it does in every capture with
 * GRADTRACE_OPS=1. Any thread; a relaxed load. */
int gt__trig_window_ops(void);
/* 1 once any trigger with ops=1 was armed: the operator callback is then
 * worth registering. Any thread. */
int gt__trig_ops_asked(void);
/* The rank the environment gave (RANK, -1 unset), as the constructor or
 * a fork child read it; it wins over gt__trig_set_rank's. Any thread. */
void gt__trig_env_rank(int32_t rank);
/* The rank became known (gt_set_rank): triggers waiting for it with
 * ranks= arm or drop. Any thread. */
void gt__trig_set_rank(int32_t rank);
/*
 * Nonzero once the current iteration's forward has begun (a module entered
 * or a node created since the last iteration boundary): a trigger for the
 * current iteration then waits for the next (its node count would be
 * short). Set by gt__trig_forward_seen, from the hooks, also while idle.
 */
extern _Atomic int gt__trig_begun;
static inline void gt__trig_forward_seen(void)
{
    if (__builtin_expect(!atomic_load_explicit(&gt__trig_begun, memory_order_relaxed), 0))
        atomic_store_explicit(&gt__trig_begun, 1, memory_order_relaxed);
}

/* @return the current iteration (completed steps or counted passes). */
uint64_t gt__trig_iteration(void);
int gt__trig_in_backward(void);

/* Armed/fired state for diagnostics and tests. */
struct gt__trig_info {
    unsigned armed;       /* triggers still armed */
    unsigned windows;     /* windows completed */
    int open;             /* a window segment is open now */
};
void gt__trig_info(struct gt__trig_info *out);

#endif
