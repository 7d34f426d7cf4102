/*
 * Closed scopes of one writer (records.c pops them off a thread's stack):
 * how each is written (a module's forward also as its layer's span, an
 * operator as Kineto writes one, a compiled region to compiled.c, a
 * backward range to layers.c), parents before same-start children, and
 * what a scope inside a backward node takes out of that node's own time:
 * a checkpoint's recompute, and communication (GT_SCOPE_COMM), which is
 * the node's communication instead (schema/trace-output.md).
 */
#include "common/alloc.h"
#include "daemon/convert/internal.h"

/* An operator as Kineto writes one: cat cpu_op and its four ids. */
static void emit_op(struct gt__writer *c, struct gt__wthread *th,
                    const struct gt__open *o, uint64_t end, int unclosed)
{
    struct gt__ev ev;
    gt__ev_init(&ev, GT__CAT_CPU_OP, th->track, o->ts, end);
    gt__ev_name_sid(&ev, gt__str_known(c, o->name));
    gt__ev_u64(&ev, "External id", o->op_id);
    gt__ev_u64(&ev, "Record function id", o->op_id);
    if (o->seq != UINT64_MAX) {
        gt__ev_u64(&ev, "Sequence number", o->seq);
        gt__ev_u64(&ev, "Fwd thread id", o->fwd_tid);
    }
    if (unclosed)
        gt__ev_bool(&ev, "unclosed", 1);
    c->total_ops++;
    if ((o->flags & GT__OPEN_IN_REGION) && gt__region_op_emit(c, th, o, end, &ev))
        return;
    gt__emit_slice(c->out, &ev);
}

/* A module's class (string id cls, 0 none) as an event names it: *sid
 * (0 when the stream never defined it, which reads as a placeholder).
 * @return whether it has text at all (an empty class is none). */
static int class_of(struct gt__writer *c, uint32_t cls, uint32_t *sid)
{
    *sid = 0;
    if (!cls)
        return 0;
    *sid = gt__str_known(c, cls);
    return *sid == 0 || c->s->strs[*sid].esc_len > 0;
}

static void emit_scope(struct gt__writer *c, struct gt__wthread *th,
                       const struct gt__open *o, uint64_t end, int unclosed)
{
    static const uint8_t cats[] = {GT__CAT_USER, GT__CAT_MODULE,
                                   GT__CAT_NVTX, GT__CAT_COMM};
    struct gt__ev ev;
    uint32_t cls;
    if (o->kind == GT__KIND_OP) {
        emit_op(c, th, o, end, unclosed);
        return;
    }
    if (o->kind == GT__KIND_REGION) {
        gt__region_closed(c, th, o, end, unclosed);
        return;
    }
    int module = o->kind == GT_SCOPE_MODULE;
    int rc = module && (o->flags & GT__OPEN_RECOMPUTE);
    int bw = module && (o->flags & GT__OPEN_BACKWARD);
    uint32_t track = th->track;
    /* Communication inside a backward node is drawn inside that node, on
     * the thread's backward track. */
    if (o->kind == GT_SCOPE_COMM && th->nodes.depth > 0 &&
        o->ts >= th->nodes.e[th->nodes.depth - 1].ts) {
        uint32_t bt = gt__thread_track(c, th, 1);
        track = bt ? bt : track;
    }
    gt__ev_init(&ev, o->kind < GT_SCOPE_KIND_COUNT ? cats[o->kind]
                                                   : GT__CAT_SCOPE,
                track, o->ts, end);
    gt__ev_name_sid(&ev, gt__str_known(c, o->name));
    int has_cls = class_of(c, o->cls, &cls);
    if (module) {
        /* "<path> (<Class>) forward" (or "recompute", "backward") */
        if (has_cls) {
            gt__ev_name(&ev, " (");
            gt__ev_name_sid(&ev, cls);
            gt__ev_name(&ev, ")");
        }
        gt__ev_name(&ev, rc ? " recompute" : bw ? " backward" : " forward");
    } else if (has_cls) {
        gt__ev_sid(&ev, "domain", cls);
    }
    if (module && !rc && !bw && o->comm_ns) {
        /* Communication in the forward, its sub-modules' included. */
        uint64_t dur = end > o->ts ? end - o->ts : 0;
        gt__ev_ns(&ev, "comm_us", o->comm_ns < dur ? o->comm_ns : dur);
    }
    if (rc)
        gt__ev_lit(&ev, "phase", "recompute");
    if (bw)
        gt__ev_lit(&ev, "phase", "backward");
    if (unclosed)
        gt__ev_bool(&ev, "unclosed", 1);
    gt__emit_slice(c->out, &ev);
    /* A module's forward is also its layer's forward span; a backward
     * range's layer span goes to `Layers backward` instead. */
    uint32_t lt = module && !bw ? gt__thread_track(c, th, 2) : 0;
    if (lt) {
        ev.track = lt;
        ev.cat = rc ? GT__CAT_LAYER_RECOMPUTE : GT__CAT_LAYER_FORWARD;
        gt__emit_slice(c->out, &ev);
    }
    if (bw)
        gt__layer_range_closed(c, th, o, end, unclosed);
}

/*
 * A checkpoint's recompute forward runs inside the backward node that
 * needed its tensors (reentrant: the checkpoint's own node; non-reentrant:
 * the first node that unpacks a saved tensor). Its time is the layer's
 * recompute, not that node's own backward time: the outermost recompute
 * scope inside the innermost open node is added to the node's nested time
 * (inner recompute scopes are inside it already).
 */
static void recompute_not_own(struct gt__wthread *th, const struct gt__open *o,
                              uint64_t end)
{
    const struct gt__stack *s = &th->scopes;
    struct gt__open *node;

    if (th->nodes.depth == 0 || end <= o->ts)
        return;
    node = &th->nodes.e[th->nodes.depth - 1];
    if (o->ts < node->ts)
        return; /* opened before the node: not inside it */
    for (uint32_t i = s->depth; i > 0; i--) {
        const struct gt__open *e = &s->e[i - 1];
        if (e->ts < node->ts)
            break;
        if (e->kind == GT_SCOPE_MODULE && (e->flags & GT__OPEN_RECOMPUTE))
            return; /* an enclosing recompute inside the node counts it */
    }
    node->nested_ns += end - o->ts;
}

/*
 * Communication (a GT_SCOPE_COMM scope: DDP's reducer, a c10d collective)
 * inside a backward node is not the node's own compute: the outermost
 * such scope inside the innermost open node is added to the node's
 * communication (gt__emit_node takes it out of its own time). One inside
 * a recompute there is part of the recompute, which is not the node's
 * own already. One in a backward pass but in no node (DDP waiting for its
 * all-reduces when the pass ends) is the pass group's. One in a module's
 * forward, outside any pass (FSDP's all-gather in a pre-forward hook), is
 * that module's forward communication (its enclosing modules get it when
 * it closes: gt__scope_closed).
 */
static void comm_not_own(struct gt__writer *c, struct gt__wthread *th,
                         const struct gt__open *o, uint64_t end)
{
    const struct gt__stack *s = &th->scopes;
    struct gt__open *node = NULL;

    if (end <= o->ts)
        return;
    if (th->nodes.depth > 0) {
        node = &th->nodes.e[th->nodes.depth - 1];
        if (o->ts < node->ts)
            node = NULL; /* opened before the node: not inside it */
    }
    struct gt__open *fwd = NULL; /* the innermost module forward open */
    for (uint32_t i = s->depth; i > 0; i--) {
        struct gt__open *e = &th->scopes.e[i - 1];
        if (node && e->ts < node->ts)
            break;
        if (e->kind == GT_SCOPE_COMM)
            return; /* the enclosing one counts it */
        if (e->kind == GT_SCOPE_MODULE && (e->flags & GT__OPEN_RECOMPUTE))
            return;
        if (!fwd && e->kind == GT_SCOPE_MODULE &&
            !(e->flags & GT__OPEN_BACKWARD))
            fwd = e;
    }
    if (node)
        node->comm_ns += end - o->ts;
    else if (th->pass_open)
        gt__layers_comm_outside(c, end - o->ts);
    else if (fwd)
        fwd->comm_ns += end - o->ts;
}

/* A module forward's communication is also its enclosing module's. */
static void comm_to_parent(struct gt__wthread *th, const struct gt__open *o)
{
    const struct gt__stack *s = &th->scopes;
    if (!o->comm_ns)
        return;
    for (uint32_t i = s->depth; i > 0; i--) {
        struct gt__open *e = &s->e[i - 1];
        if (e->kind == GT_SCOPE_MODULE && (e->flags & GT__OPEN_BACKWARD))
            return;
        if (e->kind == GT_SCOPE_MODULE && !(e->flags & GT__OPEN_RECOMPUTE)) {
            e->comm_ns += o->comm_ns;
            return;
        }
    }
}

/*
 * Writes a closed scope, parents before same-start children. Viewers nest
 * two X events that start at the same time by their order in the file
 * (chrome://tracing; Perfetto, google/perfetto#878), and a stack writes a
 * child when it ends, before its parent. So a scope that starts exactly
 * when its parent does is held (at most GT__STACK_MAX per thread) until
 * the parent is written, then released outermost first. Called right
 * after o was popped: the parent is the new top of the stack.
 */
void gt__scope_closed(struct gt__writer *c, struct gt__wthread *th,
                         const struct gt__open *o, uint64_t end, int unclosed)
{
    struct gt__stack *s = &th->scopes;
    if (s->depth == 0 && th->eqc_n && end == th->eqc_ts) {
        /* Creations at this very end are in no slice any more. */
        for (uint32_t i = 0; i < th->eqc_n; i++) {
            struct gt__bmap_val *v =
                gt__bmap_find(&c->nodes, th->eqc[i].fwd_tid, th->eqc[i].seq);
            if (v)
                v->y &= ~(uint64_t)GT__CREATION_INSIDE;
        }
        th->eqc_n = 0;
    }
    if (o->kind == GT_SCOPE_MODULE && (o->flags & GT__OPEN_BACKWARD)) {
        /* Its time is not its enclosing backward range's own time. */
        for (uint32_t i = s->depth; i > 0; i--) {
            struct gt__open *e = &s->e[i - 1];
            if (e->kind == GT_SCOPE_MODULE && (e->flags & GT__OPEN_BACKWARD)) {
                e->nested_ns += end > o->ts ? end - o->ts : 0;
                break;
            }
        }
    }
    if (o->kind == GT_SCOPE_MODULE && (o->flags & GT__OPEN_RECOMPUTE))
        recompute_not_own(th, o, end);
    /* One the stream never ended (capture stopped inside it) is closed at
     * the end of what was read: a span, but no one's time. */
    if (o->kind == GT_SCOPE_COMM && !unclosed)
        comm_not_own(c, th, o, end);
    if (o->kind == GT_SCOPE_MODULE &&
        !(o->flags & (GT__OPEN_BACKWARD | GT__OPEN_RECOMPUTE)))
        comm_to_parent(th, o);
    if (s->depth > 0 && s->e[s->depth - 1].ts == o->ts) {
        if (th->nheld == th->held_cap && th->held_cap < GT__STACK_MAX) {
            uint32_t cap = th->held_cap ? th->held_cap * 2 : 8;
            struct gt__held *nh = gt__realloc(th->held, cap * sizeof(*nh));
            if (nh) {
                th->held = nh;
                th->held_cap = cap;
            }
        }
        if (th->nheld < th->held_cap) {
            th->held[th->nheld++] = (struct gt__held){*o, end, unclosed};
            return;
        }
    }
    emit_scope(c, th, o, end, unclosed);
    /* Held scopes with this start can only be its descendants (a thread's
     * times never go back along its stack); they were held innermost
     * first, so releasing from the end writes outer before inner. */
    while (th->nheld > 0 && th->held[th->nheld - 1].o.ts == o->ts) {
        struct gt__held h = th->held[--th->nheld];
        emit_scope(c, th, &h.o, h.end, h.unclosed);
    }
}
