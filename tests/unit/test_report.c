/*
 * The report's hints (daemon/cli/hints.c), each on a table built to show
 * it and on one built not to; diff's verdict rule (diff.c); and the SVG
 * writer's structure (report_svg.c): one track per row shown, a scale,
 * nothing external.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/cli/report.h"

struct span_spec {
    enum gt__agg_phase ph;
    const char *name;
    double dur, time_us, self_us, accg_us;
};

/* A table of one iteration of 100 ms holding the given spans. */
static void table(struct gt__agg *a, const struct span_spec *s, size_t n)
{
    gt__agg_init(a);
    for (size_t i = 0; i < n; i++) {
        struct gt__agg_ev ev = {.phase = s[i].ph, .name = s[i].name, .ts = 1,
                                .dur = s[i].dur, .time_us = s[i].time_us,
                                .self_us = s[i].self_us, .accg_us = s[i].accg_us,
                                .nodes = 1, .self_nodes = 1};
        cr_assert_eq(gt__agg_add(a, &ev), 0);
    }
    cr_assert_eq(gt__agg_step(a, 0, 0, 100000), 0);
    gt__agg_finish(a);
    gt__agg_sort(a, GT__AGG_MODEL);
}

/* How many hints of kind name layer. */
static int count(const struct gt__agg *a, const char *kind, const char *layer)
{
    struct gt__hint h[GT__MAX_HINTS];
    size_t n = gt__hints_find(a, h, GT__MAX_HINTS);
    int k = 0;
    for (size_t i = 0; i < n; i++)
        if (strcmp(h[i].kind, kind) == 0 && strcmp(h[i].layer, layer) == 0)
            k++;
    return k;
}

#define FWD(n, d) {GT__AGG_PH_FWD, n " forward", d, 0, 0, 0}
#define BWD(n, t, self, accg) {GT__AGG_PH_BWD, n " backward", t, t, self, accg}
#define RC(n, d) {GT__AGG_PH_RECOMPUTE, n " recompute", d, 0, 0, 0}

Test(hints, backward_heavy_names_the_deepest_layer)
{
    struct gt__agg a;
    const struct span_spec s[] = {FWD("m (Net)", 5000), BWD("m (Net)", 40000, 0, 0),
                                  FWD("m.a (Linear)", 4000),
                                  BWD("m.a (Linear)", 40000, 40000, 0)};
    table(&a, s, 4);
    cr_assert_eq(count(&a, "bwd-heavy", "m.a"), 1);
    cr_assert_eq(count(&a, "bwd-heavy", "m"), 0, "its parent only includes it");
    gt__agg_close(&a);
}

Test(hints, no_backward_hint_for_balanced_or_tiny_layers)
{
    struct gt__agg a;
    const struct span_spec s[] = {FWD("m (Linear)", 20000), BWD("m (Linear)", 40000, 40000, 0),
                                  FWD("t (Linear)", 10), BWD("t (Linear)", 1000, 1000, 0)};
    table(&a, s, 4);
    cr_assert_eq(count(&a, "bwd-heavy", "m"), 0, "2x is not backward-heavy");
    cr_assert_eq(count(&a, "bwd-heavy", "t"), 0, "1%% of the step is no real share");
    gt__agg_close(&a);
}

Test(hints, accumulate_grad_dominating)
{
    struct gt__agg a;
    const struct span_spec yes[] = {FWD("e (Embedding)", 5000),
                                    BWD("e (Embedding)", 10000, 10000, 8000)};
    table(&a, yes, 2);
    cr_assert_eq(count(&a, "accumulate-grad", "e"), 1);
    gt__agg_close(&a);
    const struct span_spec no[] = {FWD("e (Embedding)", 5000),
                                   BWD("e (Embedding)", 10000, 10000, 2000)};
    table(&a, no, 2);
    cr_assert_eq(count(&a, "accumulate-grad", "e"), 0);
    gt__agg_close(&a);
}

Test(hints, recompute_costlier_than_its_forward)
{
    struct gt__agg a;
    const struct span_spec yes[] = {FWD("b (Block)", 5000), RC("b (Block)", 9000),
                                    BWD("b (Block)", 9000, 9000, 0)};
    table(&a, yes, 3);
    cr_assert_eq(count(&a, "recompute", "b"), 1);
    gt__agg_close(&a);
    const struct span_spec no[] = {FWD("b (Block)", 5000), RC("b (Block)", 5100),
                                   BWD("b (Block)", 9000, 9000, 0)};
    table(&a, no, 3);
    cr_assert_eq(count(&a, "recompute", "b"), 0);
    gt__agg_close(&a);
}

Test(hints, lost_input_says_numbers_are_lower_bounds)
{
    struct gt__agg a;
    const struct span_spec s[] = {FWD("m (Linear)", 20000), BWD("m (Linear)", 20000, 20000, 0)};
    table(&a, s, 2);
    cr_assert_eq(count(&a, "input", ""), 0);
    gt__agg_lost(&a, 12, 0, 0, 0);
    cr_assert_eq(count(&a, "input", ""), 1);
    gt__agg_close(&a);
}

Test(diff, verdict_needs_relative_noise_and_absolute_thresholds)
{
    const struct gt__diff_rule o = {.thr = 10, .sigma = 3, .min_ms = 0.1, .fail = -1};
    cr_assert_eq(gt__diff_verdict(&o, 5.0, 10.0, 0.1, 50), 1, "50%% slower, quiet");
    cr_assert_eq(gt__diff_verdict(&o, -5.0, 10.0, 0.1, 50), -1, "faster");
    cr_assert_eq(gt__diff_verdict(&o, 0.5, 10.0, 0.01, 50), 0, "5%% is under 10%%");
    cr_assert_eq(gt__diff_verdict(&o, 5.0, 10.0, 2.0, 50), 0, "within 3 standard errors");
    cr_assert_eq(gt__diff_verdict(&o, 0.05, 0.1, -1, 50), 0, "under the 0.1 ms floor");
    cr_assert_eq(gt__diff_verdict(&o, 0.4, 1.0, -1, 100), 0, "under 1%% of the step");
    cr_assert_eq(gt__diff_verdict(&o, 5.0, 10.0, -1, 50), 1, "no variance known");
}

Test(svg, one_track_per_row_shown_and_nothing_external, .timeout = 10)
{
    struct gt__agg a;
    const struct span_spec s[] = {FWD("m (Net)", 5000), BWD("m (Net)", 9000, 0, 0),
                                  FWD("m.a (Linear)", 4000), BWD("m.a (Linear)", 8000, 8000, 0),
                                  FWD("m.b<x> (Linear)", 1000)};
    table(&a, s, 5);
    char dir[] = "/tmp/gt-svg-XXXXXX", path[64];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/a.svg", dir);
    struct gt__rep_opts o = {.order = GT__AGG_MODEL, .depth = -1, .top = -1};
    cr_assert_eq(gt__report_write_svg(path, &a, &o), 0);
    FILE *f = fopen(path, "r");
    char buf[65536];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    int tracks = 0;
    for (const char *p = buf; (p = strstr(p, "fill=\"#eeeeee\"")); p++)
        tracks++;
    cr_assert_eq(tracks, 3);
    cr_assert_not_null(strstr(buf, "m.b&lt;x&gt;"), "labels are escaped");
    cr_assert_not_null(strstr(buf, "</svg>"));
    cr_assert_null(strstr(buf, "href"), "no external asset");
    o.depth = 0;
    cr_assert_eq(gt__report_write_svg(path, &a, &o), 0);
    f = fopen(path, "r");
    n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    tracks = 0;
    for (const char *p = buf; (p = strstr(p, "fill=\"#eeeeee\"")); p++)
        tracks++;
    cr_assert_eq(tracks, 1, "--depth 0: the root only");
    unlink(path);
    rmdir(dir);
    gt__agg_close(&a);
}

/* A table whose layer m's backward spans name their longest own node. */
static void top_table(struct gt__agg *a, double top_us, double self_us)
{
    gt__agg_init(a);
    struct gt__agg_ev f = {.phase = GT__AGG_PH_FWD, .name = "m (Attn) forward",
                           .ts = 1, .dur = 10000};
    struct gt__agg_ev b = {.phase = GT__AGG_PH_BWD, .name = "m (Attn) backward",
                           .ts = 2, .dur = self_us, .time_us = self_us,
                           .self_us = self_us, .nodes = 5, .self_nodes = 5,
                           .top_node = "BmmBackward0", .top_node_us = top_us};
    cr_assert_eq(gt__agg_add(a, &f), 0);
    cr_assert_eq(gt__agg_add(a, &b), 0);
    cr_assert_eq(gt__agg_step(a, 0, 0, 100000), 0);
    gt__agg_finish(a);
}

Test(hints, one_node_taking_most_of_a_backward_is_named)
{
    struct gt__agg a;
    top_table(&a, 18000, 20000);
    struct gt__hint h[GT__MAX_HINTS];
    size_t n = gt__hints_find(&a, h, GT__MAX_HINTS);
    cr_assert_eq(count(&a, "top-node", "m"), 1);
    int named = 0;
    for (size_t i = 0; i < n; i++)
        named |= strstr(h[i].text, "BmmBackward0") != NULL;
    cr_assert(named, "the hint names the node");
    gt__agg_close(&a);
    top_table(&a, 6000, 20000);
    cr_assert_eq(count(&a, "top-node", "m"), 0, "30%% is not most");
    gt__agg_close(&a);
}

/* Ranks 0 and 1 of one model, rank 1's m.b taking b1_us of backward. */
static void rank_tables(struct gt__agg *all, struct gt__agg rk[2], double b1_us)
{
    gt__agg_init(all);
    for (int k = 0; k < 2; k++) {
        const struct span_spec s[] = {FWD("m (Net)", 10000),
                                      BWD("m (Net)", k ? 20000 + b1_us : 30000, 0, 0),
                                      FWD("m.a (Linear)", 4000),
                                      BWD("m.a (Linear)", 10000, 10000, 0),
                                      FWD("m.b (Linear)", 4000),
                                      BWD("m.b (Linear)", k ? b1_us : 10000, 10000, 0)};
        table(&rk[k], s, 6);
        rk[k].rank = k;
        struct gt__agg t;
        table(&t, s, 6);
        t.finished = 0; /* merged as an unfinished table, as report does */
        cr_assert_eq(gt__agg_merge(all, &t), 0);
        gt__agg_close(&t);
    }
    gt__agg_finish(all);
    gt__agg_rank_summary(all, rk, 2);
}

Test(hints, one_rank_slower_names_the_layer_and_rank)
{
    struct gt__agg all, rk[2];
    rank_tables(&all, rk, 40000);
    cr_assert_eq(count(&all, "rank", "m.b"), 1);
    cr_assert_eq(count(&all, "rank", "m"), 0, "its parent only includes it");
    cr_assert_eq(count(&all, "rank", "m.a"), 0);
    const struct gt__agg_layer *b = gt__agg_find(&all, "m.b");
    cr_assert_eq(b->slow_rank, 1);
    cr_assert_eq(b->fwd_calls, 2, "rows sum the ranks");
    for (int k = 0; k < 2; k++)
        gt__agg_close(&rk[k]);
    gt__agg_close(&all);
    rank_tables(&all, rk, 10500);
    cr_assert_eq(count(&all, "rank", "m.b"), 0, "5%% apart is no imbalance");
    for (int k = 0; k < 2; k++)
        gt__agg_close(&rk[k]);
    gt__agg_close(&all);
}

/* Layer m with backward kernels: big_us of "wgrad_gemm", 1000 us of
 * "bias_reduce", and layer n with 10000 us of forward kernels. */
static void kernel_table(struct gt__agg *a, double big_us)
{
    const struct span_spec s[] = {FWD("m (Linear)", 5000), BWD("m (Linear)", 9000, 9000, 0),
                                  FWD("n (Linear)", 5000)};
    table(a, s, 3);
    cr_assert_eq(gt__agg_kernel(a, "m", 1, big_us / 2, "wgrad_gemm<float, 2>"), 0);
    cr_assert_eq(gt__agg_kernel(a, "m", 1, big_us / 2, "wgrad_gemm<float, 2>"), 0);
    cr_assert_eq(gt__agg_kernel(a, "m", 1, 1000, "bias_reduce"), 0);
    cr_assert_eq(gt__agg_kernel(a, "n", 0, 10000, "fwd_gemm"), 0);
}

Test(hints, one_kernel_taking_most_of_a_gpu_backward_is_named)
{
    struct gt__agg a;
    kernel_table(&a, 8000);
    cr_assert_eq(count(&a, "top-kernel", "m"), 1);
    const struct gt__agg_layer *m = gt__agg_find(&a, "m");
    int k = gt__agg_top_kernel(m);
    cr_assert_str_eq(m->bk_name[k], "wgrad_gemm<float, 2>");
    cr_assert_float_eq(m->bk_us[k], 8000, 1e-9);
    gt__agg_close(&a);
    kernel_table(&a, 1200);
    cr_assert_eq(count(&a, "top-kernel", "m"), 0, "55%% is not most");
    gt__agg_close(&a);
}

Test(agg, kernel_top_k_keeps_heavy_names_past_its_size)
{
    struct gt__agg a;
    gt__agg_init(&a);
    char name[16];
    for (int i = 0; i < 10; i++) {
        snprintf(name, sizeof(name), "k%d", i);
        cr_assert_eq(gt__agg_kernel(&a, "m", 1, 10, name), 0);
        cr_assert_eq(gt__agg_kernel(&a, "m", 1, 100, "heavy"), 0);
    }
    const struct gt__agg_layer *m = gt__agg_find(&a, "m");
    int k = gt__agg_top_kernel(m);
    cr_assert_str_eq(m->bk_name[k], "heavy");
    cr_assert_float_eq(m->bk_us[k], 1000, 1e-9);
    gt__agg_close(&a);
}
