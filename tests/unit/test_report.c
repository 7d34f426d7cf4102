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

/* A ModuleList between a block and its layer (no forward of its own: a
 * container) must not make the block a second bwd-heavy hint. */
Test(hints, backward_heavy_skips_ancestors_across_a_container)
{
    struct gt__agg a;
    const struct span_spec s[] = {FWD("m (Net)", 5000), BWD("m (Net)", 40000, 0, 0),
                                  BWD("m.layers (ModuleList)", 40000, 0, 0),
                                  FWD("m.layers.0 (Linear)", 4000),
                                  BWD("m.layers.0 (Linear)", 40000, 40000, 0)};
    table(&a, s, 5);
    cr_assert_eq(count(&a, "bwd-heavy", "m.layers.0"), 1);
    cr_assert_eq(count(&a, "bwd-heavy", "m"), 0, "the container's parent includes it");
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

/* ------------------------------------------------------------ warm-up */

/* Which of the durations the rule leaves out, as a string of 0/1. */
static const char *warm(const double *d, size_t n)
{
    static char s[64];
    unsigned char out[64];
    struct gt__rep_warm w;
    cr_assert_eq(gt__report_warmup(d, n, out, &w), 0);
    for (size_t i = 0; i < n; i++)
        s[i] = out[i] ? '1' : '0';
    s[n] = '\0';
    return s;
}

Test(warmup, a_slow_first_step_is_left_out)
{
    /* torch 2.x: compilation in step 0, 4.7 s against 47 ms. */
    const double d[] = {4700, 47, 48, 46, 47, 49, 47};
    cr_assert_str_eq(warm(d, 7), "1000000");
    /* Two iterations: the first is still considered. */
    const double two[] = {4700, 47};
    cr_assert_str_eq(warm(two, 2), "10");
}

Test(warmup, a_slow_step_in_the_middle_is_an_outlier)
{
    const double d[] = {10, 10.2, 9.9, 10.1, 55, 10, 10.3, 9.8};
    cr_assert_str_eq(warm(d, 8), "00001000");
}

Test(warmup, nothing_left_out_of_even_noisy_or_single_runs)
{
    const double one[] = {4700};
    cr_assert_str_eq(warm(one, 1), "0");
    const double eq[] = {5, 5, 5, 5, 5};
    cr_assert_str_eq(warm(eq, 5), "00000");
    /* A loaded machine: steps within 1.5x of each other are noise. */
    const double noisy[] = {12.4, 7.4, 7.1, 12.9, 9.8, 11.0};
    cr_assert_str_eq(warm(noisy, 6), "000000");
    /* A slow last step of two is no warm-up. */
    const double last[] = {47, 4700};
    cr_assert_str_eq(warm(last, 2), "00");
}

/* Iteration k over [100k, 100k + 100), layer m's backward in it naming
 * node top_k[k] for top_us[k] of its self_us[k]. */
static void top_run(struct gt__agg *a, const char *const *top, const double *top_us,
                    const double *self_us, int n)
{
    for (int k = 0; k < n; k++) {
        struct gt__agg_ev f = {.phase = GT__AGG_PH_FWD, .name = "m (Attn) forward",
                               .ts = 100.0 * k + 1, .dur = 10};
        struct gt__agg_ev b = {.phase = GT__AGG_PH_BWD, .name = "m (Attn) backward",
                               .ts = 100.0 * k + 20, .dur = self_us[k],
                               .time_us = self_us[k], .self_us = self_us[k],
                               .nodes = 5, .self_nodes = 5, .top_node = top[k],
                               .top_node_us = top_us[k]};
        cr_assert_eq(gt__agg_add(a, &f), 0);
        cr_assert_eq(gt__agg_add(a, &b), 0);
        cr_assert_eq(gt__agg_step(a, (uint64_t)k, 100.0 * k, 100), 0);
    }
}

/* --iterations: the longest node is the selected iterations' (a first
 * pass's iterations say which a span is in), so the hint can never say a
 * node took more than the backward it is part of. */
Test(hints, top_node_is_the_selected_iterations_own)
{
    const char *const top[] = {"BigBackward0", "BmmBackward0", "BmmBackward0"};
    const double top_us[] = {60, 8, 8}, self_us[] = {70, 10, 10};
    struct gt__agg p, a;
    gt__agg_init(&p);
    gt__agg_log_iterations(&p);
    top_run(&p, top, top_us, self_us, 3);
    cr_assert_eq(p.nits, 3);
    gt__agg_init(&a);
    gt__agg_select(&a, 1, 2);
    gt__agg_plan(&a, p.its, p.nits);
    top_run(&a, top, top_us, self_us, 3);
    gt__agg_finish(&a);
    const struct gt__agg_layer *l = &a.layers[0];
    cr_assert_float_eq(l->bwd_self_us, 20, 1e-9);
    cr_assert_str_eq(l->top_node, "BmmBackward0");
    cr_assert(l->top_node_us <= l->bwd_self_us, "top %f > self %f",
              l->top_node_us, l->bwd_self_us);
    cr_assert_eq(l->bwd_self_nodes, 10, "own nodes follow the selection");
    gt__agg_close(&a);
    gt__agg_close(&p);
}

/* A skip list leaves a middle iteration out of the rows and steps. */
Test(agg_iter, skipped_iterations_leave_rows_and_steps)
{
    const char *const top[] = {"BmmBackward0", "BmmBackward0", "BmmBackward0"};
    const double top_us[] = {8, 80, 8}, self_us[] = {10, 100, 10};
    const uint64_t skip[] = {1};
    struct gt__agg a;
    gt__agg_init(&a);
    cr_assert_eq(gt__agg_skip(&a, skip, 1), 0);
    top_run(&a, top, top_us, self_us, 3);
    gt__agg_finish(&a);
    cr_assert_eq(a.steps, 2);
    cr_assert_eq(a.skipped, 1);
    cr_assert_float_eq(a.skipped_us, 100, 1e-9);
    cr_assert_float_eq(a.layers[0].bwd_self_us, 20, 1e-9);
    cr_assert_eq(a.layers[0].fwd_calls, 2);
    gt__agg_close(&a);
}

/* A table of one iteration whose layer m of class cls has its own
 * backward of 20 ms in 4 nodes, node taking 19 ms of it. */
static void node_table(struct gt__agg *a, const char *name_fwd,
                       const char *name_bwd, const char *node)
{
    gt__agg_init(a);
    struct gt__agg_ev f = {.phase = GT__AGG_PH_FWD, .name = name_fwd, .ts = 1,
                           .dur = 2000};
    struct gt__agg_ev b = {.phase = GT__AGG_PH_BWD, .name = name_bwd, .ts = 2,
                           .dur = 20000, .time_us = 20000, .self_us = 20000,
                           .nodes = 4, .self_nodes = 4, .top_node = node,
                           .top_node_us = 19000};
    cr_assert_eq(gt__agg_add(a, &f), 0);
    cr_assert_eq(gt__agg_add(a, &b), 0);
    cr_assert_eq(gt__agg_step(a, 0, 0, 100000), 0);
    gt__agg_finish(a);
}

Test(hints, top_node_only_when_the_node_is_not_what_the_layer_runs)
{
    struct gt__agg a;
    node_table(&a, "m (Linear) forward", "m (Linear) backward", "AddmmBackward0");
    cr_assert_eq(count(&a, "top-node", "m"), 0, "a Linear's addmm is no finding");
    gt__agg_close(&a);
    node_table(&a, "m (Conv2d) forward", "m (Conv2d) backward",
               "ConvolutionBackward0");
    cr_assert_eq(count(&a, "top-node", "m"), 0, "nor a conv's convolution");
    gt__agg_close(&a);
    node_table(&a, "m (Linear) forward", "m (Linear) backward", "CopyBackwards");
    cr_assert_eq(count(&a, "top-node", "m"), 1, "a copy dominating a Linear is");
    gt__agg_close(&a);
    node_table(&a, "m (Attn) forward", "m (Attn) backward", "AddmmBackward0");
    cr_assert_eq(count(&a, "top-node", "m"), 1, "a composite layer's node is");
    gt__agg_close(&a);
}

Test(hints, compiled_graph_says_per_layer_backward_is_missing)
{
    struct gt__agg a;
    node_table(&a, "Net (Net) forward", "Net (Net) backward",
               "CompiledFunctionBackward");
    cr_assert_eq(count(&a, "compiled", "Net"), 1);
    cr_assert_eq(count(&a, "top-node", "Net"), 0);
    gt__agg_close(&a);
    node_table(&a, "m (Attn) forward", "m (Attn) backward", "BmmBackward0");
    cr_assert_eq(count(&a, "compiled", "m"), 0, "eager: no such hint");
    gt__agg_close(&a);
}

/* Hints speak per iteration: two equal iterations halve the ms. */
Test(hints, texts_are_per_iteration)
{
    struct gt__agg a;
    gt__agg_init(&a);
    for (int k = 0; k < 2; k++) {
        struct gt__agg_ev f = {.phase = GT__AGG_PH_FWD, .name = "m (Net) forward",
                               .ts = 100000.0 * k + 1, .dur = 1000};
        struct gt__agg_ev b = {.phase = GT__AGG_PH_BWD, .name = "m (Net) backward",
                               .ts = 100000.0 * k + 2, .dur = 40000,
                               .time_us = 40000, .self_us = 40000, .nodes = 1,
                               .self_nodes = 1};
        cr_assert_eq(gt__agg_add(&a, &f), 0);
        cr_assert_eq(gt__agg_add(&a, &b), 0);
        cr_assert_eq(gt__agg_step(&a, (uint64_t)k, 100000.0 * k, 100000), 0);
    }
    gt__agg_finish(&a);
    struct gt__hint h[GT__MAX_HINTS];
    size_t n = gt__hints_find(&a, h, GT__MAX_HINTS);
    cr_assert_eq(n, 1);
    cr_assert(strstr(h[0].text, "backward 40.000 ms/it"), "%s", h[0].text);
    gt__agg_close(&a);
}

Test(agg_iter, skip_list_names_each_step_once)
{
    const uint64_t skip[] = {4, 0, 0, 4, 2};
    struct gt__agg a;
    gt__agg_init(&a);
    cr_assert_eq(gt__agg_skip(&a, skip, 5), 0);
    cr_assert_eq(a.nskip, 3);
    cr_assert(a.skip[0] == 0 && a.skip[1] == 2 && a.skip[2] == 4);
    gt__agg_close(&a);
}

/* ------------------------------------------------------------ processes */

static struct gt__rep_in proc_in(int64_t pid, int64_t ppid, int32_t rank)
{
    struct gt__rep_in in = {.rank = rank, .pid = pid, .ppid = ppid};
    strcpy(in.host, "h");
    strcpy(in.cmd, "python train.py");
    return in;
}

/* A DataLoader run: the training process and two workers it forked, each
 * with its own trace; the main process rotated its file once. */
Test(report_procs, workers_are_left_out_of_the_training_processes_table)
{
    const struct gt__rep_in in[] = {proc_in(100, 1, -1), proc_in(101, 100, -1),
                                    proc_in(100, 1, -1), proc_in(102, 100, -1),
                                    proc_in(-1, -1, -1)};
    const size_t its[] = {5, 0, 3, 0, 0};
    unsigned char keep[5];
    cr_assert_eq(gt__report_procs(in, its, 5, -1, keep, "t"), 0);
    cr_assert(keep[0] && keep[2], "both files of the training process");
    cr_assert(!keep[1] && !keep[3], "no worker's");
    cr_assert(keep[4], "an input that names no process counts");
    char buf[512] = "";
    FILE *f = fmemopen(buf, sizeof(buf), "w");
    gt__report_procs_note(f);
    fclose(f);
    cr_assert(strstr(buf, "table is of pid 100") && strstr(buf, "pid 101") &&
                  strstr(buf, "pid 102") && strstr(buf, "--pid"), "%s", buf);

    cr_assert_eq(gt__report_procs(in, its, 5, 102, keep, "t"), 0);
    cr_assert(keep[3] && !keep[0] && !keep[1] && !keep[2], "--pid 102: its file");
    cr_assert_eq(gt__report_procs(in, its, 5, 7, keep, "t"), 2, "no such process");
}

/* Ranks of one job are one table; so is one process; equal iterations go
 * to the parent of the others. */
Test(report_procs, ranks_and_single_processes_keep_everything)
{
    const struct gt__rep_in ranks[] = {proc_in(10, 1, 0), proc_in(11, 1, 1)};
    const size_t its[] = {4, 4};
    unsigned char keep[2];
    cr_assert_eq(gt__report_procs(ranks, its, 2, -1, keep, "t"), 0);
    cr_assert(keep[0] && keep[1]);
    const struct gt__rep_in same[] = {proc_in(10, 1, 0), proc_in(11, 1, 0)};
    cr_assert_eq(gt__report_procs(same, its, 2, -1, keep, "t"), 0);
    cr_assert(keep[0] != keep[1], "two processes both rank 0: not one job");
    const struct gt__rep_in kid[] = {proc_in(20, 30, -1), proc_in(30, 1, -1)};
    cr_assert_eq(gt__report_procs(kid, its, 2, -1, keep, "t"), 0);
    cr_assert(keep[1] && !keep[0], "the parent, when iterations tie");
}

/* Two ranks, each with a DataLoader worker that inherited its rank, and a
 * launcher of no rank: one process per rank, the workers and the launcher
 * left out. */
Test(report_procs, each_rank_keeps_its_training_process)
{
    const struct gt__rep_in in[] = {proc_in(10, 5, 0), proc_in(11, 10, 0),
                                    proc_in(20, 5, 1), proc_in(21, 20, 1),
                                    proc_in(5, 1, -1)};
    const size_t its[] = {4, 0, 4, 0, 0};
    unsigned char keep[5];
    cr_assert_eq(gt__report_procs(in, its, 5, -1, keep, "t"), 0);
    cr_assert(keep[0] && keep[2], "both ranks' training processes");
    cr_assert(!keep[1] && !keep[3] && !keep[4], "no worker, no launcher");
    char buf[512] = "";
    FILE *f = fmemopen(buf, sizeof(buf), "w");
    gt__report_procs_note(f);
    fclose(f);
    cr_assert(strstr(buf, "2 ranks' processes") && strstr(buf, "3 other processes"),
              "%s", buf);
}
