/*
 * Per-layer backward spans, grouped by backward pass.
 *
 * A layer is a module path ("layers.17.mlp"). Each backward node credited
 * to a layer is also credited to every ancestor path ("layers.17",
 * "layers"), so a parent's [first, last] always contains its children's.
 * Spans are accumulated per "pass group": from a backward pass begin until
 * every open pass has ended (several Python threads may run backward at
 * once). Records of different threads arrive in no time order (each
 * thread's blocks are shipped separately), so membership follows time: an
 * ended group stays open for nodes that started before its end, and is
 * flushed when a node starts after it, the next pass begins, or one more
 * chunk has been read; nodes that arrive before their pass's begin record
 * but started after it are adopted by that pass. Nodes that run while no pass is open (no pass marks: an agent
 * without the Engine::execute hook, or a capture window cut inside a pass)
 * form an implicit group that is flushed at the next pass begin, step
 * mark, node creation timed after the group's last node (the next forward
 * has started; a window's replayed creations are older) or the end of
 * input, so that it covers one backward, not the
 * whole run. At a flush the
 * group's spans are sorted by (start, -end, depth) and placed with
 * gt__place on the "Layers backward" track: parents come before children,
 * and siblings that overlap without nesting (interleaved branches) go to an
 * overlap track instead of breaking the nesting.
 *
 * Paths only give part of the tree: the root module is named by its class
 * ("Net") and its children by their own paths ("layers.0"), so a chain
 * whose top has no parent by path is attached to the module whose forward
 * encloses it (gt__layer_nest, from the scope stack), once, never making a
 * cycle.
 *
 * A span is a wall extent; the layer's time is carried in its args as
 * sums of node times (each node's own time, nested nodes excluded), its
 * own and with its descendants', so shared modules claim only their own
 * nodes and rows add up. The group also sums every node, with or without
 * a layer, for the "backward totals" instant (schema/trace-output.md).
 *
 * Memory: one entry per distinct layer path (capped), no per-node state.
 *
 * Passes and iterations, which open and close the groups: iters.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/alloc.h"
#include "common/util.h"
#include "daemon/convert/internal.h"


/*
 * This writer's cache entry of string id (its layer index and the class
 * seen with it), reset when the stream redefined the string. @return NULL
 * when the string is undefined or the cache cannot grow.
 */
static struct gt__strcache *str_cache(struct gt__writer *c, uint32_t id)
{
    const struct gt__cstream *s = c->s;
    if (id == 0 || id >= s->nstrs || !s->strs[id].raw)
        return NULL;
    if (id >= c->nscache) {
        uint32_t n = c->nscache ? c->nscache : 256;
        while (n <= id)
            n *= 2;
        struct gt__strcache *nc = gt__realloc(c->scache, n * sizeof(*nc));
        if (!nc)
            return NULL;
        memset(nc + c->nscache, 0, (n - c->nscache) * sizeof(*nc));
        c->scache = nc;
        c->nscache = n;
    }
    struct gt__strcache *e = &c->scache[id];
    if (e->ver != s->strs[id].ver)
        *e = (struct gt__strcache){.ver = s->strs[id].ver, .layer = -1};
    return e;
}

struct path_key {
    const struct gt__writer *c;
    const char *path;
    size_t len;
};

static int layer_is(const void *ctx, uint32_t e)
{
    const struct path_key *k = ctx;
    const struct gt__wlayer *l = &k->c->layers[e];
    return l->path_len == k->len && memcmp(l->path, k->path, k->len) == 0;
}

static int32_t layer_find_or_add(struct gt__writer *c, const char *path,
                                 size_t len, unsigned depth_left)
{
    const struct path_key k = {c, path, len};
    uint32_t hash = gt__fnv1a32(path, len);
    if (!gt__index_ready(&c->layer_ix) &&
        gt__index_init(&c->layer_ix, 2 * GT__MAX_LAYERS))
        return -1;
    uint32_t e = gt__index_find(&c->layer_ix, hash, layer_is, &k, NULL);
    if (e != GT__INDEX_NONE)
        return (int32_t)e;
    if (c->nlayers >= GT__MAX_LAYERS) {
        c->an.layers_dropped++;
        return -1;
    }
    /* Parent first: the path up to the last dot, if any. */
    int32_t parent = -1;
    size_t dot = len;
    while (dot > 0 && path[dot - 1] != '.')
        dot--;
    if (dot > 1 && depth_left > 0)
        parent = layer_find_or_add(c, path, dot - 1, depth_left - 1);
    if (c->nlayers == c->layers_cap) {
        uint32_t cap = c->layers_cap ? c->layers_cap * 2 : 64;
        struct gt__wlayer *nl = gt__realloc(c->layers, cap * sizeof(*nl));
        uint32_t *nt = gt__realloc(c->touched, cap * sizeof(*nt));
        if (nl)
            c->layers = nl;
        if (nt)
            c->touched = nt;
        if (!nl || !nt)
            return -1;
        c->layers_cap = cap;
    }
    struct gt__wlayer *l = &c->layers[c->nlayers];
    memset(l, 0, sizeof(*l));
    l->path = gt__malloc(len + 1);
    if (!l->path)
        return -1;
    memcpy(l->path, path, len);
    l->path[len] = 0;
    l->path_len = (uint32_t)len;
    l->parent = parent;
    l->depth = parent >= 0 ? c->layers[parent].depth + 1 : 0;
    /* The class the Python package gave the name, if any (a compiled
     * region's layers open no scope that would say it). */
    l->cls = gt__cs_layer_class(c->s, path, len);
    /* Inserted anew: the parent's insertion may have taken the slot. */
    gt__index_insert(&c->layer_ix, hash, c->nlayers);
    return (int32_t)c->nlayers++;
}

static int32_t layer_of(struct gt__writer *c, uint32_t path_id)
{
    struct gt__strcache *e = str_cache(c, path_id);
    if (!e)
        return -1;
    if (e->layer < 0) {
        const struct gt__str *s = &c->s->strs[path_id];
        int32_t l = layer_find_or_add(c, s->raw, s->raw_len, 128);
        /* layer_find_or_add does not touch the cache: e is still valid */
        e->layer = l;
        if (l >= 0 && e->cls)
            c->layers[l].cls = e->cls;
    }
    return e->layer;
}

void gt__layer_set_class(struct gt__writer *c, uint32_t path_id, uint32_t cls)
{
    struct gt__strcache *e = str_cache(c, path_id);
    if (!e)
        return;
    e->cls = cls;
    int32_t l = layer_of(c, path_id);
    if (l >= 0 && cls)
        c->layers[l].cls = cls;
}

void gt__layer_nest(struct gt__writer *c, uint32_t child_id, uint32_t parent_id)
{
    gt__layer_nest_at(c, layer_of(c, child_id), layer_of(c, parent_id));
}

void gt__layer_nest_at(struct gt__writer *c, int32_t ch, int32_t pa)
{
    if (ch < 0 || pa < 0 || ch == pa)
        return;
    /* The top of the child's path chain ("layers" for "layers.0"). */
    while (c->layers[ch].parent >= 0)
        ch = c->layers[ch].parent;
    /* Refuse cycles: the parent must not already descend from it. */
    for (int32_t a = pa; a >= 0; a = c->layers[a].parent)
        if (a == ch)
            return;
    c->layers[ch].parent = pa;
    c->layers[ch].depth = c->layers[pa].depth + 1;
}

/* Adds node k to the group's totals (every node, with a layer or not). */
static void group_count(struct gt__writer *c, int attributed,
                        const struct gt__credit *k)
{
    if (k->s < c->group_min_first)
        c->group_min_first = k->s;
    if (k->e > c->group_max_last)
        c->group_max_last = k->e;
    c->group_nodes += !k->kernel;
    c->group_ns += k->self_ns;
    c->group_comm_ns += k->comm_ns;
    c->group_order2 += k->order2 != 0;
    if (!attributed) {
        c->group_un_nodes += !k->kernel;
        c->group_un_ns += k->self_ns;
        c->group_un_accg += k->accumulate != 0;
    }
}

int32_t gt__layer_index(struct gt__writer *c, const char *path, size_t len)
{
    return len ? layer_find_or_add(c, path, len, 128) : -1;
}

int32_t gt__layer_of(struct gt__writer *c, uint32_t path_id)
{
    return path_id ? layer_of(c, path_id) : -1;
}

/*
 * Top-level row l, met by a credit before any scope nested it: a module
 * the package named as the bare root's direct child (LAYER_INFO's
 * GT_LAYER_F_ROOT_CHILD) hangs under that root, so a module that owns
 * parameters but runs no forward of its own (a ParameterDict, a module
 * whose weights another uses), and every top row of a backward window
 * (which holds no forward scopes), sits where the full trace has it.
 * Once per row, before its first credit.
 */
static void root_child(struct gt__writer *c, int32_t l)
{
    uint32_t root = c->s->bare_root;
    c->layers[l].root_checked = 1;
    if (!root ||
        !(gt__cs_layer_flags(c->s, c->layers[l].path, c->layers[l].path_len) &
          GT_LAYER_F_ROOT_CHILD))
        return;
    int32_t r = layer_of(c, root); /* may move c->layers */
    gt__layer_nest_at(c, l, r);
}

void gt__layer_credit(struct gt__writer *c, uint32_t path_id,
                      const struct gt__credit *k)
{
    gt__layer_credit_at(c, path_id ? layer_of(c, path_id) : -1, k);
}

void gt__layer_credit_at(struct gt__writer *c, int32_t l,
                         const struct gt__credit *k)
{
    if (c->gen == 0) {
        c->gen = 1;
        c->group_min_first = UINT64_MAX;
    }
    /* A node that starts after the ended pass belongs to the next one. */
    if (c->group_ended && k->s > c->group_end)
        gt__layers_flush_group(c, c->group_end);
    group_count(c, l >= 0, k);
    c->group_kernels += k->kernel != 0;
    for (int32_t a = l; a >= 0; a = c->layers[a].parent) {
        if (c->layers[a].parent < 0 && !c->layers[a].root_checked)
            root_child(c, a); /* may nest a under the root: read L after */
        struct gt__wlayer *L = &c->layers[a];
        if (L->gen != c->gen) {
            L->gen = c->gen;
            L->first = k->s;
            L->last = k->e;
            L->nodes = 0;
            L->time_ns = L->order2 = 0;
            L->self_nodes = L->self_ns = L->accg_ns = L->comm_ns = 0;
            L->top_name = 0;
            L->top_ns = 0;
            L->has_x = 0;
            c->touched[c->ntouched++] = (uint32_t)a;
        } else {
            if (k->s < L->first)
                L->first = k->s;
            if (k->e > L->last)
                L->last = k->e;
        }
        if (!k->accumulate) {
            if (!L->has_x || k->s < L->xfirst)
                L->xfirst = k->s;
            if (!L->has_x || k->e > L->xlast)
                L->xlast = k->e;
            L->has_x = 1;
        }
        L->nodes += !k->kernel;
        L->node_credited = 1;
        L->time_ns += k->self_ns;
        L->order2 += k->order2 != 0;
        if (a == l) {
            L->self_nodes += !k->kernel;
            L->self_ns += k->self_ns;
            if (k->accumulate)
                L->accg_ns += k->self_ns;
            L->comm_ns += k->comm_ns;
            if (k->name && (!L->top_name || k->self_ns > L->top_ns)) {
                L->top_name = k->name;
                L->top_ns = k->self_ns;
            }
        }
    }
}

/* One backward span of a layer: [s, e] and the sums over the nodes
 * credited to it in its pass group (each node's own time: nodes run
 * inside it on its thread excluded). */
struct span_sums {
    uint64_t s, e;
    uint64_t nodes, self_nodes;     /* with descendants; its own */
    uint64_t time_ns, self_ns;      /* with descendants; its own */
    uint64_t accg_ns;               /* its own AccumulateGrad nodes */
    uint64_t comm_ns;               /* communication in its own nodes */
    uint64_t order2;                /* nodes made by backward, inclusive */
};

struct span_item {
    uint64_t first, last;
    int32_t depth; /* -1 for the pass span itself */
    uint32_t layer;
};

static int span_cmp(const void *a, const void *b)
{
    const struct span_item *x = a, *y = b;
    if (x->first != y->first)
        return x->first < y->first ? -1 : 1;
    if (x->last != y->last)
        return x->last > y->last ? -1 : 1;
    return x->depth < y->depth ? -1 : x->depth > y->depth;
}

/* The span's args: layer, counts, sums (ns), pass (UINT64_MAX: a
 * backward range, which has no pass) and parent. */
static void layer_args(struct gt__writer *c, struct gt__ev *e,
                       const struct gt__wlayer *L,
                       const struct span_sums *ev, uint64_t pass)
{
    gt__ev_text(e, "layer", L->path, L->path_len);
    gt__ev_u64(e, "nodes", ev->nodes);
    gt__ev_u64(e, "self_nodes", ev->self_nodes);
    gt__ev_ns(e, "time_us", ev->time_ns);
    gt__ev_ns(e, "self_us", ev->self_ns);
    if (ev->accg_ns)
        gt__ev_ns(e, "accumulate_grad_us", ev->accg_ns);
    if (ev->comm_ns)
        gt__ev_ns(e, "comm_us", ev->comm_ns);
    if (ev->order2)
        gt__ev_u64(e, "second_order_nodes", ev->order2);
    if (L->top_name) {
        gt__ev_sid(e, "top_node", gt__str_known(c, L->top_name));
        gt__ev_ns(e, "top_node_us", L->top_ns);
    }
    if (pass != UINT64_MAX)
        gt__ev_u64(e, "pass", pass);
    else
        gt__ev_lit(e, "source", "range");
    if (L->parent >= 0) {
        const struct gt__wlayer *P = &c->layers[L->parent];
        gt__ev_text(e, "parent", P->path, P->path_len);
    }
}

/* Says layer index li's backward span [ev->s, ev->e] with ev's numbers
 * on track t. */
static void emit_layer_span(struct gt__writer *c, uint32_t t, uint32_t li,
                            const struct span_sums *ev, uint64_t pass)
{
    const struct gt__wlayer *L = &c->layers[li];
    struct gt__ev e;
    gt__ev_init(&e, GT__CAT_LAYER_BACKWARD, t, ev->s, ev->e);
    layer_args(c, &e, L, ev, pass);
    /* "<path> (<Class>) backward" */
    gt__ev_name_text(&e, L->path, L->path_len);
    if (L->cls) {
        gt__ev_name(&e, " (");
        gt__ev_name_sid(&e, gt__str_known(c, L->cls));
        gt__ev_name(&e, ") backward");
    } else {
        gt__ev_name(&e, " backward");
    }
    gt__emit_slice(c->out, &e);
}

/* The group's totals: an instant "backward totals" at its end. */
static void emit_totals(struct gt__writer *c, uint64_t ts)
{
    struct gt__ev e;
    gt__ev_init(&e, GT__CAT_BACKWARD_TOTALS, c->layers_bwd_track, ts, ts);
    gt__ev_name(&e, "backward totals");
    if (c->group_has_pass)
        gt__ev_u64(&e, "pass", c->group_value);
    else
        gt__ev_null(&e, "pass");
    gt__ev_u64(&e, "nodes", c->group_nodes);
    gt__ev_ns(&e, "time_us", c->group_ns);
    gt__ev_u64(&e, "unattributed_nodes", c->group_un_nodes);
    gt__ev_ns(&e, "unattributed_us", c->group_un_ns);
    gt__ev_u64(&e, "unattributed_accumulate_grad", c->group_un_accg);
    if (c->group_comm_ns)
        gt__ev_ns(&e, "comm_us", c->group_comm_ns);
    gt__ev_u64(&e, "second_order_nodes", c->group_order2);
    gt__emit_instant(c->out, &e);
}

/* The `Layers backward` track, made on first use; 0 when it cannot be. */
static uint32_t bwd_track(struct gt__writer *c)
{
    if (!c->layers_bwd_track) {
        gt__main_proc(c);
        c->layers_bwd_track = gt__track_new(c, 0, UINT32_MAX, 2,
                                            "Layers backward");
    }
    return c->layers_bwd_track;
}

/*
 * Emits the current group's spans (and its pass span when it has a pass,
 * ending at end_ts), then starts an empty group.
 */
void gt__layers_flush_group(struct gt__writer *c, uint64_t end_ts)
{
    int has_pass = c->group_has_pass;
    uint32_t n = c->ntouched + (has_pass ? 1 : 0);
    if (n == 0 && c->group_nodes == 0)
        goto out_next_gen;
    if (!bwd_track(c))
        goto out_next_gen;
    struct span_item *items = gt__malloc((n ? n : 1) * sizeof(*items));
    if (!items) {
        c->err = c->err ? c->err : -ENOMEM;
        goto out_next_gen;
    }
    for (uint32_t i = 0; i < c->ntouched; i++) {
        const struct gt__wlayer *L = &c->layers[c->touched[i]];
        /* Under torch.compile one node makes every gradient, and the
         * AccumulateGrad nodes all run after it: a layer's span is where
         * its kernels (and other nodes) ran, so that layers nest as they
         * ran; its AccumulateGrad time is still in its sums. */
        int x = c->group_kernels && L->has_x;
        items[i].first = x ? L->xfirst : L->first;
        items[i].last = x ? L->xlast : L->last;
        items[i].depth = (int32_t)L->depth;
        items[i].layer = c->touched[i];
    }
    if (has_pass) {
        uint64_t b = c->group_begin;
        items[n - 1].first = b;
        items[n - 1].last = end_ts < b ? b : end_ts;
        items[n - 1].depth = -1;
        items[n - 1].layer = 0;
    }
    if (n)
        qsort(items, n, sizeof(*items), span_cmp);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t t = gt__place(c, c->layers_bwd_track, items[i].first,
                               items[i].last);
        if (!t)
            continue;
        if (items[i].depth < 0) {
            struct gt__ev e;
            char name[48];
            int nl = snprintf(name, sizeof(name), "backward pass #%llu",
                              (unsigned long long)c->group_value);
            gt__ev_init(&e, GT__CAT_BACKWARD_PASS, t, items[i].first,
                        items[i].last);
            gt__ev_name_text(&e, name, (size_t)nl);
            gt__ev_u64(&e, "pass", c->group_value);
            gt__emit_slice(c->out, &e);
        } else {
            const struct gt__wlayer *L = &c->layers[items[i].layer];
            struct span_sums ev = {
                .s = items[i].first, .e = items[i].last,
                .nodes = L->nodes, .self_nodes = L->self_nodes,
                .time_ns = L->time_ns, .self_ns = L->self_ns,
                .accg_ns = L->accg_ns, .comm_ns = L->comm_ns,
                .order2 = L->order2};
            emit_layer_span(c, t, items[i].layer, &ev, c->group_value);
        }
    }
    gt__free(items);
    emit_totals(c, has_pass ? (end_ts < c->group_begin ? c->group_begin
                                                       : end_ts)
                            : c->group_max_last);
out_next_gen:
    c->ntouched = 0;
    c->gen++;
    c->group_has_pass = 0;
    c->group_ended = 0;
    c->group_min_first = UINT64_MAX;
    c->group_max_last = 0;
    c->group_nodes = c->group_ns = c->group_order2 = 0;
    c->group_kernels = 0;
    c->group_un_nodes = c->group_un_ns = c->group_un_accg = 0;
    c->group_comm_ns = 0;
}

/* ------------------------------------------------------------ ranges */

static int range_cmp(const void *a, const void *b)
{
    const struct gt__held *x = a, *y = b;
    if (x->o.ts != y->o.ts)
        return x->o.ts < y->o.ts ? -1 : 1;
    return x->end > y->end ? -1 : x->end < y->end;
}

/* One backward range as its layer's span: time_us is its duration,
 * self_us that less its nested ranges'; no nodes. */
static void range_span(struct gt__writer *c, const struct gt__held *h)
{
    int32_t l = layer_of(c, h->o.name);
    uint64_t dur = h->end > h->o.ts ? h->end - h->o.ts : 0;
    struct span_sums ev = {.s = h->o.ts, .e = h->end, .time_ns = dur,
                              .self_ns = h->o.nested_ns < dur
                                             ? dur - h->o.nested_ns
                                             : 0};
    uint32_t t;

    /* Node-derived spans win: see schema/trace-output.md. */
    if (l < 0 || c->layers[l].node_credited || !bwd_track(c))
        return;
    t = gt__place(c, c->layers_bwd_track, h->o.ts, h->end);
    if (t)
        emit_layer_span(c, t, (uint32_t)l, &ev, UINT64_MAX);
}

static void ranges_flush(struct gt__writer *c, struct gt__wthread *th)
{
    if (th->nranges > 1)
        qsort(th->ranges, th->nranges, sizeof(*th->ranges), range_cmp);
    for (uint32_t i = 0; i < th->nranges; i++)
        range_span(c, &th->ranges[i]);
    th->nranges = 0;
}

void gt__layer_range_closed(struct gt__writer *c, struct gt__wthread *th,
                            const struct gt__open *o, uint64_t end,
                            int unclosed)
{
    struct gt__held h = {*o, end, unclosed};

    if (th->nranges == th->ranges_cap && th->ranges_cap < GT__STACK_MAX) {
        uint32_t cap = th->ranges_cap ? th->ranges_cap * 2 : 8;
        struct gt__held *nr = gt__realloc(th->ranges, cap * sizeof(*nr));
        if (nr) {
            th->ranges = nr;
            th->ranges_cap = cap;
        }
    }
    if (th->nranges < th->ranges_cap)
        th->ranges[th->nranges++] = h;
    else
        range_span(c, &h); /* no room: placed now, maybe on an overlap */
    for (uint32_t i = 0; i < th->scopes.depth; i++)
        if (th->scopes.e[i].kind == GT_SCOPE_MODULE &&
            (th->scopes.e[i].flags & GT__OPEN_BACKWARD))
            return;
    ranges_flush(c, th);
}

void gt__layers_outside_pass(struct gt__writer *c, uint64_t ts)
{
    /* A capture window replays each node's creation (its forward time)
     * just before the node runs: such a creation is older than the nodes
     * already in the group and must not cut the backward into one span
     * per node. A real next forward starts after the group's last node. */
    if (c->passes_open == 0 && c->group_nodes > 0 && !c->group_has_pass &&
        ts >= c->group_max_last)
        gt__layers_flush_group(c, 0);
}

void gt__layers_comm_outside(struct gt__writer *c, uint64_t ns)
{
    c->group_comm_ns += ns;
}

void gt__layers_chunk_end(struct gt__writer *c)
{
    /* One whole chunk after the pass ended: the agent's streamer has
     * gathered every thread's blocks since, so late nodes are in. */
    if (c->group_ended && c->chunks > c->group_end_chunk)
        gt__layers_flush_group(c, c->group_end);
}


void gt__layers_free(struct gt__writer *c)
{
    for (uint32_t i = 0; i < c->nlayers; i++) {
        gt__free(c->layers[i].path);
    }
    gt__free(c->layers);
    gt__free(c->touched);
    gt__index_free(&c->layer_ix);
    gt__free(c->scache);
}
