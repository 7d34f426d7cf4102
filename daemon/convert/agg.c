/*
 * Per-layer aggregation (agg.h): the table, and the sink that fills it
 * while a recording is decoded.
 *
 * Why the sink runs the converter: a layer's backward span is not in any
 * record; it is computed (pass groups, late nodes of other threads, nodes
 * credited to ancestors, placement that drops what cannot nest, capture
 * windows routed to their own outputs), and `report` on a recording must
 * say exactly what `report` on its trace files says. So the sink is a
 * converter whose stream has no files (struct gt__cstream.no_files) and
 * an observer of the layer spans its writers emit (gt__span_obs), which
 * turns them into rows as they go: nothing is written or parsed back, and
 * memory is the converter's bounded state plus one row per layer.
 *
 * Rows are found by path through an open-addressing index (FNV-1a).
 */
#include <errno.h>
#include <stdlib.h>

#include "common/alloc.h"
#include "common/util.h"
#include "daemon/convert/agg.h"
#include "daemon/convert/internal.h"

/* ------------------------------------------------------------ table */

void gt__agg_init(struct gt__agg *a)
{
    memset(a, 0, sizeof(*a));
}

void gt__agg_close(struct gt__agg *a)
{
    for (size_t i = 0; i < a->n; i++) {
        gt__free(a->layers[i].path);
        gt__free(a->layers[i].cls);
    }
    gt__free(a->layers);
    gt__free(a->slots);
    memset(a, 0, sizeof(*a));
}

/* (Re)builds the index for twice the rows' capacity. @return 0 or -ENOMEM. */
static int index_build(struct gt__agg *a, size_t cap)
{
    size_t ns = 64;
    while (ns < 2 * cap)
        ns *= 2;
    uint32_t *s = gt__calloc(ns, sizeof(*s));
    if (!s)
        return -ENOMEM;
    gt__free(a->slots);
    a->slots = s;
    a->nslots = ns;
    for (size_t r = 0; r < a->n; r++) {
        const char *p = a->layers[r].path;
        size_t i = gt__fnv1a32(p, strlen(p)) & (ns - 1);
        while (s[i])
            i = (i + 1) & (ns - 1);
        s[i] = (uint32_t)r + 1;
    }
    return 0;
}

/* The row of path (len bytes), added when new. @return it, or NULL. */
static struct gt__agg_layer *row_get(struct gt__agg *a, const char *path,
                                     size_t len)
{
    if (!a->slots && index_build(a, a->cap))
        return NULL;
    size_t mask = a->nslots - 1, i = gt__fnv1a32(path, len) & mask;
    for (; a->slots[i]; i = (i + 1) & mask) {
        struct gt__agg_layer *l = &a->layers[a->slots[i] - 1];
        if (strlen(l->path) == len && memcmp(l->path, path, len) == 0)
            return l;
    }
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        struct gt__agg_layer *nl = gt__realloc(a->layers, cap * sizeof(*nl));
        if (!nl)
            return NULL;
        a->layers = nl;
        a->cap = cap;
    }
    struct gt__agg_layer *l = &a->layers[a->n];
    memset(l, 0, sizeof(*l));
    if (!(l->path = gt__malloc(len + 1)))
        return NULL;
    memcpy(l->path, path, len);
    l->path[len] = '\0';
    l->first_fwd_ts = -1;
    l->first_ts = -1;
    a->n++;
    /* The new row goes where the probe ended, or into a larger index. */
    if (2 * a->n > a->nslots) {
        if (index_build(a, a->cap)) {
            gt__free(l->path);
            a->n--;
            return NULL;
        }
    } else {
        a->slots[i] = (uint32_t)a->n;
    }
    return l;
}

/*
 * Splits "<path> (<Class>) forward" (or "... backward", or without the
 * class) into path and class. @return 0, or -1 when name has no phase.
 */
static int split_name(const char *name, const char *phase, size_t *path_len,
                      const char **cls, size_t *cls_len)
{
    size_t n = strlen(name), pl = strlen(phase);

    if (n < pl + 2 || strcmp(name + n - pl, phase) != 0 || name[n - pl - 1] != ' ')
        return -1;
    n -= pl + 1;
    *cls = NULL;
    *cls_len = 0;
    if (n > 0 && name[n - 1] == ')') {
        for (size_t i = n - 1; i > 1; i--) {
            if (name[i] == '(' && name[i - 1] == ' ') {
                *cls = name + i + 1;
                *cls_len = n - 1 - (i + 1);
                n = i - 1;
                break;
            }
        }
    }
    *path_len = n;
    return n ? 0 : -1;
}

int gt__agg_span(struct gt__agg *a, int fwd, const char *name, double ts,
                 double dur, double nodes)
{
    size_t path_len, cls_len;
    const char *cls;
    struct gt__agg_layer *l;

    if (split_name(name, fwd ? "forward" : "backward", &path_len, &cls,
                   &cls_len) < 0)
        return 0;
    if (!(l = row_get(a, name, path_len)))
        return -ENOMEM;
    if (cls && !l->cls) {
        if (!(l->cls = gt__malloc(cls_len + 1)))
            return -ENOMEM;
        memcpy(l->cls, cls, cls_len);
        l->cls[cls_len] = '\0';
    }
    if (l->first_ts < 0 || ts < l->first_ts)
        l->first_ts = ts;
    if (fwd) {
        if (l->first_fwd_ts < 0 || ts < l->first_fwd_ts)
            l->first_fwd_ts = ts;
        l->fwd_calls++;
        l->fwd_us += dur;
    } else {
        l->bwd_spans++;
        l->bwd_us += dur;
        if (nodes > 0)
            l->bwd_nodes += (uint64_t)nodes;
    }
    return 0;
}

void gt__agg_iteration(struct gt__agg *a, double dur)
{
    a->steps++;
    a->step_us += dur;
}

/* ------------------------------------------------------------ order */

static int by_fwd(const void *pa, const void *pb)
{
    const struct gt__agg_layer *x = pa, *y = pb;
    return x->fwd_us < y->fwd_us ? 1 : x->fwd_us > y->fwd_us ? -1 : 0;
}

static int by_bwd(const void *pa, const void *pb)
{
    const struct gt__agg_layer *x = pa, *y = pb;
    return x->bwd_us < y->bwd_us ? 1 : x->bwd_us > y->bwd_us ? -1 : 0;
}

static int by_name(const void *pa, const void *pb)
{
    const struct gt__agg_layer *x = pa, *y = pb;
    return strcmp(x->path, y->path);
}

/* Model order: by first forward call (a parent starts before its
 * children), then layers never called forward (containers such as
 * ModuleList) by their first backward; ties by path. */
static int by_model(const void *pa, const void *pb)
{
    const struct gt__agg_layer *x = pa, *y = pb;
    if ((x->first_fwd_ts < 0) != (y->first_fwd_ts < 0))
        return x->first_fwd_ts < 0 ? 1 : -1;
    double a_ts = x->first_fwd_ts < 0 ? x->first_ts : x->first_fwd_ts;
    double b_ts = y->first_fwd_ts < 0 ? y->first_ts : y->first_fwd_ts;
    if (a_ts != b_ts)
        return a_ts < b_ts ? -1 : 1;
    return strcmp(x->path, y->path);
}

void gt__agg_sort(struct gt__agg *a, enum gt__agg_order order)
{
    static int (*const cmp[])(const void *, const void *) = {
        [GT__AGG_MODEL] = by_model,
        [GT__AGG_FWD] = by_fwd,
        [GT__AGG_BWD] = by_bwd,
        [GT__AGG_NAME] = by_name,
    };
    if (a->n == 0 || (unsigned)order > GT__AGG_NAME)
        return;
    qsort(a->layers, a->n, sizeof(*a->layers), cmp[order]);
    /* Rows moved: the index is rebuilt by the next lookup. */
    gt__free(a->slots);
    a->slots = NULL;
    a->nslots = 0;
}

/* ------------------------------------------------------------ sink */

struct agg_sink {
    struct gt__csink base;
    struct gt__agg *a;
    struct gt__conv *conv;
    struct gt__span_obs obs;
    int err;               /* first table error (out of memory) */
};

/* Trace times are integer ns written as us with three decimals; ns / 1e3
 * is the double a JSON reader parses from that text (both are the
 * correctly rounded value of the same decimal). */
static double us_of(uint64_t ns)
{
    return (double)ns / 1000.0;
}

static void obs_layer(void *ud, int fwd, const char *name, uint64_t rel_ns,
                      uint64_t dur_ns, uint64_t nodes)
{
    struct agg_sink *k = ud;
    int rc = gt__agg_span(k->a, fwd, name, us_of(rel_ns), us_of(dur_ns),
                          fwd ? 0 : (double)nodes);
    if (rc && !k->err)
        k->err = rc;
}

static void obs_iteration(void *ud, uint64_t dur_ns)
{
    struct agg_sink *k = ud;
    gt__agg_iteration(k->a, us_of(dur_ns));
}

static int agg_hello(struct gt__csink *s, const struct gt__hello_info *h)
{
    struct agg_sink *k = (struct agg_sink *)s;
    int rc = gt__conv_hello(k->conv, h);
    return rc ? rc : k->err;
}

static int agg_chunk(struct gt__csink *s, const struct gt_chunk_header *h,
                     const uint8_t *records, size_t raw_size)
{
    struct agg_sink *k = (struct agg_sink *)s;
    int rc = gt__conv_chunk(k->conv, h, records, raw_size);
    return rc ? rc : k->err;
}

static int agg_finish(struct gt__csink *s, const struct gt__framer_stats *st,
                      int truncated)
{
    struct agg_sink *k = (struct agg_sink *)s;
    int rc = gt__conv_finish(k->conv, st, truncated);
    return rc ? rc : k->err;
}

static void agg_free(struct gt__csink *s)
{
    struct agg_sink *k = (struct agg_sink *)s;
    gt__conv_free(k->conv);
    gt__free(k);
}

static const struct gt__csink_ops agg_ops = {
    .hello = agg_hello,
    .chunk = agg_chunk,
    .finish = agg_finish,
    .free = agg_free,
};

struct gt__csink *gt__agg_sink_create(struct gt__agg *a)
{
    /* No rotation: a file boundary changes no span. */
    const struct gt__conv_opts o = {.out_path = "(aggregation)",
                                    .max_file_bytes = UINT64_MAX >> 1,
                                    .max_file_events = UINT64_MAX >> 1};
    struct agg_sink *k = gt__calloc(1, sizeof(*k));
    if (!k)
        return NULL;
    k->base.ops = &agg_ops;
    k->a = a;
    k->obs = (struct gt__span_obs){.ud = k, .layer = obs_layer,
                                   .iteration = obs_iteration};
    k->conv = gt__conv_create(&o);
    if (!k->conv) {
        gt__free(k);
        return NULL;
    }
    k->conv->s.no_files = 1;
    k->conv->s.obs = &k->obs;
    return &k->base;
}
