/*
 * The aggregation as an emitter (emit.h), and the consumer that decodes a
 * recording into it (gt__agg_consumer_create, what `gradtrace report`
 * runs on a .gtr).
 *
 * Why a converter runs behind it: a layer's backward span is not in any
 * record; it is computed (pass groups, late nodes of other threads, nodes
 * credited to ancestors, placement that drops what cannot nest, capture
 * windows routed to their own outputs), and `report` on a recording must
 * say exactly what `report` on its trace files says. So the consumer is a
 * converter whose writers' emitters are this one instead of the Chrome
 * JSON one: they get the same calls, and read back the events a reader of
 * the trace reads (the layer spans by category, named "<path> (<Class>)
 * forward" and so on, the pass groups' totals, the iterations, the GPU
 * kernels with a layer), which become rows as they come. Nothing is
 * formatted, written or parsed back; memory is the converter's bounded
 * state plus one row per layer. The numbers are the ones the trace holds
 * (node-time sums in ns, which the trace writes as us with three
 * decimals: ns / 1e3 is the double a reader parses), so both routes give
 * the same rows bit for bit.
 *
 * Times are the trace's, as `report` has always read them: a layer span
 * starts at the base at the earliest, and never lasts less than nothing;
 * an iteration is measured from its own start, a kernel by its record.
 */
#include <errno.h>

#include "common/alloc.h"
#include "daemon/convert/agg.h"
#include "daemon/convert/internal.h"

/* The consumer: a converter whose outputs all add to one table. */
struct agg_consumer {
    struct gt__consumer base;
    struct gt__agg *a;
    struct gt__conv *conv;
    struct gt__emit_kind kind; /* makes agg_emit for each writer */
    int err;                   /* first table error (out of memory) */
};

/* One writer's output: the table, through its consumer. */
struct agg_emit {
    struct gt__emit base;
    struct agg_consumer *k;
    const struct gt__cstream *s;
    const struct gt__writer *w;
    int begun;                 /* an event was said */
};

/* A shared window's writer: the main writer has a copy of each of its
 * events, which the table must count once. */
static int copy_of_main(const struct agg_emit *e)
{
    return e->w && e->w->shared_window;
}

/* Trace times are integer ns written as us with three decimals; ns / 1e3
 * is the double a JSON reader parses from that text (both are the
 * correctly rounded value of the same decimal). */
static double us_of(uint64_t ns)
{
    return (double)ns / 1000.0;
}

static void table_error(struct agg_consumer *k, int rc)
{
    if (rc && !k->err)
        k->err = rc;
}

/* Text t as a reader of the trace gets it back (at most GT_STRING_MAX
 * bytes of its source), at p. @return the end (p has room for 3 bytes
 * per source byte). */
static char *text_at(const struct gt__cstream *s, char *p,
                     const struct gt__text *t)
{
    uint32_t len = t->len;
    const char *src = t->s ? t->s : gt__cstream_raw(s, t->sid, &len);
    return p + gt__json_text(p, src, len < GT_STRING_MAX ? len : GT_STRING_MAX);
}

/* The event's name as text, NUL-terminated, into buf (room for names of
 * two strings and literals). */
#define NAME_ROOM (6 * GT_STRING_MAX + 64)
static void name_of(const struct gt__cstream *s, const struct gt__ev *ev,
                    char *buf)
{
    char *p = buf;
    for (uint32_t i = 0; i < ev->nname; i++)
        p = text_at(s, p, &ev->name[i]);
    *p = '\0';
}

/* Text arg key of ev as text into buf (3 * GT_STRING_MAX + 1 bytes), or
 * NULL when ev has none. */
static const char *text_arg(const struct gt__cstream *s,
                            const struct gt__ev *ev, const char *key,
                            char *buf)
{
    const struct gt__arg *a = gt__ev_find(ev, key);
    if (!a || (a->type != GT__ARG_TEXT && a->type != GT__ARG_SID))
        return NULL;
    *text_at(s, buf, &a->v.t) = '\0';
    return buf;
}

/* Unsigned arg key of ev (integers and ns alike), 0 when absent. */
static uint64_t u64_arg(const struct gt__ev *ev, const char *key)
{
    const struct gt__arg *a = gt__ev_find(ev, key);
    return a && (a->type == GT__ARG_U64 || a->type == GT__ARG_NS) ? a->v.u : 0;
}

/* ------------------------------------------------------------ events */

/* A layer span of phase ph: its name, its start (at the base at the
 * earliest) and duration, and for a backward span its sums. */
static void layer_span(struct agg_emit *e, const struct gt__ev *ev,
                       enum gt__agg_phase ph)
{
    char name[NAME_ROOM], parent[3 * GT_STRING_MAX + 1];
    char top[3 * GT_STRING_MAX + 1];
    uint64_t s = ev->ts < e->s->base_ns ? e->s->base_ns : ev->ts;
    struct gt__agg_ev a = {.phase = ph, .name = name,
                           .ts = us_of(s - e->s->base_ns),
                           .dur = us_of(ev->end < s ? 0 : ev->end - s)};
    name_of(e->s, ev, name);
    /* Backward spans and compiled forward spans say their parent. */
    a.parent = text_arg(e->s, ev, "parent", parent);
    if (ph != GT__AGG_PH_BWD && gt__ev_find(ev, "time_us")) {
        a.time_us = us_of(u64_arg(ev, "time_us"));
        a.timed = 1;
    }
    /* Backward: its own nodes'; forward: the span's (schema). */
    a.comm_us = us_of(u64_arg(ev, "comm_us"));
    if (ph == GT__AGG_PH_BWD) {
        a.nodes = (double)u64_arg(ev, "nodes");
        a.self_nodes = (double)u64_arg(ev, "self_nodes");
        a.order2 = (double)u64_arg(ev, "second_order_nodes");
        a.time_us = us_of(u64_arg(ev, "time_us"));
        a.self_us = us_of(u64_arg(ev, "self_us"));
        a.accg_us = us_of(u64_arg(ev, "accumulate_grad_us"));
        a.top_node = text_arg(e->s, ev, "top_node", top);
        a.top_node_us = us_of(u64_arg(ev, "top_node_us"));
    }
    table_error(e->k, gt__agg_add(e->k->a, &a));
}

/* An iteration; a capture window's own step (it says "window") covers
 * the window, not the iteration, and is no iteration of the table. */
static void iteration(struct agg_emit *e, const struct gt__ev *ev)
{
    uint64_t base = e->s->base_ns;
    if (gt__ev_find(ev, "window"))
        return;
    table_error(e->k, gt__agg_step(e->k->a, u64_arg(ev, "step"),
                                   us_of(ev->ts < base ? 0 : ev->ts - base),
                                   us_of(ev->end < ev->ts ? 0
                                                          : ev->end - ev->ts)));
}

/* A GPU kernel tagged with a layer (args "layer" and "phase"). */
static void kernel(struct agg_emit *e, const struct gt__ev *ev)
{
    char path[3 * GT_STRING_MAX + 1], name[3 * GT_STRING_MAX + 1];
    if (!text_arg(e->s, ev, "layer", path) || ev->nname == 0)
        return;
    const struct gt__arg *ph = gt__ev_find(ev, "phase");
    int bwd = ph && ph->type == GT__ARG_TEXT && ph->v.t.s &&
              ph->v.t.len == 8 && memcmp(ph->v.t.s, "backward", 8) == 0;
    *text_at(e->s, name, &ev->name[0]) = '\0';
    table_error(e->k, gt__agg_kernel(e->k->a, path, bwd,
                                     us_of(ev->end - ev->ts), name));
}

static void ag_slice(struct gt__emit *em, const struct gt__ev *ev)
{
    struct agg_emit *e = (struct agg_emit *)em;
    e->begun = 1;
    if (copy_of_main(e))
        return;
    switch (ev->cat) {
    case GT__CAT_LAYER_FORWARD:
        layer_span(e, ev, GT__AGG_PH_FWD);
        break;
    case GT__CAT_LAYER_RECOMPUTE:
        layer_span(e, ev, GT__AGG_PH_RECOMPUTE);
        break;
    case GT__CAT_LAYER_BACKWARD:
        layer_span(e, ev, GT__AGG_PH_BWD);
        break;
    case GT__CAT_ITERATION:
        iteration(e, ev);
        break;
    case GT__CAT_KERNEL:
        kernel(e, ev);
        break;
    default:
        break;
    }
}

/* A pass group's totals: the backward time no layer owns. */
static void ag_instant(struct gt__emit *em, const struct gt__ev *ev)
{
    struct agg_emit *e = (struct agg_emit *)em;
    e->begun = 1;
    if (copy_of_main(e))
        return;
    if (ev->cat == GT__CAT_COMPILED_TOTALS) {
        static const char *const keys[5] = {"region_us", "one_layer_us",
                                            "fused_us", "unowned_us",
                                            "unmatched_us"};
        char ph[3 * GT_STRING_MAX + 1];
        double us[5];
        for (int i = 0; i < 5; i++)
            us[i] = us_of(u64_arg(ev, keys[i]));
        const char *p = text_arg(e->s, ev, "phase", ph);
        gt__agg_compiled(e->k->a, p && strcmp(p, "backward") == 0, us,
                         us_of(gt__cstream_rel(e->s, ev->ts)));
        return;
    }
    if (ev->cat != GT__CAT_BACKWARD_TOTALS)
        return;
    struct gt__agg_rest r = {
        .nodes = u64_arg(ev, "nodes"),
        .un_nodes = u64_arg(ev, "unattributed_nodes"),
        .un_accg = u64_arg(ev, "unattributed_accumulate_grad"),
        .order2 = u64_arg(ev, "second_order_nodes"),
        .time_us = us_of(u64_arg(ev, "time_us")),
        .un_us = us_of(u64_arg(ev, "unattributed_us")),
        .comm_us = us_of(u64_arg(ev, "comm_us"))};
    table_error(e->k, gt__agg_totals_at(e->k->a, &r,
                                        us_of(gt__cstream_rel(e->s, ev->ts))));
}

static void ag_counter(struct gt__emit *em, const struct gt__ev *ev)
{
    (void)ev;
    ((struct agg_emit *)em)->begun = 1;
}

static void ag_flow(struct gt__emit *em, const struct gt__flow *f)
{
    (void)f;
    ((struct agg_emit *)em)->begun = 1;
}

/* Tracks are the trace's layout; the table needs none of it. */
static void ag_process(struct gt__emit *em, uint32_t proc, uint32_t pid,
                       uint32_t sort, const char *name)
{
    (void)em;
    (void)proc;
    (void)pid;
    (void)sort;
    (void)name;
}

static void ag_track(struct gt__emit *em, uint32_t t, uint32_t proc,
                     uint32_t tid, uint32_t sort, const char *name)
{
    (void)em;
    (void)t;
    (void)proc;
    (void)tid;
    (void)sort;
    (void)name;
}

static int ag_begun(const struct gt__emit *em)
{
    return ((const struct agg_emit *)em)->begun;
}

static void ag_free(struct gt__emit *em)
{
    gt__free(em);
}

/* No files: every life cycle op is left out. */
static const struct gt__emit_ops agg_emit_ops = {
    .process = ag_process,
    .track = ag_track,
    .slice = ag_slice,
    .instant = ag_instant,
    .counter = ag_counter,
    .flow = ag_flow,
    .begun = ag_begun,
    .free = ag_free,
};

static struct gt__emit *agg_emit_create(const struct gt__emit_kind *kind,
                                        const struct gt__emit_src *src)
{
    struct agg_emit *e = gt__calloc(1, sizeof(*e));
    if (!e)
        return NULL;
    e->base.ops = &agg_emit_ops;
    e->k = kind->ud;
    e->s = src->s;
    e->w = src->w;
    return &e->base;
}

/* ------------------------------------------------------------ consumer */

static int agg_hello(struct gt__consumer *s, const struct gt__hello_info *h)
{
    struct agg_consumer *k = (struct agg_consumer *)s;
    k->a->rank = h->h.rank;
    int rc = gt__conv_hello(k->conv, h);
    return rc ? rc : k->err;
}

static int agg_chunk(struct gt__consumer *s, const struct gt_chunk_header *h,
                     const uint8_t *records, size_t raw_size)
{
    struct agg_consumer *k = (struct agg_consumer *)s;
    int rc = gt__conv_chunk(k->conv, h, records, raw_size);
    return rc ? rc : k->err;
}

static int agg_finish(struct gt__consumer *s,
                      const struct gt__framer_stats *st, int truncated)
{
    struct agg_consumer *k = (struct agg_consumer *)s;
    int rc = gt__conv_finish(k->conv, st, truncated);
    const uint64_t *lost = k->conv->s.lost_sum;
    int ops = (int)gt__conv_ops_detail(k->conv);

    if (ops > k->a->ops_detail)
        k->a->ops_detail = ops;
    gt__agg_lost(k->a, lost[GT_LOST_EVENTS] + lost[GT_LOST_CUPTI],
                 lost[GT_LOST_CHUNKS] + (st ? st->chunks_lost : 0),
                 st ? st->corrupt_chunks : 0,
                 truncated || !gt__conv_goodbye(k->conv));
    return rc ? rc : k->err;
}

static void agg_free(struct gt__consumer *s)
{
    struct agg_consumer *k = (struct agg_consumer *)s;
    gt__conv_free(k->conv);
    gt__free(k);
}

static const struct gt__consumer_ops agg_consumer_ops = {
    .hello = agg_hello,
    .chunk = agg_chunk,
    .finish = agg_finish,
    .free = agg_free,
};

struct gt__consumer *gt__agg_consumer_create(struct gt__agg *a)
{
    /* No files, so no rotation: a file boundary changes no span. The
     * path only names the capture windows' outputs, which write none. */
    const struct gt__conv_opts o = {.out_path = "(aggregation)",
                                    .max_file_bytes = UINT64_MAX >> 1,
                                    .max_file_events = UINT64_MAX >> 1};
    struct agg_consumer *k = gt__calloc(1, sizeof(*k));
    if (!k)
        return NULL;
    k->base.ops = &agg_consumer_ops;
    k->a = a;
    k->kind = (struct gt__emit_kind){.create = agg_emit_create, .ud = k};
    k->conv = gt__conv_create_kind(&o, &k->kind);
    if (!k->conv) {
        gt__free(k);
        return NULL;
    }
    return &k->base;
}
