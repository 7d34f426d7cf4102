/*
 * Per-iteration values of the per-layer table (daemon/convert/agg_iter.c):
 * spans find their iteration whether they arrive before its boundary
 * (forward) or just after it (backward, emitted when the pass group ends),
 * statistics are exact for few iterations, an --iterations selection sums
 * only its iterations, and memory stays per layer.
 */
#include <criterion/criterion.h>
#include <math.h>

#include "daemon/convert/agg.h"

static void span(struct gt__agg *a, enum gt__agg_phase ph, double ts,
                 double dur)
{
    struct gt__agg_ev ev = {.phase = ph, .name = ph == GT__AGG_PH_FWD
                                                     ? "m (Linear) forward"
                                                     : "m (Linear) backward",
                            .ts = ts, .dur = dur, .time_us = dur, .nodes = 2};
    cr_assert_eq(gt__agg_add(a, &ev), 0);
}

/* Iteration k over [100k, 100k + 100): forward 10(k+1) us inside it, its
 * backward 5 us arriving after the iteration span, as the converter
 * emits them. */
static void run(struct gt__agg *a, int iters)
{
    for (int k = 0; k < iters; k++) {
        span(a, GT__AGG_PH_FWD, 100.0 * k + 1, 10.0 * (k + 1));
        cr_assert_eq(gt__agg_step(a, (uint64_t)k + 1, 100.0 * k, 100), 0);
        span(a, GT__AGG_PH_BWD, 100.0 * k + 50, 5);
    }
    gt__agg_finish(a);
}

Test(agg_iter, late_backward_joins_its_iteration)
{
    struct gt__agg a;
    gt__agg_init(&a);
    run(&a, 3);
    const struct gt__agg_iters *it = a.layers[0].it;
    cr_assert_not_null(it);
    cr_assert_eq(it->st[GT__AGG_ST_FWD].n, 3);
    cr_assert_eq(it->st[GT__AGG_ST_BWD].n, 3);
    cr_assert_float_eq(gt__agg_mean(&it->st[GT__AGG_ST_FWD]), 20.0, 1e-9);
    cr_assert_float_eq(gt__agg_mean(&it->st[GT__AGG_ST_BWD]), 5.0, 1e-9);
    cr_assert_float_eq(gt__agg_quantile(&it->st[GT__AGG_ST_ALL], 0.5), 25.0, 1e-9);
    cr_assert_float_eq(gt__agg_quantile(&it->st[GT__AGG_ST_ALL], 0.95), 35.0, 1e-9);
    cr_assert_float_eq(gt__agg_stddev(&it->st[GT__AGG_ST_FWD]), 10.0, 1e-9);
    cr_assert_eq(a.late, 0);
    cr_assert_eq(a.steps, 3);
    gt__agg_close(&a);
}

Test(agg_iter, selection_sums_only_its_iterations)
{
    struct gt__agg a;
    gt__agg_init(&a);
    gt__agg_select(&a, 2, 3);
    run(&a, 4);
    const struct gt__agg_layer *l = &a.layers[0];
    cr_assert_eq(l->fwd_calls, 2);
    cr_assert_float_eq(l->fwd_us, 20.0 + 30.0, 1e-9);
    cr_assert_eq(l->bwd_spans, 2);
    cr_assert_float_eq(l->bwd_us, 10.0, 1e-9);
    cr_assert_eq(a.steps, 2);
    cr_assert_float_eq(a.step_us, 200.0, 1e-9);
    gt__agg_close(&a);
}

/* The unattributed remainder follows the selection too, so that the rows
 * and it still add up to the selected steps: group k (ending after its
 * iteration span, as the converter emits it) has k + 1 unattributed nodes
 * of 3 us each. */
Test(agg_iter, selection_narrows_the_unattributed_remainder)
{
    struct gt__agg a;
    gt__agg_init(&a);
    gt__agg_select(&a, 2, 3);
    for (int k = 0; k < 4; k++) {
        struct gt__agg_rest t = {.nodes = 10, .un_nodes = (uint64_t)k + 1,
                                 .un_us = 3.0 * (k + 1), .time_us = 40,
                                 .un_accg = 1, .order2 = (uint64_t)k};
        span(&a, GT__AGG_PH_FWD, 100.0 * k + 1, 10);
        cr_assert_eq(gt__agg_step(&a, (uint64_t)k + 1, 100.0 * k, 100), 0);
        cr_assert_eq(gt__agg_totals_at(&a, &t, 100.0 * k + 60), 0);
    }
    gt__agg_finish(&a);
    cr_assert_eq(a.rest.groups, 2);
    cr_assert_eq(a.rest.nodes, 20);
    cr_assert_eq(a.rest.un_nodes, 2 + 3);
    cr_assert_float_eq(a.rest.un_us, 6.0 + 9.0, 1e-9);
    cr_assert_float_eq(a.rest.time_us, 80.0, 1e-9);
    cr_assert_eq(a.rest.un_accg, 2);
    cr_assert_eq(a.rest.order2, 1 + 2);
    gt__agg_close(&a);
}

/* Without a selection the remainder is every group's. */
Test(agg_iter, without_selection_the_remainder_is_every_group)
{
    struct gt__agg a;
    gt__agg_init(&a);
    for (int k = 0; k < 3; k++) {
        struct gt__agg_rest t = {.un_nodes = 1, .un_us = 2};
        cr_assert_eq(gt__agg_step(&a, (uint64_t)k + 1, 100.0 * k, 100), 0);
        cr_assert_eq(gt__agg_totals_at(&a, &t, 100.0 * k + 60), 0);
    }
    gt__agg_finish(&a);
    cr_assert_eq(a.rest.groups, 3);
    cr_assert_float_eq(a.rest.un_us, 6.0, 1e-9);
    gt__agg_close(&a);
}

static void named(struct gt__agg *a, enum gt__agg_phase ph, const char *name,
                  double ts, double dur)
{
    struct gt__agg_ev ev = {.phase = ph, .name = name, .ts = ts, .dur = dur,
                            .time_us = dur, .nodes = 1};
    cr_assert_eq(gt__agg_add(a, &ev), 0);
}

/* A ModuleList never called itself: in each iteration its forward is its
 * children's, its recompute too; its statistics are those sums plus its
 * own backward span. Iteration k: children 1 + k and 2 us, a recompute of
 * one child 4 us, the container's backward 10 us. */
Test(agg_iter, a_container_has_statistics_from_its_children)
{
    struct gt__agg a;
    gt__agg_init(&a);
    for (int k = 0; k < 3; k++) {
        double t = 100.0 * k;
        named(&a, GT__AGG_PH_FWD, "blocks.0 (Linear) forward", t + 1, 1 + k);
        named(&a, GT__AGG_PH_FWD, "blocks.1 (Linear) forward", t + 5, 2);
        named(&a, GT__AGG_PH_RECOMPUTE, "blocks.1 (Linear) recompute", t + 40, 4);
        cr_assert_eq(gt__agg_step(&a, (uint64_t)k, t, 100), 0);
        named(&a, GT__AGG_PH_BWD, "blocks (ModuleList) backward", t + 50, 10);
    }
    gt__agg_finish(&a);
    const struct gt__agg_layer *c = gt__agg_find(&a, "blocks");
    cr_assert_not_null(c);
    cr_assert(c->container);
    cr_assert_float_eq(c->fwd_us, 3 * 3.0 + 0 + 1 + 2, 1e-9, "children's sum");
    const struct gt__agg_stat *f = &c->it->st[GT__AGG_ST_FWD];
    const struct gt__agg_stat *all = &c->it->st[GT__AGG_ST_ALL];
    cr_assert_eq(f->n, 3);
    cr_assert_float_eq(gt__agg_quantile(f, 0.5), 4.0, 1e-9, "iteration 1: 2 + 2");
    cr_assert_float_eq(gt__agg_mean(&c->it->st[GT__AGG_ST_RC]), 4.0, 1e-9);
    cr_assert_float_eq(gt__agg_quantile(all, 0.95), 5.0 + 4 + 10, 1e-9);
    cr_assert_float_eq(gt__agg_mean(&gt__agg_find(&a, "blocks.1")->it->st[GT__AGG_ST_FWD]),
                       2.0, 1e-9, "a called row keeps its own");
    gt__agg_close(&a);
}

Test(agg_iter, spans_after_the_last_boundary_are_in_no_iteration)
{
    struct gt__agg a;
    gt__agg_init(&a);
    span(&a, GT__AGG_PH_FWD, 1, 10);
    cr_assert_eq(gt__agg_step(&a, 1, 0, 100), 0);
    span(&a, GT__AGG_PH_FWD, 150, 99);
    gt__agg_finish(&a);
    const struct gt__agg_layer *l = &a.layers[0];
    cr_assert_eq(l->fwd_calls, 2, "the rows count every span");
    cr_assert_eq(l->it->st[GT__AGG_ST_FWD].n, 1);
    cr_assert_float_eq(l->it->st[GT__AGG_ST_FWD].sum, 10.0, 1e-9);
    gt__agg_close(&a);
}

Test(agg_iter, quantiles_stay_bounded_past_the_reservoir)
{
    struct gt__agg a;
    gt__agg_init(&a);
    run(&a, 1000);
    const struct gt__agg_stat *s = &a.layers[0].it->st[GT__AGG_ST_FWD];
    cr_assert_eq(s->n, 1000);
    cr_assert_float_eq(gt__agg_mean(s), 10.0 * 1001 / 2, 1e-6);
    /* A sample of 64 of the values 10..10000: its median is near 5000. */
    double p50 = gt__agg_quantile(s, 0.5);
    cr_assert(p50 > 2500 && p50 < 7500, "p50 %f", p50);
    gt__agg_close(&a);
}
