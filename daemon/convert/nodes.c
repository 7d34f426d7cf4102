/*
 * Backward nodes: their complete events, their fwdbwd arrows, and the
 * short wait for creations that arrive after the node.
 *
 * Why wait: the agent ships each thread's blocks separately, so when
 * backward runs on an engine worker thread (always on GPU), the worker's
 * first nodes can be read before the forward thread's last creations,
 * which were recorded earlier but sit in a later block. Backward runs in
 * reverse, so those are exactly the nodes that would lose their layer and
 * arrow. A finished node whose creation is unknown is therefore held (at
 * most GT__WAIT_CAP of them, in arrival order) until its creation arrives
 * or one more whole chunk has been read; only then is it written without
 * one and counted. Its span was already fixed by the thread's stack, so
 * writing it late cannot break nesting.
 */
#include "daemon/convert/internal.h"

/* @return whether node name id is an AccumulateGrad: "AccumulateGrad",
 * or with a namespace as torch names it ("torch::autograd::AccumulateGrad"). */
static int is_accumulate(struct gt__writer *c, uint32_t name)
{
    static const char acc[] = "AccumulateGrad";
    const uint32_t len = sizeof(acc) - 1;
    uint32_t n = 0;
    const char *raw = gt__cstream_raw(c->s, name, &n);
    if (n < len || memcmp(raw + n - len, acc, len) != 0)
        return 0;
    return n == len || (n >= len + 2 && memcmp(raw + n - len - 2, "::", 2) == 0);
}

/*
 * A viewer draws an arrow only from a slice on its own track (catapult:
 * "does not start at an actual slice"; Perfetto binds a flow to the slice
 * open there). A node created outside any scope or operator (the loss),
 * replayed into a capture window whose forward ran before it, or whose
 * enclosing slice went to an earlier part of the output, gets a 1 ns
 * slice "<node> created" (cat node_created) at its creation for its arrow
 * to start on, said just before the arrow, into the same part.
 */
static void creation_slice(struct gt__writer *c, uint32_t track,
                           const struct gt__open *o, uint32_t name)
{
    struct gt__ev ev;
    gt__ev_init(&ev, GT__CAT_NODE_CREATED, track, o->created_ts,
                o->created_ts + 1);
    gt__ev_name_sid(&ev, name);
    gt__ev_name(&ev, " created");
    gt__emit_slice(c->out, &ev);
}

void gt__emit_node(struct gt__writer *c, struct gt__wthread *th,
                   const struct gt__open *o, uint64_t end, int unclosed)
{
    struct gt__ev ev;
    uint32_t name = gt__str_known(c, o->name);
    uint32_t layer = o->layer ? gt__str_known(c, o->layer) : 0;
    uint32_t param = 0;
    if (o->param) {
        /* An undefined parameter name has always counted twice (it was
         * looked up for room, then for its text): metadata keeps that. */
        param = gt__str_known(c, o->param);
        (void)gt__str_known(c, o->param);
    }
    uint32_t bt = gt__thread_track(c, th, 1);
    gt__ev_init(&ev, GT__CAT_BACKWARD, bt, o->ts, end);
    gt__ev_name_sid(&ev, name);
    if (o->seq != UINT64_MAX) {
        gt__ev_u64(&ev, "seq", o->seq);
        gt__ev_u64(&ev, "fwd_tid", o->fwd_tid);
    }
    if (o->layer)
        gt__ev_sid(&ev, "layer", layer);
    else
        gt__ev_null(&ev, "layer");
    if (o->param)
        gt__ev_sid(&ev, "param", param);
    if (o->order > 1)
        gt__ev_u64(&ev, "order", o->order);
    uint64_t dur = end > o->ts ? end - o->ts : 0;
    uint64_t own = dur > o->nested_ns ? dur - o->nested_ns : 0;
    uint64_t comm = o->comm_ns < own ? o->comm_ns : own;
    if (comm)
        gt__ev_ns(&ev, "comm_us", comm);
    if (unclosed)
        gt__ev_bool(&ev, "unclosed", 1);
    gt__emit_slice(c->out, &ev);
    if (o->has_creation) {
        /* Both halves now, into the part that holds the node. */
        const struct gt__wthread *ct = gt__thread_find(c, o->created_tid);
        if (ct && (!o->created_in || o->created_file != gt__emit_part(c->out)))
            creation_slice(c, ct->track, o, name);
        if (ct)
            gt__emit_flow(c->out, GT__CAT_FWDBWD, ct->track, o->created_ts,
                          bt, o->ts);
    }
    struct gt__credit k = {.s = o->ts, .e = end, .self_ns = own - comm,
                           .comm_ns = comm,
                           .accumulate = is_accumulate(c, o->name),
                           .order2 = o->order > 1, .name = o->name};
    gt__layer_credit(c, o->layer, &k);
}


/* Writes waiting entry i (with whatever creation it has) and frees it. */
static void wait_release(struct gt__writer *c, uint32_t i)
{
    struct gt__wait *w = &c->wait[i];
    struct gt__wthread *th = gt__thread_find(c, w->tid);
    struct gt__bmap_val v;
    w->live = 0;
    c->nwait--;
    (void)gt__bmap_take(&c->wait_idx, w->o.fwd_tid, w->o.seq, &v);
    if (!w->o.has_creation)
        c->an.nodes_without_creation++;
    if (th)
        gt__emit_node(c, th, &w->o, w->end, 0);
}

void gt__node_ended(struct gt__writer *c, struct gt__wthread *th,
                    const struct gt__open *o, uint64_t end, int unclosed)
{
    struct gt__bmap_val *v;
    /* Its time is not its parent's own (reentrant backward: a checkpoint
     * node runs the recomputed segment's nodes inside itself). */
    if (th->nodes.depth > 0 && end > o->ts)
        th->nodes.e[th->nodes.depth - 1].nested_ns += end - o->ts;
    if (o->has_creation || o->seq == UINT64_MAX || unclosed) {
        /* UINT64_MAX: the agent could not read the node's fields
         * (AccumulateGrad, unknown layout) and said so: no creation. */
        gt__emit_node(c, th, o, end, unclosed);
        return;
    }
    struct gt__open n = *o;
    if ((v = gt__bmap_find(&c->nodes, o->fwd_tid, o->seq)) != NULL) {
        /* Created (as read) while the node was running. */
        v->y |= GT__CREATION_USED;
        n.has_creation = 1;
        n.created_ts = v->x;
        n.created_tid = v->p;
        n.created_in = (v->y & GT__CREATION_INSIDE) != 0;
        n.created_file = (uint32_t)(v->y >> GT__CREATION_FILE_SHIFT);
        if (!(n.flags & GT__OPEN_LAYER_SET)) {
            n.layer = v->q;
            n.order = (uint16_t)(v->y & GT__CREATION_ORDER_MASK);
        }
        gt__emit_node(c, th, &n, end, 0);
        return;
    }
    if (c->wait[c->wait_head].live)
        wait_release(c, c->wait_head); /* full: the oldest goes without */
    uint32_t i = c->wait_head;
    c->wait_head = (c->wait_head + 1) % GT__WAIT_CAP;
    c->wait[i] = (struct gt__wait){.o = n, .end = end, .chunk = c->chunks,
                                   .tid = th->os_tid, .live = 1};
    c->nwait++;
    struct gt__bmap_val iv = {.p = i};
    (void)gt__bmap_put(&c->wait_idx, o->fwd_tid, o->seq, &iv);
}

int gt__node_created_late(struct gt__writer *c, uint64_t fwd_tid, uint64_t seq,
                          uint64_t ts, uint32_t tid, uint32_t layer,
                          uint32_t order)
{
    struct gt__bmap_val v;
    if (c->nwait == 0 || !gt__bmap_take(&c->wait_idx, fwd_tid, seq, &v))
        return 0;
    struct gt__wait *w = &c->wait[v.p];
    if (!w->live || w->o.fwd_tid != fwd_tid || w->o.seq != seq)
        return 0;
    w->o.has_creation = 1;
    w->o.created_ts = ts;
    w->o.created_tid = tid;
    w->o.created_in = (order & GT__CREATION_INSIDE) != 0;
    w->o.created_file = gt__emit_part(c->out);
    if (!(w->o.flags & GT__OPEN_LAYER_SET)) {
        w->o.layer = layer;
        w->o.order = (uint16_t)(order & GT__CREATION_ORDER_MASK);
    }
    wait_release(c, v.p);
    return 1;
}

void gt__nodes_chunk_end(struct gt__writer *c, int all)
{
    /* Oldest first: from the entry after the newest, once round. */
    for (uint32_t k = 0; k < GT__WAIT_CAP && c->nwait > 0; k++) {
        uint32_t i = (c->wait_head + k) % GT__WAIT_CAP;
        if (c->wait[i].live && (all || c->wait[i].chunk < c->chunks))
            wait_release(c, i);
    }
}
