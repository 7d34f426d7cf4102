/*
 * Record dispatch of one writer: a table of {record type, size, route,
 * stream part, writer part}, and the writer parts that match begin/end
 * pairs (scopes, backward nodes) on per-thread stacks; a closed scope is
 * written by scopes.c.
 *
 * Begin/end pairs are said as one complete slice when they end;
 * a thread's timestamps are clamped to never go backwards, which together
 * with the stack discipline makes every thread track nest by
 * construction, whatever an untrusted agent sends. Records that already
 * carry start and end (GPU activity, CUDA API calls) go through gt__place
 * (tracks.c) instead, because they arrive late and in no guaranteed order.
 *
 * Flows: a flow's start and finish are always written together, at the
 * moment the second of their two records is seen. That is what keeps
 * arrows from dangling across rotated files: both halves land in the same
 * file by construction. The cost is that the records waiting for their
 * partner are held in bounded maps (map.c), evicting the oldest.
 *
 * The table says, per record type, how long a record must be (exactly,
 * or at least for the two variable ones), how window.c routes it, what it
 * changes in the stream (stream.c, metadata records only: done once per
 * record) and what it does in each writer that gets it. A record of the
 * wrong size is counted as bad_records by each writer that gets it and
 * goes no further.
 */
#include <errno.h>
#include <stddef.h>

#include "common/alloc.h"
#include "daemon/convert/internal.h"

/* The current thread (from the last GT_R_THREAD), or NULL (counted). */
static struct gt__wthread *cur_thread(struct gt__writer *c)
{
    if (c->cur)
        return &c->threads[c->cur - 1];
    c->an.no_thread++;
    return NULL;
}

/* A thread's time never goes back: clamping keeps its stacks nested. */
static uint64_t thread_ts(struct gt__writer *c, struct gt__wthread *th,
                          uint64_t ts)
{
    if (ts < th->last_ts) {
        c->an.time_backwards++;
        ts = th->last_ts;
    }
    th->last_ts = ts;
    gt__see_ts(c, ts);
    return ts;
}

static struct gt__open *stack_push(struct gt__writer *c, struct gt__stack *s)
{
    if (s->depth >= GT__STACK_MAX) {
        c->an.depth_dropped++;
        s->dropped++;
        return NULL;
    }
    if (s->depth == s->cap) {
        uint32_t cap = s->cap ? s->cap * 2 : 16;
        struct gt__open *ne = gt__realloc(s->e, cap * sizeof(*ne));
        if (!ne) {
            c->an.depth_dropped++;
            s->dropped++;
            return NULL;
        }
        s->e = ne;
        s->cap = cap;
    }
    struct gt__open *o = &s->e[s->depth++];
    memset(o, 0, sizeof(*o));
    return o;
}

/*
 * Ends the entry that match() accepts on stack s at ts: entries above it
 * were left open by their thread (a lost end, or improper nesting) and are
 * closed at the same time, which keeps the track nested.
 */
typedef int (*match_fn)(const struct gt__open *o, const void *key);
typedef void (*emit_fn)(struct gt__writer *c, struct gt__wthread *th,
                        const struct gt__open *o, uint64_t end, int unclosed);

static void stack_end(struct gt__writer *c, struct gt__wthread *th,
                      struct gt__stack *s, match_fn match, const void *key,
                      emit_fn emit, uint64_t ts)
{
    /* Emitting never creates a thread, so th and s stay valid. */
    if (s->depth > 0 && match(&s->e[s->depth - 1], key)) {
        struct gt__open o = s->e[--s->depth];
        emit(c, th, &o, ts, 0);
        return;
    }
    if (s->dropped > 0) {
        /* Most likely the end of a begin dropped beyond the depth cap. */
        s->dropped--;
        return;
    }
    uint32_t i = s->depth;
    while (i > 0 && !match(&s->e[i - 1], key))
        i--;
    if (i == 0) {
        c->an.end_without_begin++;
        return;
    }
    while (s->depth >= i) {
        struct gt__open o = s->e[--s->depth];
        if (s->depth >= i)
            c->an.closed_implicitly++;
        emit(c, th, &o, ts, 0);
        if (s->depth == 0)
            break;
    }
}

struct scope_key {
    uint16_t kind;
    uint32_t name;
};

static int scope_match(const struct gt__open *o, const void *key)
{
    const struct scope_key *k = key;
    return o->kind == k->kind && o->name == k->name;
}

struct node_key {
    uint64_t seq, fwd_tid;
};

static int node_match(const struct gt__open *o, const void *key)
{
    const struct node_key *k = key;
    return o->seq == k->seq && o->fwd_tid == k->fwd_tid;
}

/* ------------------------------------------------------------ handlers */

static void on_scope_begin(struct gt__writer *c, const uint8_t *rec,
                           uint16_t size)
{
    struct gt_r_scope_begin r;
    struct gt__wthread *th;
    (void)size;
    memcpy(&r, rec, sizeof(r));
    if (!(th = cur_thread(c)))
        return;
    uint64_t ts = thread_ts(c, th, r.ts);
    /* A backward range names no class and opens no forward nesting. */
    if (r.kind == GT_SCOPE_MODULE && !(r.flags & GT_SCOPE_F_BACKWARD)) {
        gt__layer_set_class(c, r.name, r.cls);
        /* The top of a path chain hangs under the outermost module open
         * (the root, named by its class): a module shared by several
         * blocks ("act" called in blocks.0 and blocks.1) is no child of
         * the first block that called it. */
        for (uint32_t i = 0; i < th->scopes.depth; i++) {
            const struct gt__open *e = &th->scopes.e[i];
            if (e->kind == GT_SCOPE_MODULE && !(e->flags & GT__OPEN_BACKWARD)) {
                if (e->name != r.name)
                    gt__layer_nest(c, r.name, e->name);
                break;
            }
        }
    }
    gt__step_note_begin(c, th, ts);
    struct gt__open *o = stack_push(c, &th->scopes);
    if (!o)
        return;
    o->ts = ts;
    o->kind = r.kind;
    o->name = r.name;
    o->cls = r.cls;
    o->ord = ++th->opens;
    if (r.kind == GT_SCOPE_MODULE && (r.flags & GT_SCOPE_F_RECOMPUTE))
        o->flags = GT__OPEN_RECOMPUTE;
    else if (r.kind == GT_SCOPE_MODULE && (r.flags & GT_SCOPE_F_BACKWARD))
        o->flags = GT__OPEN_BACKWARD;
}

static void on_scope_end(struct gt__writer *c, const uint8_t *rec,
                         uint16_t size)
{
    struct gt_r_scope_end r;
    struct gt__wthread *th;
    (void)size;
    memcpy(&r, rec, sizeof(r));
    if (!(th = cur_thread(c)))
        return;
    struct scope_key k = {r.kind, r.name};
    stack_end(c, th, &th->scopes, scope_match, &k, gt__scope_closed,
              thread_ts(c, th, r.ts));
}

struct op_key {
    uint32_t name;
    uint64_t id;
};

static int op_match(const struct gt__open *o, const void *key)
{
    const struct op_key *k = key;
    return o->kind == GT__KIND_OP && o->name == k->name && o->op_id == k->id;
}

/* Operators share the thread's scope stack: they nest in its modules and
 * modules in them, on one track, by the same stack discipline. */
static void on_op_begin(struct gt__writer *c, const uint8_t *rec,
                        uint16_t size)
{
    struct gt_r_op_begin r;
    struct gt__wthread *th;
    (void)size;
    memcpy(&r, rec, sizeof(r));
    if (!(th = cur_thread(c)))
        return;
    uint64_t ts = thread_ts(c, th, r.ts);
    gt__step_note_begin(c, th, ts);
    struct gt__open *o = stack_push(c, &th->scopes);
    if (!o)
        return;
    o->ts = ts;
    o->kind = GT__KIND_OP;
    o->name = r.name;
    o->op_id = r.id;
    o->seq = r.seq;
    o->fwd_tid = r.fwd_tid;
    o->ord = ++th->opens;
    if (th->scopes.depth >= 2 &&
        th->scopes.e[th->scopes.depth - 2].kind == GT__KIND_REGION)
        gt__region_op(c, &th->scopes.e[th->scopes.depth - 2], o);
}

/* A compiled graph's run: a scope of its own on the thread, whose
 * operators join its map (compiled.c). */
struct region_key {
    uint32_t graph;
};

static int region_match(const struct gt__open *o, const void *key)
{
    const struct region_key *k = key;
    return o->kind == GT__KIND_REGION && o->op_id == k->graph;
}

static void on_region(struct gt__writer *c, const uint8_t *rec,
                      uint16_t size)
{
    struct gt_r_compiled_region r;
    struct gt__wthread *th;
    (void)size;
    memcpy(&r, rec, sizeof(r));
    if (!(th = cur_thread(c)))
        return;
    uint64_t ts = thread_ts(c, th, r.ts);
    if (r.h.type == GT_R_COMPILED_END) {
        struct region_key k = {r.graph};
        stack_end(c, th, &th->scopes, region_match, &k, gt__scope_closed, ts);
        return;
    }
    gt__step_note_begin(c, th, ts);
    struct gt__open *o = stack_push(c, &th->scopes);
    if (!o)
        return;
    o->ts = ts;
    o->ord = ++th->opens;
    gt__region_begin(c, th, o, r.graph, r.layer);
}

static void on_op_end(struct gt__writer *c, const uint8_t *rec, uint16_t size)
{
    struct gt_r_op_end r;
    struct gt__wthread *th;
    (void)size;
    memcpy(&r, rec, sizeof(r));
    if (!(th = cur_thread(c)))
        return;
    struct op_key k = {r.name, r.id};
    stack_end(c, th, &th->scopes, op_match, &k, gt__scope_closed,
              thread_ts(c, th, r.ts));
}

/*
 * The backward node running on th when no module scope was opened since
 * it began, or NULL: a node created now is made by it (double backward:
 * its derivative), so it belongs to that node's layer.
 */
static const struct gt__open *running_node(const struct gt__wthread *th)
{
    if (th->nodes.depth == 0)
        return NULL;
    const struct gt__open *n = &th->nodes.e[th->nodes.depth - 1];
    for (uint32_t i = th->scopes.depth; i > 0; i--) {
        const struct gt__open *e = &th->scopes.e[i - 1];
        if (e->kind == GT_SCOPE_MODULE)
            return e->ord > n->ord ? NULL : n;
    }
    return n;
}

/* Keeps creation v of (fwd_tid, seq); a replay keeps the used mark. */
static void creation_keep(struct gt__writer *c, uint64_t fwd_tid, uint64_t seq,
                          struct gt__bmap_val *v)
{
    struct gt__bmap_val *ex = gt__bmap_find(&c->nodes, fwd_tid, seq), old;
    if (ex) {
        v->y |= ex->y & GT__CREATION_USED;
        *ex = *v;
        return;
    }
    /* A used creation is only kept for a retained graph's next backward:
     * losing it to a newer one is no anomaly. */
    if (gt__bmap_put_old(&c->nodes, fwd_tid, seq, v, &old) &&
        !(old.y & GT__CREATION_USED))
        c->an.node_map_evicted++;
}

static void on_node_created(struct gt__writer *c, const uint8_t *rec,
                            uint16_t size)
{
    struct gt_r_node_created r;
    struct gt__wthread *th;
    (void)size;
    memcpy(&r, rec, sizeof(r));
    if (!(th = cur_thread(c)))
        return;
    /* A creation after backward nodes ran outside any pass: the next
     * forward has begun, so that backward's layer spans are complete.
     * Unless it is older than the thread's last event: then it is a
     * capture window's replay (the agent's per-thread time never goes
     * back otherwise), which keeps its forward time (it ends no span,
     * so needs no clamping) and does not end the backward group; or it
     * is made by the backward node running (double backward). */
    uint64_t ts = r.ts;
    int replay = ts < th->last_ts;
    if (!replay)
        ts = thread_ts(c, th, ts);
    else
        gt__see_ts(c, ts);
    const struct gt__open *run = replay ? NULL : running_node(th);
    uint32_t layer = run ? run->layer : r.layer;
    uint32_t order = run ? run->order + 1u : 1u;
    if (order > GT__CREATION_ORDER_MASK)
        order = GT__CREATION_ORDER_MASK;
    /* Made while a node runs (a derivative, or a recompute's node): still
     * the backward, not the next forward. */
    if (th->nodes.depth == 0)
        gt__layers_outside_pass(c, ts);
    /* A late creation's arrow is written now, before the slice around it
     * has ended: it always gets a slice of its own (no INSIDE). */
    int used = gt__node_created_late(c, r.fwd_tid, r.seq, ts, th->os_tid,
                                     layer, order);
    uint64_t in = !replay && th->scopes.depth > 0 ? GT__CREATION_INSIDE : 0;
    if (in) {
        if (th->eqc_ts != ts || th->eqc_n == 0) {
            th->eqc_ts = ts;
            th->eqc_n = 0;
        }
        if (th->eqc_n < GT__EQC_MAX)
            th->eqc[th->eqc_n++] = (struct gt__eqc_key){r.fwd_tid, r.seq};
        else
            in = 0; /* cannot be corrected later: a slice of its own */
    }
    /* The operator that creates a node gets its sequence number (Kineto's
     * "Sequence number"; the agent cannot read it at the operator). */
    if (in) {
        struct gt__open *top = &th->scopes.e[th->scopes.depth - 1];
        if (top->kind == GT__KIND_OP && top->seq == UINT64_MAX) {
            top->seq = r.seq;
            top->fwd_tid = r.fwd_tid;
        }
    }
    struct gt__bmap_val v = {
        .x = ts, .p = th->os_tid, .q = layer,
        .y = order | (used ? GT__CREATION_USED : 0) | in |
             (uint64_t)gt__emit_part(c->out) << GT__CREATION_FILE_SHIFT};
    creation_keep(c, r.fwd_tid, r.seq, &v);
}

static void on_node_begin(struct gt__writer *c, const uint8_t *rec,
                          uint16_t size)
{
    struct gt_r_bwd_node_begin r;
    struct gt__wthread *th;
    struct gt__bmap_val *v;
    (void)size;
    memcpy(&r, rec, sizeof(r));
    if (!(th = cur_thread(c)))
        return;
    uint64_t ts = thread_ts(c, th, r.ts);
    struct gt__open *o = stack_push(c, &th->nodes);
    if (!o)
        return;
    o->ts = ts;
    o->name = r.name;
    o->seq = r.seq;
    o->fwd_tid = r.fwd_tid;
    o->ord = ++th->opens;
    o->order = 1;
    /* Looked up, not taken: a second backward over a retained graph runs
     * the same node again and must find its layer too. */
    if (r.seq != UINT64_MAX &&
        (v = gt__bmap_find(&c->nodes, r.fwd_tid, r.seq)) != NULL) {
        v->y |= GT__CREATION_USED;
        o->has_creation = 1;
        o->created_ts = v->x;
        o->created_tid = v->p;
        o->created_in = (v->y & GT__CREATION_INSIDE) != 0;
        o->created_file = (uint32_t)(v->y >> GT__CREATION_FILE_SHIFT);
        o->layer = v->q;
        o->order = (uint16_t)(v->y & GT__CREATION_ORDER_MASK);
        if (o->order == 0)
            o->order = 1;
        /* Made by a running node and run inside one (a nested pass): a
         * reentrant checkpoint's recompute, which runs its nodes before
         * its node ends; a double backward's run after. The node is of
         * the order of the one running it, as in the eager forward. */
        const struct gt__open *up =
            th->nodes.depth >= 2 ? &th->nodes.e[th->nodes.depth - 2] : NULL;
        if (up && o->order > up->order)
            o->order = up->order;
    }
}

static void on_node_layer(struct gt__writer *c, const uint8_t *rec,
                          uint16_t size)
{
    struct gt_r_bwd_node_layer r;
    struct gt__wthread *th;
    (void)size;
    memcpy(&r, rec, sizeof(r));
    if (!(th = cur_thread(c)))
        return;
    (void)thread_ts(c, th, r.ts);
    if (th->nodes.depth == 0 || r.layer == 0) {
        c->an.node_layer_unmatched++;
        return;
    }
    struct gt__open *o = &th->nodes.e[th->nodes.depth - 1];
    o->layer = r.layer;
    o->param = r.param;
    o->flags |= GT__OPEN_LAYER_SET;
}

static void on_node_end(struct gt__writer *c, const uint8_t *rec,
                        uint16_t size)
{
    struct gt_r_bwd_node_end r;
    struct gt__wthread *th;
    (void)size;
    memcpy(&r, rec, sizeof(r));
    if (!(th = cur_thread(c)))
        return;
    struct node_key k = {r.seq, r.fwd_tid};
    stack_end(c, th, &th->nodes, node_match, &k, gt__node_ended,
              thread_ts(c, th, r.ts));
}

static void on_pass(struct gt__writer *c, const uint8_t *rec, uint16_t size)
{
    struct gt_r_mark r;
    struct gt__wthread *th;
    (void)size;
    memcpy(&r, rec, sizeof(r));
    if (!(th = cur_thread(c)))
        return;
    uint64_t ts = thread_ts(c, th, r.ts);
    if (r.h.type == GT_R_BWD_PASS_BEGIN)
        gt__pass_begin(c, th, ts, r.value);
    else
        gt__pass_end(c, th, ts, r.value, r.flags);
}

static void on_step(struct gt__writer *c, const uint8_t *rec, uint16_t size)
{
    struct gt_r_mark r;
    (void)size;
    memcpy(&r, rec, sizeof(r));
    /* Any thread may mark a step: no current thread is no anomaly. */
    struct gt__wthread *th = c->cur ? &c->threads[c->cur - 1] : NULL;
    uint64_t ts = th ? thread_ts(c, th, r.ts) : r.ts;
    gt__see_ts(c, ts);
    gt__step(c, th, ts, r.value);
}

static void on_instant(struct gt__writer *c, const uint8_t *rec,
                       uint16_t size)
{
    struct gt_r_instant r;
    struct gt__wthread *th;
    struct gt__ev ev;
    (void)size;
    memcpy(&r, rec, sizeof(r));
    if (!(th = cur_thread(c)))
        return;
    uint64_t ts = thread_ts(c, th, r.ts);
    gt__ev_init(&ev, GT__CAT_INSTANT, th->track, ts, ts);
    gt__ev_name_sid(&ev, gt__str_known(c, r.name));
    gt__emit_instant(c->out, &ev);
}

/* ------------------------------------------------------------ the table */

#define EXACT(t, rs) .type = (t), .size = sizeof(struct rs)
#define CORR(rs) .corr_off = offsetof(struct rs, corr)

static const struct gt__rec_kind kinds[] = {
    [GT_R_STRING] = {EXACT(GT_R_STRING, gt_r_string), .var = 1, .route = GT__ROUTE_META,
     .stream = gt__cs_on_string},
    [GT_R_PROCESS_INFO] = {EXACT(GT_R_PROCESS_INFO, gt_r_process_info), .var = 1,
     .route = GT__ROUTE_META, .stream = gt__cs_on_process,
     .writer = gt__on_process},
    [GT_R_THREAD_INFO] = {EXACT(GT_R_THREAD_INFO, gt_r_thread_info), .route = GT__ROUTE_META,
     .stream = gt__cs_on_thread_info, .writer = gt__on_thread_info},
    [GT_R_THREAD] = {EXACT(GT_R_THREAD, gt_r_thread), .route = GT__ROUTE_META,
     .stream = gt__cs_on_thread, .writer = gt__on_thread},
    [GT_R_SCOPE_BEGIN] = {EXACT(GT_R_SCOPE_BEGIN, gt_r_scope_begin), .writer = on_scope_begin},
    [GT_R_SCOPE_END] = {EXACT(GT_R_SCOPE_END, gt_r_scope_end), .writer = on_scope_end},
    [GT_R_NODE_CREATED] = {EXACT(GT_R_NODE_CREATED, gt_r_node_created), .writer = on_node_created},
    [GT_R_BWD_NODE_BEGIN] = {EXACT(GT_R_BWD_NODE_BEGIN, gt_r_bwd_node_begin), .writer = on_node_begin},
    [GT_R_BWD_NODE_END] = {EXACT(GT_R_BWD_NODE_END, gt_r_bwd_node_end), .writer = on_node_end},
    [GT_R_BWD_PASS_BEGIN] = {EXACT(GT_R_BWD_PASS_BEGIN, gt_r_mark), .writer = on_pass},
    [GT_R_BWD_PASS_END] = {EXACT(GT_R_BWD_PASS_END, gt_r_mark), .writer = on_pass},
    [GT_R_STEP] = {EXACT(GT_R_STEP, gt_r_mark), .writer = on_step},
    [GT_R_INSTANT] = {EXACT(GT_R_INSTANT, gt_r_instant), .writer = on_instant},
    [GT_R_GPU_KERNEL] = {EXACT(GT_R_GPU_KERNEL, gt_r_gpu_kernel), .route = GT__ROUTE_CORR,
     CORR(gt_r_gpu_kernel), .stream = gt__cs_on_kernel,
     .writer = gt__on_kernel},
    [GT_R_GPU_MEMCPY] = {EXACT(GT_R_GPU_MEMCPY, gt_r_gpu_memcpy), .route = GT__ROUTE_CORR,
     CORR(gt_r_gpu_memcpy), .writer = gt__on_memcpy},
    [GT_R_GPU_MEMSET] = {EXACT(GT_R_GPU_MEMSET, gt_r_gpu_memset), .route = GT__ROUTE_CORR,
     CORR(gt_r_gpu_memset), .writer = gt__on_memset},
    [GT_R_CUDA_API] = {EXACT(GT_R_CUDA_API, gt_r_cuda_api), .route = GT__ROUTE_API,
     .writer = gt__on_cuda_api},
    [GT_R_EXT_CORR] = {EXACT(GT_R_EXT_CORR, gt_r_ext_corr), .route = GT__ROUTE_CORR,
     CORR(gt_r_ext_corr), .writer = gt__on_ext_corr},
    [GT_R_CLOCK_SYNC] = {EXACT(GT_R_CLOCK_SYNC, gt_r_clock_sync), .route = GT__ROUTE_META,
     .stream = gt__cs_on_clock},
    [GT_R_LOST] = {EXACT(GT_R_LOST, gt_r_lost), .route = GT__ROUTE_META,
     .stream = gt__cs_on_lost, .writer = gt__on_lost},
    [GT_R_WINDOW_BEGIN] = {EXACT(GT_R_WINDOW_BEGIN, gt_r_window), .route = GT__ROUTE_WINDOW,
     .writer = gt__on_window},
    [GT_R_WINDOW_END] = {EXACT(GT_R_WINDOW_END, gt_r_window), .route = GT__ROUTE_WINDOW,
     .writer = gt__on_window},
    [GT_R_WARNING] = {EXACT(GT_R_WARNING, gt_r_warning), .route = GT__ROUTE_META,
     .stream = gt__cs_on_warning, .writer = gt__on_warning},
    [GT_R_WINDOW_DONE] = {EXACT(GT_R_WINDOW_DONE, gt_r_window), .route = GT__ROUTE_WINDOW},
    [GT_R_BWD_NODE_LAYER] = {EXACT(GT_R_BWD_NODE_LAYER, gt_r_bwd_node_layer), .writer = on_node_layer},
    [GT_R_GOODBYE] = {EXACT(GT_R_GOODBYE, gt_r_goodbye), .route = GT__ROUTE_META,
     .stream = gt__cs_on_goodbye},
    /* window.c hands writers a WINDOW_BEGIN in its place. */
    [GT_R_WINDOW_BEGIN_SHARED] = {EXACT(GT_R_WINDOW_BEGIN_SHARED, gt_r_window),
                                  .route = GT__ROUTE_WINDOW},
    [GT_R_OP_BEGIN] = {EXACT(GT_R_OP_BEGIN, gt_r_op_begin), .writer = on_op_begin},
    [GT_R_OP_END] = {EXACT(GT_R_OP_END, gt_r_op_end), .writer = on_op_end},
    [GT_R_COLLECTIVE] = {EXACT(GT_R_COLLECTIVE, gt_r_collective),
                         .route = GT__ROUTE_META,
                         .stream = gt__cs_on_collective},
    /* For the daemon's job triggers (gt__conv_job_route): nothing in the
     * trace. */
    [GT_R_JOB_ROUTE] = {EXACT(GT_R_JOB_ROUTE, gt_r_job_route), .route = GT__ROUTE_META,
     .stream = gt__cs_on_job_route},
    /* Compiled graphs (schema/torch.md, "Compiled models"; compiled.c):
     * maps and module names are stream metadata, regions scopes whose
     * operators join their map. */
    [GT_R_COMPILED_GRAPH] = {EXACT(GT_R_COMPILED_GRAPH, gt_r_compiled_graph),
                             .route = GT__ROUTE_META, .stream = gt__cs_on_cgraph},
    [GT_R_COMPILED_CALL] = {EXACT(GT_R_COMPILED_CALL, gt_r_compiled_call),
                            .route = GT__ROUTE_META, .stream = gt__cs_on_ccall},
    [GT_R_COMPILED_BEGIN] = {EXACT(GT_R_COMPILED_BEGIN, gt_r_compiled_region),
                             .writer = on_region},
    [GT_R_COMPILED_END] = {EXACT(GT_R_COMPILED_END, gt_r_compiled_region),
                           .writer = on_region},
    [GT_R_COMPILE_SPAN] = {EXACT(GT_R_COMPILE_SPAN, gt_r_compile_span),
                           .route = GT__ROUTE_META,
                           .writer = gt__on_compile_span},
    [GT_R_LAYER_INFO] = {EXACT(GT_R_LAYER_INFO, gt_r_layer_info),
                         .route = GT__ROUTE_META,
                         .stream = gt__cs_on_layer_info},
};

#undef EXACT
#undef CORR

const struct gt__rec_kind *gt__rec_kind(uint16_t type)
{
    /* The table is indexed by type; a number without a row (0, reserved
     * or unknown) has type 0 there. */
    if (type == 0 || type >= sizeof(kinds) / sizeof(kinds[0]) ||
        kinds[type].type != type)
        return NULL;
    return &kinds[type];
}

int gt__rec_size_ok(const struct gt__rec_kind *k, uint16_t size)
{
    return k->var ? size >= k->size : size == k->size;
}

void gt__writer_record(struct gt__writer *c, uint16_t type, uint16_t size,
                       const uint8_t *rec)
{
    const struct gt__rec_kind *k = gt__rec_kind(type);
    if (c->err)
        return;
    if (c->window)
        c->records++;
    if (!k)
        c->an.unknown_records++;
    else if (!gt__rec_size_ok(k, size))
        c->an.bad_records++;
    else if (k->writer)
        k->writer(c, rec, size);
    if (gt__emit_between(c->out) && !c->err)
        c->err = -EIO;
}
