/*
 * The public C API (include/gradtrace/gradtrace.h).
 *
 * Every recording function starts with one relaxed load of the capture
 * state (agent/capture.h) and a branch; while capturing, it reserves a
 * record in the calling thread's buffer (inlined fast path from ring.h),
 * fills it with the CLOCK_MONOTONIC time and commits it. Scope ends carry the id of their
 * begin, so each thread keeps a small stack of open user scopes and one of
 * open modules (the layer stack, kept even while not capturing because
 * node attribution needs it the moment a capture starts).
 */
#include <errno.h>

#include "agent/capture.h"
#include "agent/core.h"
#include "agent/cuda.h"
#include "agent/ring.h"
#include "agent/stream.h"
#include "agent/torch.h"
#include "agent/trigger.h"

/* Writes a record of type rtype and struct T through variable r. */
#define RECORD(T, rtype, r, fill)                                             \
    do {                                                                      \
        struct T *r = gt__reserve_inline(sizeof(struct T));                   \
        if (GT__LIKELY(r != NULL)) {                                           \
            r->h.type = (rtype);                                              \
            r->h.size = sizeof(struct T);                                     \
            fill;                                                             \
            gt__commit_inline(sizeof(struct T));                              \
        }                                                                     \
    } while (0)

GT_API uint32_t gt_intern(const char *s)
{
    return s ? gt__intern(s, strlen(s)) : 0;
}

static void scope_begin(uint16_t kind, uint32_t name, uint32_t cls,
                        uint16_t flags)
{
    RECORD(gt_r_scope_begin, GT_R_SCOPE_BEGIN, r, {
        r->kind = kind;
        r->flags = flags;
        r->name = name;
        r->cls = cls;
        r->ts = gt__now();
    });
}

static void scope_end(uint16_t kind, uint32_t name, uint16_t flags)
{
    RECORD(gt_r_scope_end, GT_R_SCOPE_END, r, {
        r->kind = kind;
        r->flags = flags;
        r->name = name;
        r->ts = gt__now();
    });
}

GT_API void gt_scope_begin(uint32_t name_id)
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

GT_API void gt_scope_end(void)
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

void gt__layer_begin(uint32_t path_id, uint32_t class_id)
{
    struct gt__thread *t = gt__thread_self();
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
    if (gt__cuda_ext_push)
        gt__cuda_ext_push(GT_EXT_LAYER_FWD, path_id);

    if (!t)
        return;
    /* Inside a running backward node: a recomputed forward (checkpoint). */
    uint16_t flags = gt__torch_bwd_depth ? GT_SCOPE_F_RECOMPUTE : 0;
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
static uint32_t layer_pop(int ext)
{
    struct gt__thread *t = gt__tls;
    struct gt__layer l = {0, 0, 0};
    uint32_t cap;

    if (gt__cuda_ext_pop)
        gt__cuda_ext_pop(ext);
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
    uint32_t cap;

    /* The window opens before the scope is recorded, so it holds it. */
    if (GT__UNLIKELY(gt__capture_triggers()))
        gt__trig_bwd_range_begin(path_id);
    cap = gt__capture_state();
    if (gt__cuda_ext_push)
        gt__cuda_ext_push(GT_EXT_LAYER_BWD, path_id);
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

/* GRADTRACE_LAYERS: the C API is a layer source unless the list leaves
 * it out (0: no configuration, as in tests that start no agent). */
static int capi_layers(void)
{
    unsigned s = gt__agent_config()->layers.sources;
    return s == 0 || (s & GT__LAYERS_CAPI);
}

GT_API void gt_module_begin(uint32_t path_id, uint32_t class_id)
{
    if (!capi_layers())
        return;
    /* Before the module's first operator: so the capture's first
     * operators are recorded, not only those after its first node. */
    if (GT__UNLIKELY(gt__capture_hooks()))
        gt__torch_ops_offer();
    gt__layer_begin(path_id, class_id);
}

GT_API void gt_module_end(void)
{
    if (capi_layers())
        gt__layer_end();
}

/* Trigger path of node creation: the node belongs to every module on the
 * creating thread's layer stack (the layer and all its callers). */
static void trig_node_created(uint64_t seq, uint64_t fwd_tid)
{
    struct gt__thread *t = gt__tls;
    uint32_t mask = 0, d;

    if (!t || t == &gt__thread_dead)
        return;
    d = t->layer_depth < GT__SCOPE_STACK_MAX ? t->layer_depth : GT__SCOPE_STACK_MAX;
    for (uint32_t i = 0; i < d; i++)
        if (!(t->layers[i].flags & GT_SCOPE_F_BACKWARD))
            mask |= gt__trig_layer_mask(t->layers[i].id);
    gt__trig_node_created(seq, fwd_tid, mask, gt__current_layer());
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

GT_API void gt_node_created(uint64_t seq, uint64_t fwd_tid)
{
    /* The hottest hook (every op of every forward): one load when idle. */
    if (GT__LIKELY(!gt__capture_hooks()))
        return;
    if (GT__UNLIKELY(gt__capture_triggers()))
        trig_node_created(seq, fwd_tid);
    if (GT__LIKELY(!gt__capture_on()))
        return;
    if (gt__cuda_node_created)
        gt__cuda_node_created(seq, fwd_tid, gt__current_layer());
    RECORD(gt_r_node_created, GT_R_NODE_CREATED, r, {
        r->layer = gt__current_layer();
        r->ts = gt__now();
        r->seq = seq;
        r->fwd_tid = fwd_tid;
    });
}

GT_API void gt_bwd_node_begin(uint32_t name_id, uint64_t seq, uint64_t fwd_tid)
{
    /* A backward window opens at its first node, before the check. */
    if (GT__UNLIKELY(gt__capture_triggers()))
        gt__trig_bwd_node_begin(seq, fwd_tid);
    if (GT__LIKELY(!gt__capture_on()))
        return;
    if (gt__cuda_bwd_begin)
        gt__cuda_bwd_begin(seq, fwd_tid);
    RECORD(gt_r_bwd_node_begin, GT_R_BWD_NODE_BEGIN, r, {
        r->name = name_id;
        r->ts = gt__now();
        r->seq = seq;
        r->fwd_tid = fwd_tid;
    });
}

GT_API void gt_bwd_node_end(uint64_t seq, uint64_t fwd_tid)
{
    if (gt__cuda_bwd_end)
        gt__cuda_bwd_end();
    if (GT__LIKELY(gt__capture_on()))
        RECORD(gt_r_bwd_node_end, GT_R_BWD_NODE_END, r, {
            r->flags = 0;
            r->ts = gt__now();
            r->seq = seq;
            r->fwd_tid = fwd_tid;
        });
    /* ... and closes after its last node's end is recorded. */
    if (GT__UNLIKELY(gt__capture_triggers()))
        gt__trig_bwd_node_end(seq, fwd_tid);
}

static void mark(uint16_t type, uint64_t value, uint32_t flags)
{
    RECORD(gt_r_mark, type, r, {
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

GT_API void gt_bwd_pass_begin(void)
{
    gt__bwd_pass_begin(0);
}

GT_API void gt_bwd_pass_end(void)
{
    if (gt__capture_on())
        mark(GT_R_BWD_PASS_END, gt__trig_iteration(), gt__trig_pass_flags());
    /* After the mark: the pass end may complete a window, and as an
     * iteration boundary begin or end a requested capture. */
    gt__trig_pass_end();
    gt__capture_boundary(gt__trig_iteration());
}

GT_API void gt_step_expect(void)
{
    gt__trig_step_expect();
}

GT_API void gt_step(uint64_t step)
{
    (void)step; /* the agent numbers steps itself, as triggers count them */
    uint64_t ts = gt__now();
    uint64_t n = gt__trig_step();

    /* Stamped before the step's end may complete a window. */
    if (gt__capture_on())
        RECORD(gt_r_mark, GT_R_STEP, r, {
            r->flags = 0;
            r->ts = ts;
            r->value = n;
        });
    /* After the mark: a requested capture begins or ends here. */
    gt__capture_boundary(gt__trig_iteration());
}

GT_API void gt_instant(uint32_t name_id)
{
    if (GT__LIKELY(!gt__capture_on()))
        return;
    RECORD(gt_r_instant, GT_R_INSTANT, r, {
        r->name = name_id;
        r->ts = gt__now();
    });
}

GT_API void gt_capture_start(void)
{
    gt__capture_set(1, 0);
    gt__capture_started();
}

GT_API void gt_capture_stop(void)
{
    gt__capture_request_cancel();
    gt__capture_set(0, 1);
}

GT_API int gt_capture_active(void)
{
    return gt__capture_on();
}

GT_API uint64_t gt_now_ns(void)
{
    return gt__now();
}

GT_API void gt_collective(uint32_t op_id, uint32_t group, uint32_t ranks,
                          uint64_t seq, uint64_t begin_ns, uint64_t end_ns)
{
    /* Not gated by capture: merging windows of several ranks needs the
     * collectives around them (the converter keeps them as metadata). */
    RECORD(gt_r_collective, GT_R_COLLECTIVE, r, {
        r->op = op_id;
        r->group = group;
        r->ranks = ranks;
        r->seq = seq;
        r->begin_ns = begin_ns;
        r->end_ns = end_ns;
    });
}

GT_API int gt_job_trigger_take(char *buf, size_t cap)
{
    return buf ? gt__jobtrig_take(buf, cap) : -EINVAL;
}

GT_API void gt_job_route(int up)
{
    __atomic_store_n(&gt__st.job_route, up != 0, __ATOMIC_RELAXED);
    /* With the process info, at the next pass and in every later stream. */
    __atomic_store_n(&gt__st.meta_due, 1, __ATOMIC_RELEASE);
}

GT_API int gt_trigger_arm(const char *spec)
{
    return spec ? gt__trig_arm(spec, strlen(spec)) : -EINVAL;
}

GT_API uint64_t gt_iteration(void)
{
    return gt__trig_iteration();
}

GT_API int gt_hooks_wanted(void)
{
    /* Also while a requested capture waits for its boundary: the hooks
     * are then in by the first forward it records. */
    return gt__capture_hooks_ask() || gt__capture_hooks();
}

GT_API void gt_finish(void)
{
    /* The exit path itself, run early: idempotent, so the destructor
     * that may still run later does nothing. */
    gt__agent_stop();
}

GT_API unsigned gt_api_version(void)
{
    return GT_API_VERSION;
}
