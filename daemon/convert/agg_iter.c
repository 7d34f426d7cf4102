/*
 * Per-iteration values of the per-layer table (agg.h): which iteration
 * (ProfilerStep#N span) each layer span belongs to, the statistics over
 * iterations (mean, standard deviation, p50/p95), and the sums over an
 * --iterations selection.
 *
 * Why spans wait: the converter emits a layer span when it ends (forward,
 * recompute) or when its pass group ends (backward: when the next forward
 * has started), and an iteration span when its boundary is seen (held
 * back one boundary for pass-based iterations). So a span may arrive
 * before its iteration is known, or just after it closed. Each layer keeps
 * the spans not yet in an iteration (at most GT__AGG_PENDING; more are
 * folded into the newest) and the values of the last closed iteration,
 * which late spans inside that iteration's time still add to; those are
 * committed to the statistics when the next iteration closes or at
 * gt__agg_finish. A span that starts before an older iteration's end is
 * counted in the rows but in no iteration (struct gt__agg.late).
 *
 * Memory is bounded by the number of layers: per layer a fixed pending
 * array, running sums and a reservoir of GT__AGG_RESERVOIR values per
 * statistic. Mean and standard deviation are exact; p50/p95 are exact up
 * to GT__AGG_RESERVOIR iterations and beyond that come from a uniform
 * sample of that many iterations (Vitter's algorithm R, seeded with a
 * constant so that a report is reproducible).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "daemon/convert/agg.h"

static void vals_add(struct gt__agg_vals *d, const struct gt__agg_vals *v)
{
    d->fwd_calls += v->fwd_calls;
    d->fwd_us += v->fwd_us;
    d->rc_calls += v->rc_calls;
    d->rc_us += v->rc_us;
    d->bwd_spans += v->bwd_spans;
    d->bwd_us += v->bwd_us;
    d->self_us += v->self_us;
    d->accg_us += v->accg_us;
    d->comm_us += v->comm_us;
    d->fwd_comm_us += v->fwd_comm_us;
    d->nodes += v->nodes;
    d->self_nodes += v->self_nodes;
    d->order2 += v->order2;
}

static uint64_t rng_next(struct gt__agg *a)
{
    /* xorshift64; the state starts at a constant (never 0). */
    uint64_t x = a->rng ? a->rng : 0x9e3779b97f4a7c15ull;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    a->rng = x;
    return x;
}

static void stat_push(struct gt__agg *a, struct gt__agg_stat *s, double x)
{
    s->n++;
    s->sum += x;
    s->sumsq += x * x;
    if (s->n <= GT__AGG_RESERVOIR) {
        s->res[s->n - 1] = x;
    } else {
        uint64_t j = rng_next(a) % s->n;
        if (j < GT__AGG_RESERVOIR)
            s->res[j] = x;
    }
}

static int cmp_u64(const void *pa, const void *pb)
{
    uint64_t x = *(const uint64_t *)pa, y = *(const uint64_t *)pb;
    return x < y ? -1 : x > y ? 1 : 0;
}

static int in_range(const struct gt__agg *a, uint64_t step)
{
    return !a->select || (step >= a->sel_lo && step <= a->sel_hi);
}

static int in_skip(const struct gt__agg *a, uint64_t step)
{
    return a->nskip && bsearch(&step, a->skip, a->nskip, sizeof(*a->skip),
                               cmp_u64) != NULL;
}

int gt__agg_selected(const struct gt__agg *a, uint64_t step)
{
    return in_range(a, step) && !in_skip(a, step);
}

static int in_selection(const struct gt__agg *a, uint64_t step)
{
    return gt__agg_selected(a, step);
}

/* The held iteration's forward and recompute as the row shows them: its
 * own when it was called (recomputed) itself in that iteration, else its
 * children's (a container, like its totals in gt__agg_finish). */
static double incl_fwd(const struct gt__agg_iters *it)
{
    return it->held.fwd_calls > 0 ? it->held.fwd_us : it->kid_fwd;
}

static double incl_rc(const struct gt__agg_iters *it)
{
    return it->held.rc_calls > 0 ? it->held.rc_us : it->kid_rc;
}

/* The held iteration's values into the statistics and the selection. */
static void held_commit(struct gt__agg *a, struct gt__agg_iters *it)
{
    const struct gt__agg_vals *v = &it->held;
    double f = incl_fwd(it), r = incl_rc(it);
    int set = it->held_set || it->kid_set;
    uint64_t step = it->held_set ? it->held_step : a->it_step;

    it->kid_set = 0;
    it->kid_fwd = it->kid_rc = 0;
    if (!set)
        return;
    if (in_selection(a, step)) {
        stat_push(a, &it->st[GT__AGG_ST_FWD], f);
        stat_push(a, &it->st[GT__AGG_ST_BWD], v->bwd_us);
        stat_push(a, &it->st[GT__AGG_ST_RC], r);
        stat_push(a, &it->st[GT__AGG_ST_ALL], f + v->bwd_us + r);
        vals_add(&it->sel, v);
        it->sel_iters++;
    }
    it->held_set = 0;
    memset(&it->held, 0, sizeof(it->held));
}

/* Every row's held iteration committed, children's forward and recompute
 * reaching their parents first (deepest rows first). Without memory for
 * the order, rows keep their own values. */
static void held_commit_all(struct gt__agg *a)
{
    const size_t *ix = gt__agg_tree(a);

    for (size_t k = 0; ix && k < a->n; k++) {
        const struct gt__agg_layer *l = &a->layers[ix[k]];
        struct gt__agg_layer *p = l->up >= 0 ? &a->layers[l->up] : NULL;
        const struct gt__agg_iters *it = l->it;
        if (!p || !it || !(it->held_set || it->kid_set))
            continue;
        if (!p->it && !(p->it = gt__calloc(1, sizeof(*p->it))))
            continue;
        p->it->kid_fwd += incl_fwd(it);
        p->it->kid_rc += incl_rc(it);
        p->it->kid_set = 1;
    }
    for (size_t r = 0; r < a->n; r++)
        if (a->layers[r].it)
            held_commit(a, a->layers[r].it);
    if (a->rest_it)
        held_commit(a, a->rest_it);
}

/* Moves the pending spans that started before end into the held values
 * of iteration step. */
static void pending_close(struct gt__agg_iters *it, uint64_t step, double end)
{
    unsigned k = 0;
    for (unsigned i = 0; i < it->npend; i++) {
        if (it->pend[i].ts < end) {
            vals_add(&it->held, &it->pend[i].v);
            it->held_set = 1;
            it->held_step = step;
        } else {
            it->pend[k++] = it->pend[i];
        }
    }
    it->npend = k;
}

int gt__agg_iter_span(struct gt__agg *a, struct gt__agg_iters **itp, double ts,
                      const struct gt__agg_vals *v)
{
    struct gt__agg_iters *it = *itp;
    if (!it && !(it = *itp = gt__calloc(1, sizeof(*it))))
        return -ENOMEM;
    if (a->have_it && ts < a->it_e) {
        /* Its iteration has closed: the last one, or an older one. */
        if (ts < a->it_s || (it->held_set && it->held_step != a->it_step)) {
            a->late++;
            return 0;
        }
        vals_add(&it->held, v);
        it->held_set = 1;
        it->held_step = a->it_step;
        return 0;
    }
    if (it->npend == GT__AGG_PENDING) {
        /* Full: the newest absorbs it (both are after the last boundary). */
        vals_add(&it->pend[GT__AGG_PENDING - 1].v, v);
        return 0;
    }
    it->pend[it->npend++] = (struct gt__agg_pend){.ts = ts, .v = *v};
    return 0;
}

/* Appends iteration step to the log. @return 0 or -ENOMEM. */
static int log_iteration(struct gt__agg *a, uint64_t step, double ts,
                         double dur)
{
    if (a->nits == a->its_cap) {
        size_t cap = a->its_cap ? 2 * a->its_cap : 64;
        struct gt__agg_it *n = gt__realloc(a->its, cap * sizeof(*n));
        if (!n)
            return -ENOMEM;
        a->its = n;
        a->its_cap = cap;
    }
    a->its[a->nits++] = (struct gt__agg_it){.step = step, .ts = ts, .dur = dur};
    return 0;
}

void gt__agg_iteration(struct gt__agg *a, double dur)
{
    a->steps++;
    a->step_us += dur;
}

int gt__agg_step(struct gt__agg *a, uint64_t step, double ts, double dur)
{
    double end = ts + (dur > 0 ? dur : 0);
    if (a->log_its && log_iteration(a, step, ts, dur) < 0)
        return -ENOMEM;
    gt__agg_iteration(a, dur);
    if (in_selection(a, step)) {
        stat_push(a, &a->step_st, dur);
        a->sel_steps++;
        a->sel_step_us += dur;
    } else if (in_range(a, step)) {
        a->skipped++;
        a->skipped_us += dur;
    }
    held_commit_all(a);
    for (size_t r = 0; r <= a->n; r++) {
        struct gt__agg_iters *it = r < a->n ? a->layers[r].it : a->rest_it;
        if (it)
            pending_close(it, step, end);
    }
    a->have_it = 1;
    a->it_step = step;
    a->it_s = ts;
    a->it_e = end;
    return 0;
}

void gt__agg_select(struct gt__agg *a, uint64_t lo, uint64_t hi)
{
    a->select = 1;
    a->sel_lo = lo;
    a->sel_hi = hi;
}

int gt__agg_skip(struct gt__agg *a, const uint64_t *steps, size_t n)
{
    uint64_t *d = n ? gt__malloc(n * sizeof(*d)) : NULL;
    if (n && !d)
        return -ENOMEM;
    if (n)
        memcpy(d, steps, n * sizeof(*d));
    qsort(d, n, sizeof(*d), cmp_u64);
    size_t u = 0; /* one entry per step: ranks name the same ones */
    for (size_t i = 0; i < n; i++)
        if (u == 0 || d[u - 1] != d[i])
            d[u++] = d[i];
    gt__free(a->skip);
    a->skip = d;
    a->nskip = u;
    return 0;
}

void gt__agg_log_iterations(struct gt__agg *a)
{
    a->log_its = 1;
}

void gt__agg_plan(struct gt__agg *a, const struct gt__agg_it *its, size_t n)
{
    a->plan = its;
    a->nplan = n;
}

int gt__agg_ts_selected(const struct gt__agg *a, double ts)
{
    if ((!a->select && !a->nskip) || !a->plan)
        return 1;
    /* A span belongs to the first iteration that ends after its start
     * (gt__agg_step's rule); iterations close in order of their ends. */
    size_t lo = 0, hi = a->nplan;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct gt__agg_it *it = &a->plan[mid];
        if (it->ts + (it->dur > 0 ? it->dur : 0) > ts)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo < a->nplan && in_selection(a, a->plan[lo].step);
}

void gt__agg_lost(struct gt__agg *a, uint64_t events, uint64_t chunks,
                  uint64_t corrupt, int truncated)
{
    a->lost_events += events;
    a->lost_chunks += chunks;
    a->corrupt_chunks += corrupt;
    a->truncated += truncated ? 1 : 0;
}

/* A row's numbers become those of the selected iterations only. */
static void row_select(struct gt__agg_layer *l)
{
    struct gt__agg_vals z = {0};
    const struct gt__agg_vals *v = l->it ? &l->it->sel : &z;
    l->fwd_calls = (uint64_t)v->fwd_calls;
    l->fwd_us = v->fwd_us;
    l->rc_calls = (uint64_t)v->rc_calls;
    l->rc_us = v->rc_us;
    l->bwd_spans = (uint64_t)v->bwd_spans;
    l->bwd_us = v->bwd_us;
    l->bwd_self_us = v->self_us;
    l->accg_us = v->accg_us;
    l->comm_us = v->comm_us;
    l->fwd_comm_us = v->fwd_comm_us;
    l->bwd_nodes = (uint64_t)v->nodes;
    l->bwd_self_nodes = (uint64_t)v->self_nodes;
    l->order2 = (uint64_t)v->order2;
    l->bwd_wall_us = 0;
    if (l->fwd_calls == 0)
        l->first_fwd_ts = -1;
}

/* The remainder of the selected iterations (gt__agg_totals_at's map). */
static void rest_select(struct gt__agg *a)
{
    struct gt__agg_vals z = {0};
    const struct gt__agg_vals *v = a->rest_it ? &a->rest_it->sel : &z;
    a->rest.groups = (uint64_t)v->bwd_spans;
    a->rest.nodes = (uint64_t)v->fwd_calls;
    a->rest.un_nodes = (uint64_t)v->nodes;
    a->rest.un_us = v->bwd_us;
    a->rest.time_us = v->self_us;
    a->rest.un_accg = (uint64_t)v->rc_calls;
    a->rest.order2 = (uint64_t)v->rc_us;
    a->rest.comm_us = v->comm_us;
}

void gt__agg_iter_finish(struct gt__agg *a)
{
    if (a->iter_closed)
        return;
    a->iter_closed = 1;
    held_commit_all(a);
    if (!a->select && !a->nskip)
        return;
    for (size_t r = 0; r < a->n; r++)
        row_select(&a->layers[r]);
    rest_select(a);
    a->steps = a->sel_steps;
    a->step_us = a->sel_step_us;
}

static int cmp_double(const void *pa, const void *pb)
{
    double x = *(const double *)pa, y = *(const double *)pb;
    return x < y ? -1 : x > y ? 1 : 0;
}

double gt__agg_quantile(const struct gt__agg_stat *s, double p)
{
    double v[GT__AGG_RESERVOIR];
    size_t n = s->n < GT__AGG_RESERVOIR ? (size_t)s->n : GT__AGG_RESERVOIR;
    if (n == 0)
        return -1;
    memcpy(v, s->res, n * sizeof(*v));
    qsort(v, n, sizeof(*v), cmp_double);
    /* Nearest rank: the smallest value with at least p of them at or below. */
    size_t k = (size_t)ceil(p * (double)n);
    return v[k ? k - 1 : 0];
}

double gt__agg_mean(const struct gt__agg_stat *s)
{
    return s->n ? s->sum / (double)s->n : 0;
}

double gt__agg_stddev(const struct gt__agg_stat *s)
{
    if (s->n < 2)
        return 0;
    double m = s->sum / (double)s->n;
    double var = (s->sumsq - (double)s->n * m * m) / (double)(s->n - 1);
    return var > 0 ? sqrt(var) : 0;
}

/* ------------------------------------------------------------ merge */

/* Statistics of two sets of iterations as one: sums exact, the reservoir
 * a sample of both in proportion to their counts. */
static void stat_merge(struct gt__agg *a, struct gt__agg_stat *d,
                       const struct gt__agg_stat *s)
{
    uint64_t dn = d->n, sn = s->n;
    size_t dk = dn < GT__AGG_RESERVOIR ? (size_t)dn : GT__AGG_RESERVOIR;
    size_t sk = sn < GT__AGG_RESERVOIR ? (size_t)sn : GT__AGG_RESERVOIR;
    if (sn == 0)
        return;
    if (dn + sn <= GT__AGG_RESERVOIR) {
        memcpy(d->res + dn, s->res, sn * sizeof(*s->res));
    } else {
        double res[GT__AGG_RESERVOIR];
        for (size_t k = 0; k < GT__AGG_RESERVOIR; k++)
            res[k] = dk && rng_next(a) % (dn + sn) < dn ? d->res[k % dk]
                                                        : s->res[k % sk];
        memcpy(d->res, res, sizeof(res));
    }
    d->n += sn;
    d->sum += s->sum;
    d->sumsq += s->sumsq;
}

int gt__agg_iter_merge(struct gt__agg *a, struct gt__agg_layer *d,
                       const struct gt__agg_layer *s)
{
    if (!s->it)
        return 0;
    if (!d->it && !(d->it = gt__calloc(1, sizeof(*d->it))))
        return -ENOMEM;
    for (int k = 0; k < GT__AGG_NST; k++)
        stat_merge(a, &d->it->st[k], &s->it->st[k]);
    vals_add(&d->it->sel, &s->it->sel);
    d->it->sel_iters += s->it->sel_iters;
    return 0;
}

void gt__agg_steps_merge(struct gt__agg *a, const struct gt__agg *s)
{
    stat_merge(a, &a->step_st, &s->step_st);
    a->steps += s->steps;
    a->step_us += s->step_us;
    a->late += s->late;
    a->skipped += s->skipped;
    a->skipped_us += s->skipped_us;
    a->compiled_spans += s->compiled_spans;
    a->compiled_us += s->compiled_us;
    for (int p = 0; p < 2; p++) {
        a->compiled[p].regions += s->compiled[p].regions;
        for (int i = 0; i < 5; i++)
            a->compiled[p].us[i] += s->compiled[p].us[i];
    }
    a->gpu_kernels += s->gpu_kernels;
    gt__agg_lost(a, s->lost_events, s->lost_chunks, s->corrupt_chunks, 0);
    a->truncated += s->truncated;
}
