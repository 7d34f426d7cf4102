/*
 * The agent's event core (agent/events.h): every event source comes here
 * to record and to feed the trigger engine.
 *
 * Every recording function starts with one relaxed load of the capture
 * state (agent/capture.h) and a branch; while capturing, it reserves a
 * record in the calling thread's buffer (inlined fast path from ring.h),
 * fills it with the CLOCK_MONOTONIC time and commits it. Scope ends carry
 * the id of their begin, so each thread keeps a small stack of open user
 * scopes and one of open modules (the layer stack, kept even while not
 * capturing because node attribution needs it the moment a capture
 * starts).
 *
 * The kernels' layer tags are the CUDA support's (a hook above this
 * file): it registers what to call (gt__events_set_tags), read with one
 * relaxed load per event, NULL without CUDA.
 */
#include <stdatomic.h>

#include "agent/events.h"

#include "agent/capture.h"
#include "agent/ring.h"
#include "agent/trigger.h"

/* ------------------------------------------------------------ kernel tags */

static const struct gt__kernel_tags *_Atomic kernel_tags;

void gt__events_set_tags(const struct gt__kernel_tags *tags)
{
    atomic_store_explicit(&kernel_tags, tags, memory_order_release);
}

/* The registered table, or NULL. */
static inline const struct gt__kernel_tags *tags_now(void)
{
    return atomic_load_explicit(&kernel_tags, memory_order_relaxed);
}

__thread unsigned gt__bwd_depth __attribute__((tls_model("initial-exec")));

/* ------------------------------------------------------------ records */


static void scope_begin(uint16_t kind, uint32_t name, uint32_t cls,
                        uint16_t flags)
{
    GT__RECORD(gt_r_scope_begin, GT_R_SCOPE_BEGIN, r, {
        r->kind = kind;
        r->flags = flags;
        r->name = name;
        r->cls = cls;
        r->ts = gt__now();
    });
}

static void scope_end(uint16_t kind, uint32_t name, uint16_t flags)
{
    GT__RECORD(gt_r_scope_end, GT_R_SCOPE_END, r, {
        r->kind = kind;
        r->flags = flags;
        r->name = name;
        r->ts = gt__now();
    });
}

/* ------------------------------------------------------------ user scopes */

void gt__scope_begin(uint32_t name_id)
{
    struct gt__thread *t;
    uint32_t epoch;

    if (GT__LIKELY(!gt__capture_on()))
        return;
    t = gt__thread_self();
    if (!t)
        return;
    epoch = gt__capture_epoch();
    if (t->scope_epoch != epoch) {
        /* Entries of an earlier capture: their ends will not be recorded. */
        t->scope_epoch = epoch;
        t->scope_depth = 0;
    }
    if (t->scope_depth < GT__SCOPE_STACK_MAX)
        t->scopes[t->scope_depth] = name_id;
    t->scope_depth++;
    scope_begin(GT_SCOPE_USER, name_id, 0, 0);
}

void gt__scope_end(void)
{
    struct gt__thread *t;
    uint32_t name;

    if (GT__LIKELY(!gt__capture_on()))
        return;
    t = gt__tls;
    if (!t || t == &gt__thread_dead || t->scope_depth == 0 ||
        t->scope_epoch != gt__capture_epoch())
        return;
    t->scope_depth--;
    name = t->scope_depth < GT__SCOPE_STACK_MAX ? t->scopes[t->scope_depth] : 0;
    scope_end(GT_SCOPE_USER, name, 0);
}

/* ------------------------------------------------------------ communication */

/* This thread's open communication scopes recorded in capture epoch
 * tl_comm_epoch (their ends are recorded; ends of others are not). */
static __thread uint32_t tl_comm_depth __attribute__((tls_model("initial-exec")));
static __thread uint32_t tl_comm_epoch __attribute__((tls_model("initial-exec")));

void gt__comm_begin(uint32_t name_id)
{
    if (GT__LIKELY(!gt__capture_on()))
        return;
    uint32_t epoch = gt__capture_epoch();
    if (tl_comm_epoch != epoch) {
        tl_comm_epoch = epoch;
        tl_comm_depth = 0;
    }
    tl_comm_depth++;
    scope_begin(GT_SCOPE_COMM, name_id, 0, 0);
}

void gt__comm_end(uint32_t name_id)
{
    if (GT__LIKELY(!gt__capture_on()))
        return;
    if (tl_comm_depth == 0 || tl_comm_epoch != gt__capture_epoch())
        return;
    tl_comm_depth--;
    scope_end(GT_SCOPE_COMM, name_id, 0);
}

/* ------------------------------------------------------------ layers */

void gt__layer_begin(uint32_t path_id, uint32_t class_id)
{
    struct gt__thread *t = gt__thread_self();
    const struct gt__kernel_tags *tags;
    uint32_t cap;
    int on;

    gt__trig_forward_seen();
    /* A forward window opens at a matching module's entry, before the
     * capture state is read, so the module's own scope is in it. */
    if (GT__UNLIKELY(gt__capture_triggers()))
        gt__trig_module_begin(path_id);
    cap = gt__capture_state();
    on = (int)(cap & GT__CAP_ON);

    /* CUDA: kernels launched inside carry the layer (agent/cuda.h). */
    tags = tags_now();
    if (tags)
        tags->push(GT_EXT_LAYER_FWD, path_id);

    if (!t)
        return;
    /* Inside a running backward node: a recomputed forward (checkpoint). */
    uint16_t flags = gt__bwd_depth ? GT_SCOPE_F_RECOMPUTE : 0;
    if (t->layer_depth < GT__SCOPE_STACK_MAX) {
        t->layers[t->layer_depth].id = path_id;
        t->layers[t->layer_depth].epoch = on ? gt__capture_epoch_of(cap) : 0;
        t->layers[t->layer_depth].flags = flags;
    }
    t->layer_depth++;
    if (on)
        scope_begin(GT_SCOPE_MODULE, path_id, class_id, flags);
}

/*
 * Pops this thread's innermost layer and records its end, if the current
 * capture recorded its begin (a begin of an earlier capture, or of none,
 * has no place in this one). ext is the kernel-tag kind to pop.
 * @return the layer's path id, 0 when the stack was empty.
 */
static uint32_t layer_pop(uint16_t ext)
{
    const struct gt__kernel_tags *tags = tags_now();
    struct gt__thread *t = gt__tls;
    struct gt__layer l = {0, 0, 0};
    uint32_t cap;

    if (tags)
        tags->pop(ext);
    if (!t || t == &gt__thread_dead || t->layer_depth == 0)
        return 0;
    t->layer_depth--;
    if (t->layer_depth < GT__SCOPE_STACK_MAX)
        l = t->layers[t->layer_depth];
    cap = gt__capture_state();
    if ((cap & GT__CAP_ON) && l.epoch && l.epoch == gt__capture_epoch_of(cap))
        scope_end(GT_SCOPE_MODULE, l.id, l.flags);
    return l.id;
}

void gt__layer_end(void)
{
    uint32_t id = layer_pop(GT_EXT_LAYER_FWD);

    if (id && GT__UNLIKELY(gt__capture_triggers()))
        gt__trig_module_end(id);
}

/*
 * A layer's backward range (agent/nvtx.c): on the layer stack, flagged
 * GT_SCOPE_F_BACKWARD, so its end finds its path and epoch, but never the
 * layer of a node created inside it (gt__current_layer skips it): such a
 * node is no forward creation of that layer. Backward triggers open and
 * close their segment around it; kernels inside carry GT_EXT_LAYER_BWD.
 */
void gt__layer_bwd_begin(uint32_t path_id)
{
    struct gt__thread *t = gt__thread_self();
    const struct gt__kernel_tags *tags;
    uint32_t cap;

    /* The window opens before the scope is recorded, so it holds it. */
    if (GT__UNLIKELY(gt__capture_triggers()))
        gt__trig_bwd_range_begin(path_id);
    cap = gt__capture_state();
    tags = tags_now();
    if (tags)
        tags->push(GT_EXT_LAYER_BWD, path_id);
    if (!t)
        return;
    if (t->layer_depth < GT__SCOPE_STACK_MAX) {
        t->layers[t->layer_depth].id = path_id;
        t->layers[t->layer_depth].epoch =
            (cap & GT__CAP_ON) ? gt__capture_epoch_of(cap) : 0;
        t->layers[t->layer_depth].flags = GT_SCOPE_F_BACKWARD;
    }
    t->layer_depth++;
    if (cap & GT__CAP_ON)
        scope_begin(GT_SCOPE_MODULE, path_id, 0, GT_SCOPE_F_BACKWARD);
}

void gt__layer_bwd_end(void)
{
    /* After the end is recorded: closing may stop the capture. */
    uint32_t id = layer_pop(GT_EXT_LAYER_BWD);

    if (id && GT__UNLIKELY(gt__capture_triggers()))
        gt__trig_bwd_range_end(id);
}

/* ------------------------------------------------------------ autograd */

/* Trigger path of node creation: the node belongs to every module on the
 * creating thread's layer stack (the layer and all its callers). */
static __thread struct {
    uint64_t seq, fwd_tid;
    int set;
} tl_last_node __attribute__((tls_model("initial-exec")));

uint32_t gt__trig_stack_mask(void)
{
    struct gt__thread *t = gt__tls;
    uint32_t mask = 0, d;

    if (!t || t == &gt__thread_dead)
        return 0;
    d = t->layer_depth < GT__SCOPE_STACK_MAX ? t->layer_depth : GT__SCOPE_STACK_MAX;
    for (uint32_t i = 0; i < d; i++)
        if (!(t->layers[i].flags & GT_SCOPE_F_BACKWARD))
            mask |= gt__trig_layer_mask(t->layers[i].id);
    return mask;
}

int gt__trig_last_node(uint64_t *seq, uint64_t *fwd_tid)
{
    if (!tl_last_node.set)
        return 0;
    *seq = tl_last_node.seq;
    *fwd_tid = tl_last_node.fwd_tid;
    return 1;
}

static void trig_node_created(uint64_t seq, uint64_t fwd_tid)
{
    struct gt__thread *t = gt__tls;

    if (!t || t == &gt__thread_dead)
        return;
    tl_last_node.seq = seq;
    tl_last_node.fwd_tid = fwd_tid;
    tl_last_node.set = 1;
    gt__trig_node_created(seq, fwd_tid, gt__trig_stack_mask(),
                          gt__current_layer());
}

uint32_t gt__current_layer(void)
{
    struct gt__thread *t = gt__tls;
    uint32_t d;

    if (!t || t == &gt__thread_dead || t->layer_depth == 0)
        return 0;
    d = t->layer_depth < GT__SCOPE_STACK_MAX ? t->layer_depth : GT__SCOPE_STACK_MAX;
    /* A backward range is no forward layer: the one around it is. */
    while (d > 0 && (t->layers[d - 1].flags & GT_SCOPE_F_BACKWARD))
        d--;
    return d ? t->layers[d - 1].id : 0;
}

void gt__node_created(uint64_t seq, uint64_t fwd_tid)
{
    const struct gt__kernel_tags *tags;

    /* The hottest hook (every op of every forward): one load when idle. */
    if (GT__LIKELY(!gt__capture_hooks()))
        return;
    if (GT__UNLIKELY(gt__capture_triggers()))
        trig_node_created(seq, fwd_tid);
    if (GT__LIKELY(!gt__capture_on()))
        return;
    tags = tags_now();
    if (tags)
        tags->node_created(seq, fwd_tid, gt__current_layer());
    GT__RECORD(gt_r_node_created, GT_R_NODE_CREATED, r, {
        r->layer = gt__current_layer();
        r->ts = gt__now();
        r->seq = seq;
        r->fwd_tid = fwd_tid;
    });
}

void gt__bwd_node_begin(uint32_t name_id, uint64_t seq, uint64_t fwd_tid,
                        uint32_t acc_layer)
{
    const struct gt__kernel_tags *tags;

    /* A backward window opens at its first node, before the check. */
    if (GT__UNLIKELY(gt__capture_triggers()))
        gt__trig_bwd_node_begin(seq, fwd_tid, acc_layer);
    if (GT__LIKELY(!gt__capture_on()))
        return;
    tags = tags_now();
    if (tags)
        tags->bwd_begin(seq, fwd_tid);
    GT__RECORD(gt_r_bwd_node_begin, GT_R_BWD_NODE_BEGIN, r, {
        r->name = name_id;
        r->ts = gt__now();
        r->seq = seq;
        r->fwd_tid = fwd_tid;
    });
}

void gt__bwd_node_end(uint64_t seq, uint64_t fwd_tid, uint32_t acc_layer)
{
    const struct gt__kernel_tags *tags = tags_now();

    if (tags)
        tags->bwd_end();
    if (GT__LIKELY(gt__capture_on()))
        GT__RECORD(gt_r_bwd_node_end, GT_R_BWD_NODE_END, r, {
            r->flags = 0;
            r->ts = gt__now();
            r->seq = seq;
            r->fwd_tid = fwd_tid;
        });
    /* ... and closes after its last node's end is recorded. */
    if (GT__UNLIKELY(gt__capture_triggers()))
        gt__trig_bwd_node_end(seq, fwd_tid, acc_layer);
}

static void mark(uint16_t type, uint64_t value, uint32_t flags)
{
    GT__RECORD(gt_r_mark, type, r, {
        r->flags = flags;
        r->ts = gt__now();
        r->value = value;
    });
}

void gt__bwd_pass_begin(int extra)
{
    /* Iterations are counted always, so a trigger armed later can name one. */
    gt__trig_pass_begin(extra);
    if (GT__LIKELY(!gt__capture_on()))
        return;
    (void)gt__capture_pass_next();
    mark(GT_R_BWD_PASS_BEGIN, gt__trig_iteration(), gt__trig_pass_flags());
}

void gt__bwd_pass_end(void)
{
    if (gt__capture_on())
        mark(GT_R_BWD_PASS_END, gt__trig_iteration(), gt__trig_pass_flags());
    /* After the mark: the pass end may complete a window, and as an
     * iteration boundary begin or end a requested capture. */
    gt__trig_pass_end();
    gt__capture_boundary(gt__trig_iteration());
}

/* ------------------------------------------------------------ marks */

void gt__step_end(void)
{
    uint64_t ts = gt__now();
    uint64_t n = gt__trig_step();

    /* Stamped before the step's end may complete a window. */
    if (gt__capture_on())
        GT__RECORD(gt_r_mark, GT_R_STEP, r, {
            r->flags = 0;
            r->ts = ts;
            r->value = n;
        });
    /* After the mark: a requested capture begins or ends here. */
    gt__capture_boundary(gt__trig_iteration());
}

void gt__instant(uint32_t name_id)
{
    if (GT__LIKELY(!gt__capture_on()))
        return;
    GT__RECORD(gt_r_instant, GT_R_INSTANT, r, {
        r->name = name_id;
        r->ts = gt__now();
    });
}

void gt__collective(uint32_t op_id, uint32_t group, uint32_t ranks,
                    uint64_t seq, uint64_t begin_ns, uint64_t end_ns)
{
    /* Not gated by capture: merging windows of several ranks needs the
     * collectives around them (the converter keeps them as metadata). */
    GT__RECORD(gt_r_collective, GT_R_COLLECTIVE, r, {
        r->op = op_id;
        r->group = group;
        r->ranks = ranks;
        r->seq = seq;
        r->begin_ns = begin_ns;
        r->end_ns = end_ns;
    });
}
