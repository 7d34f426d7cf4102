/*
 * Per-layer aggregation (agg.h): the table. What fills it from a
 * recording is the aggregation emitter (agg_emit.c); from trace files,
 * the report's reader (cli/report.c).
 *
 * Rows are found by path through an open-addressing index (FNV-1a). The
 * module tree (gt__agg_finish, model order) comes from the parent each
 * backward span names, else from the path.
 */
#include <errno.h>
#include <stdlib.h>

#include "common/alloc.h"
#include "common/util.h"
#include "daemon/convert/agg.h"

/* ------------------------------------------------------------ table */

void gt__agg_init(struct gt__agg *a)
{
    memset(a, 0, sizeof(*a));
    a->rank = -1;
}

void gt__agg_close(struct gt__agg *a)
{
    for (size_t i = 0; i < a->n; i++) {
        gt__free(a->layers[i].path);
        gt__free(a->layers[i].cls);
        gt__free(a->layers[i].parent);
        gt__free(a->layers[i].it);
        gt__free(a->layers[i].top_node);
        for (int k = 0; k < GT__AGG_TOPK; k++)
            gt__free(a->layers[i].bk_name[k]);
    }
    gt__free(a->layers);
    gt__free(a->slots);
    gt__free(a->rest_it);
    gt__free(a->tree_ix);
    gt__free(a->skip);
    gt__free(a->its);
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
    l->up = -1;
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

/* A copy of len bytes of text, NUL-terminated, or NULL. */
static char *dup_n(const char *text, size_t len)
{
    char *d = gt__malloc(len + 1);
    if (d) {
        memcpy(d, text, len);
        d[len] = '\0';
    }
    return d;
}

/* The span's numbers as one iteration's values. */
static struct gt__agg_vals vals_of(const struct gt__agg_ev *ev)
{
    struct gt__agg_vals v = {0};
    if (ev->phase == GT__AGG_PH_FWD) {
        v.fwd_calls = 1;
        v.fwd_us = ev->dur;
    } else if (ev->phase == GT__AGG_PH_RECOMPUTE) {
        v.rc_calls = 1;
        v.rc_us = ev->dur;
    } else {
        v.bwd_spans = 1;
        v.bwd_us = ev->time_us >= 0 ? ev->time_us : ev->dur;
        v.self_us = ev->self_us > 0 ? ev->self_us : 0;
        v.accg_us = ev->accg_us > 0 ? ev->accg_us : 0;
        v.nodes = ev->nodes > 0 ? (double)(uint64_t)ev->nodes : 0;
        v.self_nodes = ev->self_nodes > 0 ? (double)(uint64_t)ev->self_nodes : 0;
        v.order2 = ev->order2 > 0 ? (double)(uint64_t)ev->order2 : 0;
    }
    return v;
}

static void add_backward(struct gt__agg_layer *l, const struct gt__agg_ev *ev)
{
    double t = ev->time_us >= 0 ? ev->time_us : ev->dur;
    l->bwd_spans++;
    l->bwd_wall_us += ev->dur;
    l->bwd_us += t;
    if (ev->self_us > 0)
        l->bwd_self_us += ev->self_us;
    if (ev->accg_us > 0)
        l->accg_us += ev->accg_us;
    if (ev->nodes > 0)
        l->bwd_nodes += (uint64_t)ev->nodes;
    if (ev->self_nodes > 0)
        l->bwd_self_nodes += (uint64_t)ev->self_nodes;
    if (ev->order2 > 0)
        l->order2 += (uint64_t)ev->order2;
}

/* A backward span's longest own node into the row's top-1. @return 0 or
 * -ENOMEM. */
static int top_add(struct gt__agg_layer *l, const struct gt__agg_ev *ev)
{
    if (l->top_node && strcmp(l->top_node, ev->top_node) == 0) {
        l->top_node_us += ev->top_node_us;
        return 0;
    }
    if (l->top_node && ev->top_node_us <= l->top_node_us)
        return 0;
    char *d = dup_n(ev->top_node, strlen(ev->top_node));
    if (!d)
        return -ENOMEM;
    gt__free(l->top_node);
    l->top_node = d;
    l->top_node_us = ev->top_node_us;
    return 0;
}

/* gt__agg_add with every string of ev clean. */
static int add_clean(struct gt__agg *a, const struct gt__agg_ev *ev)
{
    static const char *const phases[] = {"backward", "forward", "recompute"};
    size_t path_len, cls_len;
    const char *cls;
    struct gt__agg_layer *l;

    if ((unsigned)ev->phase > GT__AGG_PH_RECOMPUTE ||
        split_name(ev->name, phases[ev->phase], &path_len, &cls,
                   &cls_len) < 0)
        return 0;
    if (!(l = row_get(a, ev->name, path_len)))
        return -ENOMEM;
    if (cls && !l->cls && !(l->cls = dup_n(cls, cls_len)))
        return -ENOMEM;
    if (ev->parent && !l->parent) {
        if (!(l->parent = dup_n(ev->parent, strlen(ev->parent))))
            return -ENOMEM;
        a->tree_dirty = 1;
    }
    if (l->first_ts < 0 || ev->ts < l->first_ts)
        l->first_ts = ev->ts;
    if (ev->phase == GT__AGG_PH_FWD) {
        if (l->first_fwd_ts < 0 || ev->ts < l->first_fwd_ts)
            l->first_fwd_ts = ev->ts;
        l->fwd_calls++;
        l->fwd_us += ev->dur;
    } else if (ev->phase == GT__AGG_PH_RECOMPUTE) {
        l->rc_calls++;
        l->rc_us += ev->dur;
    } else {
        add_backward(l, ev);
        if (ev->top_node && gt__agg_ts_selected(a, ev->ts)) {
            if (top_add(l, ev) < 0)
                return -ENOMEM;
            if (strstr(ev->top_node, "CompiledFunction")) {
                a->compiled_spans++;
                a->compiled_us += ev->top_node_us;
            }
        }
    }
    struct gt__agg_vals v = vals_of(ev);
    return gt__agg_iter_span(a, &l->it, ev->ts, &v);
}

/* A copy of s made display text (gt__text_clean), or NULL. */
static char *dup_clean(const char *s)
{
    char *d = dup_n(s, strlen(s));
    if (d)
        gt__text_clean(d);
    return d;
}

/* Whether s (NULL: none) is display text already. */
static int is_clean(const char *s)
{
    return !s || gt__text_is_clean(s);
}

int gt__agg_add(struct gt__agg *a, const struct gt__agg_ev *ev)
{
    struct gt__agg_ev c = *ev;
    char *name, *parent = NULL, *top = NULL;
    int rc = -ENOMEM;

    if (is_clean(ev->name) && is_clean(ev->parent) && is_clean(ev->top_node))
        return add_clean(a, ev);
    /* A hostile or damaged name: the row gets its cleaned form, so every
     * output (the terminal, CSV, JSON, SVG) prints text. */
    if (!(name = dup_clean(ev->name)) ||
        (ev->parent && !(parent = dup_clean(ev->parent))) ||
        (ev->top_node && !(top = dup_clean(ev->top_node))))
        goto out_free;
    c.name = name;
    c.parent = parent;
    c.top_node = top;
    rc = add_clean(a, &c);
out_free:
    gt__free(name);
    gt__free(parent);
    gt__free(top);
    return rc;
}

int gt__agg_span(struct gt__agg *a, int fwd, const char *name, double ts,
                 double dur, double nodes)
{
    struct gt__agg_ev ev = {.phase = fwd ? GT__AGG_PH_FWD : GT__AGG_PH_BWD,
                            .name = name, .ts = ts, .dur = dur,
                            .nodes = fwd ? 0 : nodes, .time_us = -1};
    return gt__agg_add(a, &ev);
}

/* Adds us to name in row l's backward kernel top-K (space-saving).
 * @return 0 or -ENOMEM. */
static int topk_add(struct gt__agg_layer *l, const char *name, double us)
{
    int low = 0;
    for (int i = 0; i < GT__AGG_TOPK; i++) {
        if (l->bk_name[i] && strcmp(l->bk_name[i], name) == 0) {
            l->bk_us[i] += us;
            return 0;
        }
        if (!l->bk_name[i] || (l->bk_name[low] && l->bk_us[i] < l->bk_us[low]))
            low = i;
    }
    char *d = dup_n(name, strlen(name));
    if (!d)
        return -ENOMEM;
    if (!l->bk_name[low])
        l->bk_us[low] = 0;
    gt__free(l->bk_name[low]);
    l->bk_name[low] = d;
    l->bk_us[low] += us;
    return 0;
}

int gt__agg_top_kernel(const struct gt__agg_layer *l)
{
    int best = -1;
    for (int i = 0; i < GT__AGG_TOPK; i++)
        if (l->bk_name[i] && (best < 0 || l->bk_us[i] > l->bk_us[best]))
            best = i;
    return best;
}

/* gt__agg_kernel with path and name clean. */
static int kernel_clean(struct gt__agg *a, const char *path, int bwd,
                        double dur, const char *name)
{
    struct gt__agg_layer *l;
    if (!path[0])
        return 0;
    if (!(l = row_get(a, path, strlen(path))))
        return -ENOMEM;
    dur = dur > 0 ? dur : 0;
    l->gpu_kernels++;
    l->gpu_self_us[bwd ? 1 : 0] += dur;
    a->gpu_kernels++;
    return bwd && name && name[0] ? topk_add(l, name, dur) : 0;
}

int gt__agg_kernel(struct gt__agg *a, const char *path, int bwd, double dur,
                   const char *name)
{
    char *p, *n = NULL;
    int rc = -ENOMEM;

    if (is_clean(path) && is_clean(name))
        return kernel_clean(a, path, bwd, dur, name);
    if (!(p = dup_clean(path)) || (name && !(n = dup_clean(name))))
        goto out_free;
    rc = kernel_clean(a, p, bwd, dur, name ? n : NULL);
out_free:
    gt__free(p);
    gt__free(n);
    return rc;
}

void gt__agg_totals(struct gt__agg *a, const struct gt__agg_rest *t)
{
    a->rest.groups++;
    a->rest.nodes += t->nodes;
    a->rest.un_nodes += t->un_nodes;
    a->rest.un_accg += t->un_accg;
    a->rest.order2 += t->order2;
    a->rest.time_us += t->time_us;
    a->rest.un_us += t->un_us;
}

/*
 * A group's remainder rides the per-iteration machinery of the rows
 * (agg_iter.c) in a row's values: groups as bwd_spans, nodes as fwd_calls,
 * unattributed nodes as nodes, their time as bwd_us, the groups' node
 * time as self_us, unattributed AccumulateGrad nodes as rc_calls and
 * second-order nodes as rc_us. gt__agg_iter_finish maps them back.
 */
int gt__agg_totals_at(struct gt__agg *a, const struct gt__agg_rest *t,
                      double ts)
{
    struct gt__agg_vals v = {
        .bwd_spans = 1, .fwd_calls = (double)t->nodes,
        .nodes = (double)t->un_nodes, .bwd_us = t->un_us,
        .self_us = t->time_us, .rc_calls = (double)t->un_accg,
        .rc_us = (double)t->order2};
    gt__agg_totals(a, t);
    return gt__agg_iter_span(a, &a->rest_it, ts, &v);
}

void gt__agg_iteration(struct gt__agg *a, double dur)
{
    a->steps++;
    a->step_us += dur;
}

/* Copies text into *d unless it is set. @return 0 or -ENOMEM. */
static int dup_once(char **d, const char *text)
{
    if (*d || !text)
        return 0;
    return (*d = dup_n(text, strlen(text))) ? 0 : -ENOMEM;
}

/* Row s's sums into row d (same path). @return 0 or -ENOMEM. */
static int row_merge(struct gt__agg *a, struct gt__agg_layer *d,
                     const struct gt__agg_layer *s)
{
    if (dup_once(&d->cls, s->cls) || dup_once(&d->parent, s->parent))
        return -ENOMEM;
    if (s->first_ts >= 0 && (d->first_ts < 0 || s->first_ts < d->first_ts))
        d->first_ts = s->first_ts;
    if (s->first_fwd_ts >= 0 &&
        (d->first_fwd_ts < 0 || s->first_fwd_ts < d->first_fwd_ts))
        d->first_fwd_ts = s->first_fwd_ts;
    d->fwd_calls += s->fwd_calls;
    d->fwd_us += s->fwd_us;
    d->rc_calls += s->rc_calls;
    d->rc_us += s->rc_us;
    d->bwd_spans += s->bwd_spans;
    d->bwd_us += s->bwd_us;
    d->bwd_self_us += s->bwd_self_us;
    d->bwd_wall_us += s->bwd_wall_us;
    d->accg_us += s->accg_us;
    d->bwd_nodes += s->bwd_nodes;
    d->bwd_self_nodes += s->bwd_self_nodes;
    d->order2 += s->order2;
    d->gpu_kernels += s->gpu_kernels;
    d->gpu_self_us[0] += s->gpu_self_us[0];
    d->gpu_self_us[1] += s->gpu_self_us[1];
    for (int k = 0; k < GT__AGG_TOPK; k++)
        if (s->bk_name[k] && topk_add(d, s->bk_name[k], s->bk_us[k]) < 0)
            return -ENOMEM;
    if (s->top_node) {
        struct gt__agg_ev ev = {.top_node = s->top_node,
                                .top_node_us = s->top_node_us};
        if (top_add(d, &ev) < 0)
            return -ENOMEM;
    }
    return gt__agg_iter_merge(a, d, s);
}

int gt__agg_merge(struct gt__agg *d, const struct gt__agg *s)
{
    for (size_t i = 0; i < s->n; i++) {
        const struct gt__agg_layer *l = &s->layers[i];
        struct gt__agg_layer *r = row_get(d, l->path, strlen(l->path));
        if (!r || row_merge(d, r, l) < 0)
            return -ENOMEM;
    }
    uint64_t groups = d->rest.groups;
    gt__agg_totals(d, &s->rest);
    d->rest.groups = groups + s->rest.groups;
    gt__agg_steps_merge(d, s);
    /* d holds no span of its own: its iterations are s's, closed (a skip
     * list d carries only names what its inputs left out). */
    d->iter_closed = 1;
    if (d->rank < 0)
        d->rank = s->rank;
    if (s->ops_detail > d->ops_detail)
        d->ops_detail = s->ops_detail;
    return 0;
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

/* ------------------------------------------------------------ tree */

/* The row of path (len bytes), or -1. */
static long row_find(struct gt__agg *a, const char *path, size_t len)
{
    if (!a->slots && index_build(a, a->cap))
        return -1;
    size_t mask = a->nslots - 1, i = gt__fnv1a32(path, len) & mask;
    for (; a->slots[i]; i = (i + 1) & mask) {
        const struct gt__agg_layer *l = &a->layers[a->slots[i] - 1];
        if (strlen(l->path) == len && memcmp(l->path, path, len) == 0)
            return (long)a->slots[i] - 1;
    }
    return -1;
}

/* Row r's parent: the one its backward spans name, else the longest path
 * prefix that has a row. @return the row, or -1. */
static long parent_of(struct gt__agg *a, size_t r)
{
    const struct gt__agg_layer *l = &a->layers[r];
    long p = l->parent ? row_find(a, l->parent, strlen(l->parent)) : -1;
    for (size_t n = strlen(l->path); p < 0 && n > 1; n--)
        if (l->path[n - 1] == '.')
            p = row_find(a, l->path, n - 1);
    return p == (long)r ? -1 : p;
}

/* Sets every row's up and depth. Untrusted parents could form a cycle: a
 * walk longer than the table cuts the row it started from loose. */
static void tree_resolve(struct gt__agg *a)
{
    for (size_t r = 0; r < a->n; r++)
        a->layers[r].up = parent_of(a, r);
    for (size_t r = 0; r < a->n; r++) {
        size_t steps = 0;
        for (long q = a->layers[r].up; q >= 0; q = a->layers[q].up)
            if (++steps > a->n) {
                a->layers[r].up = -1;
                break;
            }
    }
    for (size_t r = 0; r < a->n; r++) {
        int d = 0;
        for (long q = a->layers[r].up; q >= 0; q = a->layers[q].up)
            d++;
        a->layers[r].depth = d;
    }
}

/* Row indexes, deepest first: children before their parents. */
static size_t *by_depth(const struct gt__agg *a)
{
    size_t *ix = gt__malloc((a->n ? a->n : 1) * sizeof(*ix)), k = 0;
    int maxd = 0;
    if (!ix)
        return NULL;
    for (size_t r = 0; r < a->n; r++)
        if (a->layers[r].depth > maxd)
            maxd = a->layers[r].depth;
    for (int d = maxd; d >= 0; d--)
        for (size_t r = 0; r < a->n; r++)
            if (a->layers[r].depth == d)
                ix[k++] = r;
    return ix;
}

const size_t *gt__agg_tree(struct gt__agg *a)
{
    if (a->tree_n == a->n + 1 && !a->tree_dirty && a->tree_ix)
        return a->tree_ix;
    tree_resolve(a);
    gt__free(a->tree_ix);
    a->tree_ix = by_depth(a);
    a->tree_n = a->tree_ix ? a->n + 1 : 0;
    a->tree_dirty = 0;
    return a->tree_ix;
}

void gt__agg_finish(struct gt__agg *a)
{
    if (a->finished)
        return;
    a->finished = 1;
    gt__agg_iter_finish(a);
    tree_resolve(a);
    size_t *ix = by_depth(a);
    if (!ix)
        return;
    for (size_t r = 0; r < a->n; r++) {
        long up = a->layers[r].up;
        if (up >= 0 && a->layers[up].fwd_calls == 0)
            a->layers[up].container = 1;
    }
    /* Deepest first, so a container's children are complete when their
     * sums reach it. Recompute is inclusive like forward: a module not
     * recomputed itself shows what was recomputed inside it. */
    for (size_t r = 0; r < a->n; r++)
        for (int ph = 0; ph < 2; ph++)
            a->layers[r].gpu_us[ph] = a->layers[r].gpu_self_us[ph];
    for (size_t k = 0; k < a->n; k++) {
        const struct gt__agg_layer *l = &a->layers[ix[k]];
        if (l->up < 0)
            continue;
        struct gt__agg_layer *p = &a->layers[l->up];
        p->gpu_us[0] += l->gpu_us[0];
        p->gpu_us[1] += l->gpu_us[1];
        if (p->container)
            p->fwd_us += l->fwd_us;
        if (p->rc_calls == 0)
            p->rc_us += l->rc_us;
    }
    gt__free(ix);
}

/* One row in model order: its parent's entry and the key siblings sort by
 * (first forward call, a container's first child's; none: last). */
struct ord_ent {
    size_t row;
    const struct ord_ent *up;
    int depth;
    int has_key;
    double key;
    const char *path;
};

static int sibling_cmp(const struct ord_ent *x, const struct ord_ent *y)
{
    if (x->has_key != y->has_key)
        return x->has_key ? -1 : 1;
    if (x->has_key && x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return strcmp(x->path, y->path);
}

/* Depth-first: a row after its ancestors, subtrees by their roots. */
static int by_tree(const void *pa, const void *pb)
{
    const struct ord_ent *x = *(const struct ord_ent *const *)pa;
    const struct ord_ent *y = *(const struct ord_ent *const *)pb;
    while (x->depth > y->depth) {
        x = x->up;
        if (x == y)
            return 1;
    }
    while (y->depth > x->depth) {
        y = y->up;
        if (x == y)
            return -1;
    }
    while (x->up != y->up) {
        x = x->up;
        y = y->up;
    }
    return x == y ? 0 : sibling_cmp(x, y);
}

/* Puts the rows in model order. @return 0 or -ENOMEM (order unchanged). */
static int sort_model(struct gt__agg *a)
{
    int rc = -ENOMEM;
    tree_resolve(a);
    struct ord_ent *e = gt__calloc(a->n, sizeof(*e));
    const struct ord_ent **pe = gt__calloc(a->n, sizeof(*pe));
    struct gt__agg_layer *nl = gt__malloc(a->n * sizeof(*nl));
    size_t *ix = by_depth(a);
    if (!e || !pe || !nl || !ix)
        goto out_free;
    for (size_t r = 0; r < a->n; r++) {
        const struct gt__agg_layer *l = &a->layers[r];
        long up = l->up;
        e[r] = (struct ord_ent){.row = r, .up = up >= 0 ? &e[up] : NULL,
                                .depth = l->depth, .path = l->path,
                                .has_key = l->first_fwd_ts >= 0,
                                .key = l->first_fwd_ts};
        pe[r] = &e[r];
    }
    for (size_t k = 0; k < a->n; k++) {
        const struct ord_ent *c = &e[ix[k]];
        struct ord_ent *p = (struct ord_ent *)c->up;
        if (p && c->has_key && a->layers[p->row].fwd_calls == 0 &&
            (!p->has_key || c->key < p->key)) {
            p->has_key = 1;
            p->key = c->key;
        }
    }
    qsort(pe, a->n, sizeof(*pe), by_tree);
    for (size_t k = 0; k < a->n; k++)
        nl[k] = a->layers[pe[k]->row];
    memcpy(a->layers, nl, a->n * sizeof(*nl));
    rc = 0;
out_free:
    gt__free(e);
    gt__free(pe);
    gt__free(nl);
    gt__free(ix);
    return rc;
}

void gt__agg_sort(struct gt__agg *a, enum gt__agg_order order)
{
    static int (*const cmp[])(const void *, const void *) = {
        [GT__AGG_FWD] = by_fwd,
        [GT__AGG_BWD] = by_bwd,
        [GT__AGG_NAME] = by_name,
    };
    if (a->n == 0 || (unsigned)order > GT__AGG_NAME)
        return;
    if (order == GT__AGG_MODEL)
        (void)sort_model(a);
    else
        qsort(a->layers, a->n, sizeof(*a->layers), cmp[order]);
    /* Rows moved: the index is rebuilt by the next lookup. */
    gt__free(a->slots);
    a->slots = NULL;
    a->nslots = 0;
    tree_resolve(a); /* rows moved: up again by index */
    a->tree_dirty = 1; /* and gt__agg_tree's order with them */
}

/* ------------------------------------------------------------ ranks */

const struct gt__agg_layer *gt__agg_find(struct gt__agg *a, const char *path)
{
    long r = row_find(a, path, strlen(path));
    return r >= 0 ? &a->layers[r] : NULL;
}

/* A rank's row q: its median per-iteration fwd + rc + bwd, or -1 when it
 * has no per-iteration values (a container, no iterations). */
static double rank_median(const struct gt__agg_layer *q)
{
    if (!q || q->container || !q->it || q->it->st[GT__AGG_ST_ALL].n == 0)
        return -1;
    return gt__agg_quantile(&q->it->st[GT__AGG_ST_ALL], 0.5);
}

/* Whether every rank's row of path has a median (see rank_median). */
static int ranks_have_medians(struct gt__agg *ranks, size_t n, const char *path)
{
    for (size_t k = 0; k < n; k++)
        if (rank_median(gt__agg_find(&ranks[k], path)) < 0)
            return 0;
    return 1;
}

void gt__agg_rank_summary(struct gt__agg *all, struct gt__agg *ranks, size_t n)
{
    all->nranks = (uint32_t)n;
    for (size_t i = 0; i < all->n && n > 1; i++) {
        struct gt__agg_layer *l = &all->layers[i];
        double sum = 0;
        l->slow_rank = -1;
        l->slow_us = 0;
        l->rank_median = ranks_have_medians(ranks, n, l->path);
        for (size_t k = 0; k < n; k++) {
            const struct gt__agg_layer *q = gt__agg_find(&ranks[k], l->path);
            double t = l->rank_median ? rank_median(q)
                       : q ? q->fwd_us + q->rc_us + q->bwd_us : 0;
            sum += t;
            if (l->slow_rank < 0 || t > l->slow_us) {
                l->slow_rank = ranks[k].rank;
                l->slow_us = t;
            }
        }
        l->rank_mean_us = sum / (double)n;
    }
}
