/*
 * torch.compile'd graphs in the converter (schema/torch.md, "Compiled
 * models"; schema/trace-output.md, "Compiled regions").
 *
 * The stream part keeps what the Python package said at compile time: each
 * graph's map (its calls: kernel, run-time scope, owner and fused module
 * paths relative to the compiled module, phase), the bare root, and each
 * module's class by layer name. All of it is stream metadata, so that a
 * capture window opened later finds it.
 *
 * The writer part joins a region's run to its map. A region is a scope on
 * its thread (kind GT__KIND_REGION) from COMPILED_BEGIN to COMPILED_END;
 * each operator opened directly inside it (a generated kernel's profiling
 * scope, an extern call's aten op) is matched to the map's next call with
 * the same scope name, in the wrapper's call order (a name repeats: the
 * GELU kernel called from every block; a call the run skipped is passed
 * over). A matched operator is named for its layer: the region's layer
 * (the compiled module's, or the backward node's that runs it) joined
 * with the call's owner path ("blocks.0" + "up"; the bare root's modules
 * are the paths as they are). Then:
 *   - backward calls are credited to their layer like backward nodes
 *     (gt__layer_credit_at, as kernels: time, not node counts) and their
 *     time is not the enclosing CompiledFunctionBackward node's own, so
 *     each layer's backward span and row come out of the kernels and the
 *     rows still add up to the pass;
 *   - forward and recompute calls are kept until the region ends, which
 *     then writes one forward (or recompute) span per layer below the
 *     region's layer (ancestors inclusive of their descendants' kernels)
 *     on the "Compiled layers" track, whose time is the sum of the
 *     kernels' own (args time_us), not the extent: kernels of one layer
 *     need not run back to back;
 *   - the outermost region's end writes a "compiled totals" instant: how
 *     much of its operators' time went to one layer, to a fused common
 *     ancestor, to no module, and to operators no call matched.
 * Nothing is spread by estimate; a kernel fused across modules belongs to
 * their common ancestor, which the map names.
 *
 * Memory: the maps are capped (GT__MAX_CGRAPHS maps, GT__MAX_CCALLS calls
 * over all of them, the newest refused and counted); per thread, the
 * forward kernels of the regions open now (GT__MAX_CFWD).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/alloc.h"
#include "common/util.h"
#include "daemon/convert/internal.h"

#define GT__MAX_CFWD 65536u /* forward kernels held per thread */

enum { TOT_ONE = 0, TOT_FUSED, TOT_UNOWNED, TOT_UNJOINED };

/* Text of string id (NULL when undefined). */
#define str_text gt__cs_text

/* ------------------------------------------------------------ writer */

/* Whether operator name (a string id) is the run-time scope sid. */
static int same_text(const struct gt__cstream *s, uint32_t a, uint32_t b)
{
    uint32_t la = 0, lb = 0;
    if (a == b)
        return a != 0;
    const char *ta = str_text(s, a, &la), *tb = str_text(s, b, &lb);
    return ta && tb && la == lb && memcmp(ta, tb, la) == 0;
}

void gt__region_begin(struct gt__writer *c, struct gt__wthread *th,
                      struct gt__open *o, uint32_t graph, uint32_t layer)
{
    o->kind = GT__KIND_REGION;
    o->op_id = graph;
    /* In a backward, the region hangs from the node that runs it. */
    if (!layer && th->nodes.depth > 0)
        layer = th->nodes.e[th->nodes.depth - 1].layer;
    o->layer = layer;
    if (layer && c->s->bare_root && same_text(c->s, layer, c->s->bare_root))
        o->flags |= GT__OPEN_BARE;
    o->seq = 0;
    o->param = th->ncfwd;
    if (th->nregions++ == 0)
        memset(&th->ctot, 0, sizeof(th->ctot));
    if (!gt__cs_cgraph(c->s, graph))
        c->an.compiled_unmatched++;
}

void gt__region_op(struct gt__writer *c, struct gt__open *r,
                   struct gt__open *o)
{
    const struct gt__cgraph *g = gt__cs_cgraph(c->s, (uint32_t)r->op_id);
    o->flags |= GT__OPEN_IN_REGION;
    if (!g || g->ncalls == 0)
        return;
    uint32_t n = g->ncalls, from = (uint32_t)(r->seq < n ? r->seq : 0);
    for (uint32_t k = 0; k < n; k++) {
        uint32_t i = (from + k) % n;
        const struct gt__ccall *cl = &g->calls[i];
        if (cl->phase && same_text(c->s, cl->scope, o->name)) {
            /* An op's cls, layer and param are free: the call, the
             * region's layer and its map. */
            o->cls = i + 1;
            o->layer = r->layer;
            o->param = (uint32_t)r->op_id;
            o->flags |= r->flags & GT__OPEN_BARE;
            r->seq = (uint64_t)i + 1;
            return;
        }
    }
    c->an.compiled_unmatched++;
}

/* Writes into buf (room for 2 * GT_STRING_MAX + 2) the layer name of
 * relative path rel (len bytes) under the region's layer: as it stands
 * under the bare root or no layer, the layer itself for "", else
 * "<layer>.<rel>". @return its length. */
static size_t compose(const struct gt__cstream *s, uint32_t layer,
                      uint16_t flags, const char *rel, size_t len, char *buf)
{
    uint32_t pl = 0;
    const char *pre = layer ? str_text(s, layer, &pl) : NULL;
    if (len > GT_STRING_MAX)
        len = GT_STRING_MAX;
    if (pl > GT_STRING_MAX)
        pl = GT_STRING_MAX;
    if (!pre || ((flags & GT__OPEN_BARE) && len > 0)) {
        memcpy(buf, rel, len);
        return len;
    }
    memcpy(buf, pre, pl);
    if (len == 0)
        return pl;
    buf[pl] = '.';
    memcpy(buf + pl + 1, rel, len);
    return pl + 1 + len;
}

static const char *phase_name(uint16_t ph)
{
    return ph == GT_COMPILED_BACKWARD    ? "backward"
           : ph == GT_COMPILED_RECOMPUTE ? "recompute"
                                         : "forward";
}

/* The time of the node running on th since before ts is not its own. */
static void not_node_own(struct gt__wthread *th, uint64_t ts, uint64_t dur)
{
    if (th->nodes.depth == 0)
        return;
    struct gt__open *n = &th->nodes.e[th->nodes.depth - 1];
    if (n->ts <= ts)
        n->nested_ns += dur;
}

static void cfwd_add(struct gt__writer *c, struct gt__wthread *th, int32_t l,
                     uint16_t ph, uint64_t s, uint64_t e)
{
    if (th->ncfwd == th->cfwd_cap) {
        uint32_t cap = th->cfwd_cap ? th->cfwd_cap * 2 : 64;
        struct gt__cfwd *n = cap <= GT__MAX_CFWD
                                 ? gt__realloc(th->cfwd, cap * sizeof(*n))
                                 : NULL;
        if (!n) {
            c->an.depth_dropped++;
            return;
        }
        th->cfwd = n;
        th->cfwd_cap = cap;
    }
    th->cfwd[th->ncfwd++] = (struct gt__cfwd){l, ph, s, e};
}

/* Adds call cl's args (layer, phase, mark, fused, kernel, graph_id) to ev,
 * its texts in j, for a region of map graph whose paths hang from layer
 * (flags: GT__OPEN_BARE). @return its layer index, -1 unowned. */
static int32_t call_args(struct gt__writer *c, uint32_t layer, uint16_t flags,
                         uint32_t graph, const struct gt__ccall *cl,
                         struct gt__ev *ev, struct gt__cjoin *j)
{
    const struct gt__cstream *s = c->s;
    /* j's buffers are written here before they are read (cppcheck's
     * cross-file check takes the arrays' addresses for reads). */
    // cppcheck-suppress ctuuninitvar
    char *path = j->path, *fused = j->fused;
    size_t plen = 0, flen = 0;
    int32_t li = -1;
    uint32_t olen = 0;
    const char *owner = cl->owner ? str_text(s, cl->owner, &olen) : NULL;
    int unowned = (cl->flags & GT_CCALL_UNOWNED) || !owner;
    if (!unowned) {
        plen = compose(s, layer, flags, owner, olen, path);
        li = gt__layer_index(c, path, plen);
    }
    if (li >= 0) {
        /* Its top hangs under the region's layer, as an eager module's
         * hangs under the module whose forward called it. */
        int32_t pl = gt__layer_of(c, layer);
        if (pl >= 0 && pl != li)
            gt__layer_nest_at(c, li, pl);
    }
    uint32_t fl = 0;
    const char *fu = cl->fused ? str_text(s, cl->fused, &fl) : NULL;
    /* The fused modules, each named as the layer would be. */
    for (uint32_t i = 0; fu && i < fl;) {
        uint32_t k = i;
        while (k < fl && fu[k] != ' ')
            k++;
        char one[2 * GT_STRING_MAX + 2];
        size_t n = compose(s, layer, flags, fu + i, k - i, one);
        if (flen + n + 1 > sizeof(j->fused))
            break;
        if (flen)
            fused[flen++] = ' ';
        memcpy(fused + flen, one, n);
        flen += n;
        i = k + 1;
    }
    if (li >= 0)
        gt__ev_text(ev, "layer", path, plen);
    else
        gt__ev_null(ev, "layer");
    gt__ev_lit(ev, "phase", phase_name(cl->phase));
    gt__ev_lit(ev, "mark", unowned ? "unowned"
                           : (cl->flags & GT_CCALL_FUSED) ? "fused"
                                                          : "module");
    if (flen)
        gt__ev_text(ev, "fused", fused, flen);
    if (cl->kernel)
        gt__ev_sid(ev, "kernel", gt__str_known(c, cl->kernel));
    const struct gt__cgraph *g = gt__cs_cgraph(s, graph);
    if (g && g->graph_id != UINT32_MAX)
        gt__ev_u64(ev, "graph_id", g->graph_id);
    return unowned ? -1 : li;
}

int gt__region_op_emit(struct gt__writer *c, struct gt__wthread *th,
                       const struct gt__open *o, uint64_t end,
                       struct gt__ev *ev)
{
    const struct gt__ccall *cl = o->cls ? gt__cs_ccall(c->s, o->param, o->cls - 1)
                                        : NULL;
    uint64_t dur = end > o->ts ? end - o->ts : 0;
    if (!cl) {
        /* Run by a region, matched by no call of its map. */
        if (th->nregions > 0)
            th->ctot.ns[TOT_UNJOINED] += dur;
        return 0;
    }
    struct gt__cjoin j;
    int32_t li = call_args(c, o->layer, o->flags, o->param, cl, ev, &j);
    gt__emit_slice(c->out, ev);

    int which = li < 0                           ? TOT_UNOWNED
                : (cl->flags & GT_CCALL_FUSED) ? TOT_FUSED
                                               : TOT_ONE;
    if (th->nregions > 0) {
        th->ctot.ns[which] += dur;
        th->ctot.calls++;
    }
    if (cl->phase == GT_COMPILED_BACKWARD) {
        struct gt__credit k = {.s = o->ts, .e = end < o->ts ? o->ts : end,
                               .self_ns = dur, .kernel = 1};
        not_node_own(th, o->ts, dur);
        gt__layer_credit_at(c, li, &k);
    } else {
        /* Recompute inside a backward node is the layer's recompute, not
         * the node's own time (as for eager checkpointing). */
        if (cl->phase == GT_COMPILED_RECOMPUTE)
            not_node_own(th, o->ts, dur);
        if (li >= 0)
            cfwd_add(c, th, li, cl->phase, o->ts, end < o->ts ? o->ts : end);
    }
    return 1;
}

/* --------------------------------------------- a region's layer spans */

struct cspan {
    uint64_t first, last;
    uint32_t depth, layer;
};

static int cspan_cmp(const void *a, const void *b)
{
    const struct cspan *x = a, *y = b;
    if (x->first != y->first)
        return x->first < y->first ? -1 : 1;
    if (x->last != y->last)
        return x->last > y->last ? -1 : 1;
    return x->depth < y->depth ? -1 : x->depth > y->depth;
}

static uint32_t compiled_track(struct gt__writer *c)
{
    if (!c->compiled_track) {
        gt__main_proc(c);
        c->compiled_track = gt__track_new(c, 0, UINT32_MAX, 12,
                                          "Compiled layers");
    }
    return c->compiled_track;
}

/* Marks layer l (and its ancestors below stop) with kernel [s, e]. */
static int ctouch(struct gt__writer *c, int32_t l, int32_t stop, uint64_t s,
                  uint64_t e)
{
    for (int32_t a = l; a >= 0 && a != stop; a = c->layers[a].parent) {
        struct gt__wlayer *L = &c->layers[a];
        if (L->cgen != c->cgen) {
            if (c->nctouched == c->ctouched_cap) {
                uint32_t cap = c->ctouched_cap ? c->ctouched_cap * 2 : 64;
                uint32_t *n = gt__realloc(c->ctouched, cap * sizeof(*n));
                if (!n)
                    return -ENOMEM;
                c->ctouched = n;
                c->ctouched_cap = cap;
            }
            c->ctouched[c->nctouched++] = (uint32_t)a;
            L->cgen = c->cgen;
            L->cfirst = s;
            L->clast = e;
            L->cns = 0;
            L->cn = 0;
        }
        if (s < L->cfirst)
            L->cfirst = s;
        if (e > L->clast)
            L->clast = e;
        L->cns += e - s;
        L->cn++;
    }
    return 0;
}

/* Whether layer L is a container torch never calls (no forward of its
 * own: nn.ModuleList, nn.ModuleDict), which the eager model has no span
 * for either: its row sums its children's. */
static int never_called(struct gt__writer *c, const struct gt__wlayer *L)
{
    uint32_t n;
    const char *t = L->cls ? str_text(c->s, L->cls, &n) : NULL;
    return t && ((n == 10 && memcmp(t, "ModuleList", 10) == 0) ||
                 (n == 10 && memcmp(t, "ModuleDict", 10) == 0));
}

/* One phase's spans of the kernels cfwd[from..) of th. */
static void region_spans(struct gt__writer *c, struct gt__wthread *th,
                         uint32_t from, uint16_t ph, int32_t stop)
{
    c->cgen++;
    c->nctouched = 0;
    for (uint32_t i = from; i < th->ncfwd; i++) {
        const struct gt__cfwd *k = &th->cfwd[i];
        if (k->phase == ph && ctouch(c, k->layer, stop, k->s, k->e) < 0) {
            c->err = c->err ? c->err : -ENOMEM;
            return;
        }
    }
    if (c->nctouched == 0 || !compiled_track(c))
        return;
    struct cspan *v = gt__malloc(c->nctouched * sizeof(*v));
    if (!v) {
        c->err = c->err ? c->err : -ENOMEM;
        return;
    }
    for (uint32_t i = 0; i < c->nctouched; i++) {
        const struct gt__wlayer *L = &c->layers[c->ctouched[i]];
        v[i] = (struct cspan){L->cfirst, L->clast, L->depth, c->ctouched[i]};
    }
    qsort(v, c->nctouched, sizeof(*v), cspan_cmp);
    int rc = ph == GT_COMPILED_RECOMPUTE;
    for (uint32_t i = 0; i < c->nctouched; i++) {
        const struct gt__wlayer *L = &c->layers[v[i].layer];
        if (never_called(c, L))
            continue;
        uint32_t t = gt__place(c, c->compiled_track, v[i].first, v[i].last);
        if (!t)
            continue;
        struct gt__ev e;
        gt__ev_init(&e, rc ? GT__CAT_LAYER_RECOMPUTE : GT__CAT_LAYER_FORWARD, t,
                    v[i].first, v[i].last);
        gt__ev_name_text(&e, L->path, L->path_len);
        if (L->cls) {
            gt__ev_name(&e, " (");
            gt__ev_name_sid(&e, gt__str_known(c, L->cls));
            gt__ev_name(&e, ")");
        }
        gt__ev_name(&e, rc ? " recompute" : " forward");
        gt__ev_text(&e, "layer", L->path, L->path_len);
        gt__ev_ns(&e, "time_us", L->cns);
        gt__ev_u64(&e, "kernels", L->cn);
        gt__ev_lit(&e, "source", "compiled");
        if (rc)
            gt__ev_lit(&e, "phase", "recompute");
        if (L->parent >= 0) {
            const struct gt__wlayer *P = &c->layers[L->parent];
            gt__ev_text(&e, "parent", P->path, P->path_len);
        }
        gt__emit_slice(c->out, &e);
    }
    gt__free(v);
}

static void emit_totals(struct gt__writer *c, struct gt__wthread *th,
                        const struct gt__open *o, uint64_t end)
{
    const struct gt__cgraph *g = gt__cs_cgraph(c->s, (uint32_t)o->op_id);
    struct gt__ev e;
    gt__ev_init(&e, GT__CAT_COMPILED_TOTALS, th->track, end, end);
    gt__ev_name(&e, "compiled totals");
    gt__ev_lit(&e, "phase", g ? phase_name(g->phase == GT_COMPILED_BACKWARD
                                               ? GT_COMPILED_BACKWARD
                                               : GT_COMPILED_FORWARD)
                              : "unknown");
    gt__ev_ns(&e, "region_us", end > o->ts ? end - o->ts : 0);
    gt__ev_ns(&e, "one_layer_us", th->ctot.ns[TOT_ONE]);
    gt__ev_ns(&e, "fused_us", th->ctot.ns[TOT_FUSED]);
    gt__ev_ns(&e, "unowned_us", th->ctot.ns[TOT_UNOWNED]);
    gt__ev_ns(&e, "unmatched_us", th->ctot.ns[TOT_UNJOINED]);
    gt__ev_u64(&e, "calls", th->ctot.calls);
    gt__emit_instant(c->out, &e);
}

/* ------------------------------------------------ a GPU graph's kernels */

/*
 * A CUDA graph's Triton kernels are no operators: CUPTI records them,
 * late, with the correlation id of their launch, whose CUDA API record
 * names the launching thread and time. So each region of a map with GPU
 * calls is kept when it ends (the newest GT__CRING of a writer), a
 * launch timed inside one on its thread is noted by correlation id, and
 * the kernel takes the region's next GPU call of its name: its layer
 * and phase then tag it as an EXT_CORR layer does (the report's GPU
 * columns). A kernel whose record comes before its launch's is not
 * joined (CUPTI completes a launch's API record first).
 */
static void cring_push(struct gt__writer *c, const struct gt__wthread *th,
                       const struct gt__open *o, uint64_t end)
{
    if (!c->cring && !(c->cring = gt__calloc(GT__CRING, sizeof(*c->cring))))
        return;
    struct gt__cregion *r = &c->cring[c->ncring % GT__CRING];
    *r = (struct gt__cregion){.tid = th->os_tid, .graph = (uint32_t)o->op_id,
                              .layer = o->layer, .flags = o->flags,
                              .ts = o->ts, .end = end, .seq = ++c->ncring};
}

void gt__region_launch(struct gt__writer *c, uint32_t tid, uint64_t ts,
                       uint32_t corr)
{
    if (!c->ncring || corr == 0)
        return;
    uint64_t n = c->ncring < GT__CRING ? c->ncring : GT__CRING;
    for (uint64_t k = 0; k < n; k++) {
        const struct gt__cregion *r = &c->cring[(c->ncring - 1 - k) % GT__CRING];
        if (r->tid != tid || ts < r->ts || ts > r->end)
            continue;
        if (!c->capi_ready) {
            if (gt__bmap_init(&c->capi, GT__CORR_MAP_CAP))
                return;
            c->capi_ready = 1;
        }
        struct gt__bmap_val v = {.x = r->seq};
        (void)gt__bmap_put(&c->capi, 0, corr, &v);
        return;
    }
}

int gt__region_kernel(struct gt__writer *c, struct gt__ev *ev, uint32_t corr,
                      uint32_t name, struct gt__cjoin *j)
{
    struct gt__bmap_val v;
    if (!c->capi_ready || corr == 0 || !gt__bmap_take(&c->capi, 0, corr, &v))
        return 0;
    if (v.x == 0 || v.x > c->ncring || c->ncring - v.x >= GT__CRING)
        return 0; /* its region is no longer kept */
    struct gt__cregion *r = &c->cring[(v.x - 1) % GT__CRING];
    const struct gt__cgraph *g = gt__cs_cgraph(c->s, r->graph);
    if (!g || g->ncalls == 0)
        return 0;
    for (uint32_t k = 0; k < g->ncalls; k++) {
        uint32_t i = (r->cursor + k) % g->ncalls;
        const struct gt__ccall *cl = &g->calls[i];
        if (cl->phase && (cl->flags & GT_CCALL_GPU) &&
            same_text(c->s, cl->scope, name)) {
            r->cursor = i + 1;
            (void)call_args(c, r->layer, r->flags, r->graph, cl, ev, j);
            return 1;
        }
    }
    c->an.compiled_unmatched++;
    return 0;
}

void gt__region_closed(struct gt__writer *c, struct gt__wthread *th,
                       const struct gt__open *o, uint64_t end, int unclosed)
{
    const struct gt__cgraph *g = gt__cs_cgraph(c->s, (uint32_t)o->op_id);
    struct gt__ev ev;
    char name[96];
    int n;
    if (g && g->graph_id != UINT32_MAX)
        n = snprintf(name, sizeof(name), "compiled graph %u %s",
                     (unsigned)g->graph_id,
                     g->phase == GT_COMPILED_BACKWARD    ? "backward"
                     : g->phase == GT_COMPILED_INFERENCE ? "inference"
                                                         : "forward");
    else
        n = snprintf(name, sizeof(name), "compiled graph");
    gt__ev_init(&ev, GT__CAT_COMPILED, th->track, o->ts, end);
    gt__ev_name_text(&ev, name, (size_t)n);
    if (g && g->compile_id)
        gt__ev_sid(&ev, "compile_id", gt__str_known(c, g->compile_id));
    if (o->layer)
        gt__ev_sid(&ev, "layer", gt__str_known(c, o->layer));
    if (!g)
        gt__ev_bool(&ev, "unmapped", 1);
    if (unclosed)
        gt__ev_bool(&ev, "unclosed", 1);
    gt__emit_slice(c->out, &ev);

    uint32_t from = o->param <= th->ncfwd ? o->param : th->ncfwd;
    int32_t stop = gt__layer_of(c, o->layer);
    if (g && g->gpu_calls)
        cring_push(c, th, o, end);
    region_spans(c, th, from, GT_COMPILED_FORWARD, stop);
    region_spans(c, th, from, GT_COMPILED_RECOMPUTE, stop);
    th->ncfwd = from;
    if (th->nregions > 0 && --th->nregions == 0)
        emit_totals(c, th, o, end);
}

void gt__on_compile_span(struct gt__writer *c, const uint8_t *rec,
                         uint16_t size)
{
    struct gt_r_compile_span r;
    struct gt__ev ev;
    (void)size;
    memcpy(&r, rec, sizeof(r));
    if (r.end_ns < r.begin_ns) {
        c->an.negative_durations++;
        r.end_ns = r.begin_ns;
    }
    gt__see_ts(c, r.begin_ns);
    gt__see_ts(c, r.end_ns);
    if (!c->compile_track) {
        gt__main_proc(c);
        c->compile_track = gt__track_new(c, 0, UINT32_MAX, 11,
                                         "torch.compile");
        if (!c->compile_track)
            return;
    }
    uint32_t t = gt__place(c, c->compile_track, r.begin_ns, r.end_ns);
    if (!t)
        return;
    gt__ev_init(&ev, GT__CAT_COMPILE, t, r.begin_ns, r.end_ns);
    gt__ev_name_sid(&ev, gt__str_known(c, r.name));
    if (c->cur)
        gt__ev_u64(&ev, "tid", c->threads[c->cur - 1].os_tid);
    gt__emit_slice(c->out, &ev);
}
