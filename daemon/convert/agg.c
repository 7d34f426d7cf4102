/*
 * Per-layer aggregation (agg.h): the table. What fills it from a
 * recording is the aggregation emitter (agg_emit.c); from trace files,
 * the report's reader (cli/report.c).
 *
 * Rows, their index by path, the module tree and the orders are
 * agg_tree.c's; the per-iteration statistics agg_iter.c's.
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
    gt__index_free(&a->ix);
    gt__free(a->rest_it);
    gt__free(a->tree_ix);
    gt__free(a->skip);
    gt__free(a->its);
    memset(a, 0, sizeof(*a));
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
    /* A compiled region's forward span says its kernels' time (time_us):
     * its extent may hold other layers' kernels. */
    double t = ev->timed && ev->time_us >= 0 ? ev->time_us : ev->dur;
    if (ev->phase == GT__AGG_PH_FWD) {
        double cm = ev->comm_us > 0 ? (ev->comm_us < t ? ev->comm_us : t) : 0;
        v.fwd_calls = 1;
        v.fwd_us = t - cm;
        v.fwd_comm_us = cm;
    } else if (ev->phase == GT__AGG_PH_RECOMPUTE) {
        v.rc_calls = 1;
        v.rc_us = t;
    } else {
        v.bwd_spans = 1;
        v.bwd_us = ev->time_us >= 0 ? ev->time_us : ev->dur;
        v.self_us = ev->self_us > 0 ? ev->self_us : 0;
        v.accg_us = ev->accg_us > 0 ? ev->accg_us : 0;
        v.comm_us = ev->comm_us > 0 ? ev->comm_us : 0;
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
    if (ev->comm_us > 0)
        l->comm_us += ev->comm_us;
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
    if (!(l = gt__agg_row_get(a, ev->name, path_len)))
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
        double t = ev->timed && ev->time_us >= 0 ? ev->time_us : ev->dur;
        double cm = ev->comm_us > 0 ? (ev->comm_us < t ? ev->comm_us : t) : 0;
        l->fwd_calls++;
        l->fwd_us += t - cm;
        l->fwd_comm_us += cm;
    } else if (ev->phase == GT__AGG_PH_RECOMPUTE) {
        l->rc_calls++;
        l->rc_us += ev->timed && ev->time_us >= 0 ? ev->time_us : ev->dur;
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
    if (!(l = gt__agg_row_get(a, path, strlen(path))))
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

void gt__agg_compiled(struct gt__agg *a, int bwd, const double us[5],
                      double ts)
{
    if (!gt__agg_ts_selected(a, ts))
        return;
    struct gt__agg_compiled *c = &a->compiled[bwd ? 1 : 0];
    c->regions++;
    for (int i = 0; i < 5; i++)
        c->us[i] += us[i] > 0 ? us[i] : 0;
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
    a->rest.comm_us += t->comm_us;
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
        .rc_us = (double)t->order2, .comm_us = t->comm_us};
    gt__agg_totals(a, t);
    return gt__agg_iter_span(a, &a->rest_it, ts, &v);
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
    d->comm_us += s->comm_us;
    d->fwd_comm_us += s->fwd_comm_us;
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
        struct gt__agg_layer *r = gt__agg_row_get(d, l->path, strlen(l->path));
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

void gt__agg_finish(struct gt__agg *a)
{
    if (a->finished)
        return;
    a->finished = 1;
    gt__agg_iter_finish(a);
    const size_t *ix = gt__agg_tree(a);
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
        if (p->container) {
            p->fwd_us += l->fwd_us;
            p->fwd_comm_us += l->fwd_comm_us;
        }
        if (p->rc_calls == 0)
            p->rc_us += l->rc_us;
    }
}

/* ------------------------------------------------------------ ranks */

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
