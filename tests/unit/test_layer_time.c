/*
 * Per-layer backward attribution and time (issue #11) on hand-built record
 * streams fed to both consumers at once: the Chrome writer, whose files are
 * read back as `gradtrace report` reads them, and the aggregation consumer.
 * Each test checks the trace's events, the table's rows, and that both
 * routes give the same table.
 *
 * Covered: nodes made by a running backward node (double backward),
 * a retained graph run twice, AccumulateGrad attributed by
 * GT_R_BWD_NODE_LAYER, checkpoint recompute, node-time sums for a shared
 * module, the unattributed remainder and containers' sums; backward
 * ranges (GT_SCOPE_F_BACKWARD, issue #18) as backward spans.
 */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/codec.h"
#include "daemon/cli/cli.h"
#include "daemon/convert/agg.h"
#include "daemon/convert/consumer.h"
#include "tests/unit/layer_fixture.h"

enum { S_NET = 1, S_FC, S_FC2, S_LINEAR, S_MM, S_ACC, S_WEIGHT, S_BLK,
       S_BLOCK, S_CKPT, S_ACT, S_RELU, S_B0, S_B1, S_B0FC, S_B1FC, S_LAYERS,
       S_L0, S_L1, S_TORCH_ACC, S_NOT_ACC };

static void strings(struct lx *x)
{
    static const char *const s[] = {
        NULL, "Net", "fc", "fc2", "Linear", "MmBackward0", "AccumulateGrad",
        "weight", "blk", "Block", "CheckpointFunctionBackward", "act", "ReLU",
        "blocks.0", "blocks.1", "blocks.0.fc", "blocks.1.fc", "layers",
        "layers.0", "layers.1", "torch::autograd::AccumulateGrad",
        "NotAccumulateGrad"};
    for (uint32_t i = 1; i < sizeof(s) / sizeof(s[0]); i++)
        str(&x->f, i, s[i]);
    thr(&x->f, 100);
}

/* ------------------------------------------------------------ tests */

/* checkpoint(self.blk, x) in Net, reentrant: blk runs under no_grad,
 * the checkpoint node (seq 0) is created in Net; its backward begins
 * (at 110 us), before the recompute. */
static void checkpointed(struct lx *x)
{
    strings(x);
    scope(x, 1, S_NET, S_NET, 0, 1);
    fwd(x, S_BLK, S_BLOCK, UINT64_MAX, 2, 8);
    created(&x->f, S_NET, 0, 9);
    scope(x, 0, S_NET, S_NET, 0, 10);
    pass(x, 1, 100, 0);
    nbegin(x, S_CKPT, 0, 110);
}


Test(layer_time, nodes_made_by_a_backward_node_get_its_layer_as_second_order,
     .timeout = 10)
{
    struct lx x;
    lx_open(&x, 0);
    strings(&x);
    scope(&x, 1, S_NET, S_NET, 0, 1);
    fwd(&x, S_FC, S_LINEAR, 0, 2, 5);
    scope(&x, 0, S_NET, S_NET, 0, 6);
    /* autograd.grad(create_graph=True): MmBackward0 makes node 50. */
    pass(&x, 1, 100, 0);
    nbegin(&x, S_MM, 0, 110);
    created(&x.f, 0, 50, 115);
    nend(&x, 0, 130);
    pass(&x, 0, 140, 0);
    /* The penalty's backward runs node 50 and node 0 again. */
    pass(&x, 1, 200, 1);
    node(&x.f, S_MM, 50, 210, 220);
    node(&x.f, S_MM, 0, 220, 235);
    pass(&x, 0, 240, 1);
    lx_run(&x);

    const cJSON *n50 = args(ev_of(x.doc, "backward", "MmBackward0", 1));
    cr_assert_eq(num(n50, "seq"), 50);
    cr_assert_str_eq(s_of(n50, "layer"), "fc");
    cr_assert_eq(num(n50, "order"), 2);
    const cJSON *again = args(ev_of(x.doc, "backward", "MmBackward0", 2));
    cr_assert_str_eq(s_of(again, "layer"), "fc", "a first-order node run again");
    cr_assert_null(cJSON_GetObjectItem(again, "order"));
    const cJSON *fc2 = args(ev_of(x.doc, "layer_backward", "fc (Linear) backward", 1));
    cr_assert_eq(num(fc2, "nodes"), 2);
    cr_assert_eq(num(fc2, "second_order_nodes"), 1);
    const struct gt__agg_layer *fc = row(&x.direct, "fc");
    cr_assert_eq(fc->bwd_nodes, 3);
    cr_assert_eq(fc->order2, 1);
    cr_assert_eq(fc->bwd_us, 20.0 + 10.0 + 15.0);
    cr_assert_eq(x.direct.rest.un_nodes, 0);
    lx_close(&x);
}

Test(layer_time, a_retained_graph_keeps_its_layers_on_every_pass, .timeout = 10)
{
    struct lx x;
    lx_open(&x, 0);
    strings(&x);
    scope(&x, 1, S_NET, S_NET, 0, 1);
    fwd(&x, S_FC, S_LINEAR, 0, 2, 5);
    fwd(&x, S_FC2, S_LINEAR, 1, 6, 9);
    scope(&x, 0, S_NET, S_NET, 0, 10);
    for (uint64_t p = 0; p < 3; p++) {
        uint64_t t = 100 + 100 * p;
        pass(&x, 1, t, p);
        node(&x.f, S_MM, 1, t + 10, t + 20);
        node(&x.f, S_MM, 0, t + 20, t + 25);
        pass(&x, 0, t + 30, p);
    }
    lx_run(&x);

    for (int i = 0; i < 6; i++) {
        const cJSON *a = args(ev_of(x.doc, "backward", "MmBackward0", i));
        cr_assert_str_eq(s_of(a, "layer"), i % 2 ? "fc" : "fc2", "node %d", i);
    }
    cr_assert_eq(n_of(x.doc, "layer_backward", "fc (Linear) backward"), 3);
    cr_assert_eq(anomaly(x.doc, "nodes_without_creation"), 0);
    cr_assert_eq(row(&x.direct, "fc2")->bwd_us, 30.0);
    cr_assert_eq(row(&x.direct, "Net")->bwd_nodes, 6);
    lx_close(&x);
}

Test(layer_time, evicting_a_used_creation_is_no_anomaly, .timeout = 10)
{
    struct lx x;
    lx_open(&x, 4);
    strings(&x);
    for (uint64_t it = 0; it < 3; it++) {
        uint64_t t = 1000 * it;
        scope(&x, 1, S_NET, S_NET, 0, t + 1);
        for (uint64_t i = 0; i < 4; i++)
            fwd(&x, S_FC, S_LINEAR, 4 * it + i, t + 2 + 4 * i, t + 5 + 4 * i);
        scope(&x, 0, S_NET, S_NET, 0, t + 30);
        pass(&x, 1, t + 100, it);
        for (uint64_t i = 4; i > 0; i--)
            node(&x.f, S_MM, 4 * it + i - 1, t + 200 - 10 * i, t + 205 - 10 * i);
        pass(&x, 0, t + 300, it);
    }
    lx_run(&x);
    cr_assert_eq(anomaly(x.doc, "node_map_evicted"), 0);
    cr_assert_eq(anomaly(x.doc, "nodes_without_creation"), 0);
    cr_assert_eq(row(&x.direct, "fc")->bwd_nodes, 12);
    lx_close(&x);
}

Test(layer_time, node_layer_attributes_accumulate_grad_with_its_param,
     .timeout = 10)
{
    struct lx x;
    lx_open(&x, 0);
    strings(&x);
    scope(&x, 1, S_NET, S_NET, 0, 1);
    fwd(&x, S_FC, S_LINEAR, 0, 2, 5);
    scope(&x, 0, S_NET, S_NET, 0, 6);
    pass(&x, 1, 100, 0);
    node(&x.f, S_MM, 0, 110, 120);
    nbegin(&x, S_ACC, UINT64_MAX, 121);     /* fc.weight */
    node_layer(&x, S_FC, S_WEIGHT, 121);
    nend(&x, UINT64_MAX, 125);
    node(&x.f, S_ACC, UINT64_MAX, 126, 128); /* an input leaf */
    node_layer(&x, S_FC, S_WEIGHT, 129);     /* no node open: counted */
    pass(&x, 0, 130, 0);
    lx_run(&x);

    const cJSON *acc = args(ev_of(x.doc, "backward", "AccumulateGrad", 0));
    cr_assert_str_eq(s_of(acc, "layer"), "fc");
    cr_assert_str_eq(s_of(acc, "param"), "weight");
    const cJSON *leaf = args(ev_of(x.doc, "backward", "AccumulateGrad", 1));
    cr_assert(cJSON_IsNull(cJSON_GetObjectItem(leaf, "layer")));
    const cJSON *fc = args(ev_of(x.doc, "layer_backward", "fc (Linear) backward", 0));
    cr_assert_eq(num(fc, "accumulate_grad_us"), 4.0);
    cr_assert_eq(num(fc, "self_us"), 14.0);
    const cJSON *tot = args(ev_of(x.doc, "backward_totals", NULL, 0));
    cr_assert_eq(num(tot, "unattributed_accumulate_grad"), 1);
    cr_assert_eq(num(tot, "unattributed_nodes"), 1);
    cr_assert_eq(num(tot, "unattributed_us"), 2.0);
    cr_assert_eq(anomaly(x.doc, "node_layer_unmatched"), 1);
    cr_assert_eq(row(&x.direct, "fc")->accg_us, 4.0);
    cr_assert_eq(x.direct.rest.un_accg, 1);
    lx_close(&x);
}

/* torch names the node "torch::autograd::AccumulateGrad" (1.13 and 2.x). */
Test(layer_time, accumulate_grad_is_recognised_by_torchs_qualified_name,
     .timeout = 10)
{
    struct lx x;
    lx_open(&x, 0);
    strings(&x);
    scope(&x, 1, S_NET, S_NET, 0, 1);
    fwd(&x, S_FC, S_LINEAR, 0, 2, 5);
    scope(&x, 0, S_NET, S_NET, 0, 6);
    node(&x.f, S_MM, 0, 110, 120);
    nbegin(&x, S_TORCH_ACC, UINT64_MAX, 121); /* fc.weight */
    node_layer(&x, S_FC, S_WEIGHT, 121);
    nend(&x, UINT64_MAX, 125);
    node(&x.f, S_TORCH_ACC, UINT64_MAX, 126, 129); /* an input leaf */
    node(&x.f, S_NOT_ACC, UINT64_MAX, 130, 131);   /* a look-alike */
    pass(&x, 0, 140, 0);
    lx_run(&x);

    const cJSON *fc = args(ev_of(x.doc, "layer_backward", "fc (Linear) backward", 0));
    cr_assert_eq(num(fc, "accumulate_grad_us"), 4.0);
    const cJSON *tot = args(ev_of(x.doc, "backward_totals", NULL, 0));
    cr_assert_eq(num(tot, "unattributed_accumulate_grad"), 1);
    cr_assert_eq(num(tot, "unattributed_nodes"), 2);
    cr_assert_eq(row(&x.direct, "fc")->accg_us, 4.0);
    cr_assert_eq(x.direct.rest.un_accg, 1);
    lx_close(&x);
}

Test(layer_time, recompute_scopes_are_recompute_spans_not_forward_calls,
     .timeout = 10)
{
    struct lx x;
    lx_open(&x, 0);
    checkpointed(&x);
    scope(&x, 1, S_BLK, S_BLOCK, GT_SCOPE_F_RECOMPUTE, 112);
    created(&x.f, S_BLK, 10, 115);
    scope(&x, 0, S_BLK, S_BLOCK, GT_SCOPE_F_RECOMPUTE, 120);
    node(&x.f, S_MM, 10, 125, 135); /* the inner backward, reentrant */
    nend(&x, 0, 160);
    pass(&x, 0, 170, 0);
    lx_run(&x);

    const cJSON *rc = ev_of(x.doc, "layer_recompute", "blk (Block) recompute", 0);
    cr_assert_not_null(rc);
    cr_assert_str_eq(s_of(args(ev_of(x.doc, "module", "blk (Block) recompute", 0)),
                          "phase"),
                     "recompute");
    cr_assert_eq(n_of(x.doc, "layer_forward", "blk (Block) forward"), 1);
    const cJSON *inner = args(ev_of(x.doc, "backward", "MmBackward0", 0));
    cr_assert_str_eq(s_of(inner, "layer"), "blk", "made in the recompute, first order");
    cr_assert_null(cJSON_GetObjectItem(inner, "order"));
    const struct gt__agg_layer *blk = row(&x.direct, "blk"), *net = row(&x.direct, "Net");
    cr_assert_eq(blk->fwd_calls, 1);
    cr_assert_eq(blk->rc_calls, 1);
    cr_assert_eq(blk->rc_us, 8.0);
    cr_assert_eq(blk->bwd_us, 10.0);
    cr_assert_eq(net->bwd_self_us, 32.0,
                 "the checkpoint node less its nested node and its recompute");
    cr_assert_eq(net->bwd_us, 42.0);
    cr_assert_eq(net->rc_us, 8.0, "recompute is inclusive like forward");
    lx_close(&x);
}

/* Non-reentrant: the first node that unpacks a saved tensor runs the
 * recompute (a block and its child); the node's own time is what is left,
 * the nested child scope is not taken off twice, and a recompute that
 * runs outside any node takes nothing off. */
Test(layer_time, a_recompute_inside_a_node_is_not_its_own_time, .timeout = 10)
{
    struct lx x;
    lx_open(&x, 0);
    strings(&x);
    scope(&x, 1, S_NET, S_NET, 0, 1);
    fwd(&x, S_BLK, S_BLOCK, 10, 2, 8);
    scope(&x, 0, S_NET, S_NET, 0, 10);
    pass(&x, 1, 100, 0);
    nbegin(&x, S_MM, 10, 110);
    scope(&x, 1, S_BLK, S_BLOCK, GT_SCOPE_F_RECOMPUTE, 112);
    scope(&x, 1, S_FC, S_LINEAR, GT_SCOPE_F_RECOMPUTE, 113);
    scope(&x, 0, S_FC, S_LINEAR, GT_SCOPE_F_RECOMPUTE, 118);
    scope(&x, 0, S_BLK, S_BLOCK, GT_SCOPE_F_RECOMPUTE, 122);
    nend(&x, 10, 140);
    scope(&x, 1, S_BLK, S_BLOCK, GT_SCOPE_F_RECOMPUTE, 150);
    scope(&x, 0, S_BLK, S_BLOCK, GT_SCOPE_F_RECOMPUTE, 155);
    pass(&x, 0, 170, 0);
    lx_run(&x);

    const struct gt__agg_layer *blk = row(&x.direct, "blk");
    cr_assert_eq(blk->rc_calls, 2);
    cr_assert_eq(blk->rc_us, 15.0);
    cr_assert_eq(blk->bwd_self_us, 20.0, "30 us node less its 10 us recompute");
    lx_close(&x);
}

#define BWD GT_SCOPE_F_BACKWARD

/* A program without autograd: its backward ranges are the spans. */
Test(layer_time, backward_ranges_are_backward_spans_timed_by_their_duration,
     .timeout = 10)
{
    struct lx x;
    lx_open(&x, 0);
    strings(&x);
    for (uint64_t it = 0; it < 2; it++) {
        uint64_t t = 1000 * it;
        fwd(&x, S_B0, 0, UINT64_MAX, t + 1, t + 5);
        fwd(&x, S_B1, 0, UINT64_MAX, t + 6, t + 10);
        /* blocks.1 { blocks.1.fc } then blocks.0, in reverse order. */
        scope(&x, 1, S_B1, 0, BWD, t + 100);
        scope(&x, 1, S_B1FC, 0, BWD, t + 100);
        scope(&x, 0, S_B1FC, 0, BWD, t + 130);
        scope(&x, 0, S_B1, 0, BWD, t + 140);
        scope(&x, 1, S_B0, 0, BWD, t + 150);
        scope(&x, 0, S_B0, 0, BWD, t + 160);
    }
    lx_run(&x);

    const cJSON *b1 = ev_of(x.doc, "layer_backward", "blocks.1 backward", 0);
    const cJSON *fc = ev_of(x.doc, "layer_backward", "blocks.1.fc backward", 0);
    cr_assert_eq(num(b1, "ts"), 100.0);
    cr_assert_eq(num(b1, "dur"), 40.0);
    cr_assert_eq(num(args(b1), "time_us"), 40.0, "a range's time is its duration");
    cr_assert_eq(num(args(b1), "self_us"), 10.0, "less its nested range");
    cr_assert_eq(num(args(b1), "nodes"), 0);
    cr_assert_str_eq(s_of(args(b1), "source"), "range");
    cr_assert_str_eq(s_of(args(fc), "parent"), "blocks.1");
    cr_assert_eq(num(b1, "tid"), num(fc, "tid"), "nested on one track");
    const cJSON *m;
    int named = 0;
    cJSON_ArrayForEach(m, cJSON_GetObjectItem(x.doc, "traceEvents"))
        named += !strcmp(s_of(m, "ph"), "M") && num(m, "tid") == num(b1, "tid") &&
                 !strcmp(s_of(args(m), "name") ? s_of(args(m), "name") : "",
                         "Layers backward");
    cr_assert_eq(named, 1, "on Layers backward");
    cr_assert_eq(n_of(x.doc, "layer_backward", NULL), 6);
    cr_assert_eq(n_of(x.doc, "layer_forward", NULL), 4, "no forward calls");
    cr_assert_str_eq(s_of(args(ev_of(x.doc, "module", "blocks.0 backward", 0)),
                          "phase"),
                     "backward");
    const struct gt__agg_layer *r1 = row(&x.direct, "blocks.1"),
                               *r0 = row(&x.direct, "blocks.0");
    cr_assert_eq(r1->fwd_calls, 2);
    cr_assert_eq(r1->bwd_spans, 2);
    cr_assert_eq(r1->bwd_us, 80.0);
    cr_assert_eq(r1->bwd_self_us, 20.0);
    cr_assert_eq(r0->bwd_us, 20.0);
    cr_assert_eq(row(&x.direct, "blocks.1.fc")->bwd_us, 60.0);
    lx_close(&x);
}

/* Nodes and a range for one layer: the node-derived span wins. */
Test(layer_time, backward_nodes_win_over_a_range_of_their_layer, .timeout = 10)
{
    struct lx x;
    lx_open(&x, 0);
    strings(&x);
    fwd(&x, S_FC, S_LINEAR, 0, 1, 5);
    pass(&x, 1, 100, 0);
    scope(&x, 1, S_FC, 0, BWD, 101);
    node(&x.f, S_MM, 0, 110, 120);
    scope(&x, 0, S_FC, 0, BWD, 150);
    pass(&x, 0, 160, 0);
    lx_run(&x);

    cr_assert_eq(n_of(x.doc, "layer_backward", NULL), 1);
    const cJSON *e = ev_of(x.doc, "layer_backward", "fc (Linear) backward", 0);
    cr_assert_eq(num(args(e), "nodes"), 1);
    cr_assert_eq(row(&x.direct, "fc")->bwd_us, 10.0, "counted once, by its node");
    cr_assert_eq(row(&x.direct, "fc")->bwd_spans, 1);
    lx_close(&x);
}

/* Net > blocks.0 { act, blocks.0.fc, act }, blocks.1 { blocks.1.fc, act }:
 * one ReLU module "act" shared by both blocks. */
static void shared_module_run(struct lx *x)
{
    strings(x);
    scope(x, 1, S_NET, S_NET, 0, 1);
    scope(x, 1, S_B0, S_BLOCK, 0, 2);
    fwd(x, S_ACT, S_RELU, 0, 3, 4);
    fwd(x, S_B0FC, S_LINEAR, 1, 5, 8);
    fwd(x, S_ACT, S_RELU, 2, 9, 10);
    scope(x, 0, S_B0, S_BLOCK, 0, 11);
    scope(x, 1, S_B1, S_BLOCK, 0, 12);
    fwd(x, S_B1FC, S_LINEAR, 3, 13, 16);
    fwd(x, S_ACT, S_RELU, 4, 17, 18);
    scope(x, 0, S_B1, S_BLOCK, 0, 19);
    scope(x, 0, S_NET, S_NET, 0, 20);
    pass(x, 1, 100, 0);
    node(&x->f, S_MM, 4, 110, 111);
    node(&x->f, S_MM, 3, 111, 131);
    node(&x->f, S_MM, 2, 131, 132);
    node(&x->f, S_MM, 1, 132, 152);
    node(&x->f, S_MM, 0, 152, 153);
    pass(x, 0, 160, 0);
}

Test(layer_time, a_shared_module_claims_only_its_own_nodes_time, .timeout = 10)
{
    struct lx x;
    lx_open(&x, 0);
    shared_module_run(&x);
    lx_run(&x);

    const cJSON *ev = ev_of(x.doc, "layer_backward", "act (ReLU) backward", 0);
    cr_assert_eq(num(ev, "dur"), 43.0, "the span is the wall of its nodes");
    cr_assert_eq(num(args(ev), "time_us"), 3.0, "its time is its nodes'");
    cr_assert_eq(num(args(ev), "self_us"), 3.0);
    cr_assert_str_eq(s_of(args(ev), "parent"), "Net", "shared: under the root");
    cr_assert_eq(num(args(ev_of(x.doc, "layer_backward", "blocks.0 (Block) backward",
                                0)),
                     "time_us"),
                 20.0, "the shared module's nodes are not blocks.0's");
    const struct gt__agg_layer *act = row(&x.direct, "act");
    cr_assert_eq(act->bwd_us, 3.0);
    cr_assert_eq(act->bwd_nodes, 3);
    cr_assert_eq(act->fwd_calls, 3);
    lx_close(&x);
}

Test(layer_time, a_parent_is_at_least_the_sum_of_its_children, .timeout = 10)
{
    struct lx x;
    lx_open(&x, 0);
    shared_module_run(&x);
    lx_run(&x);

    const struct gt__agg *a = &x.direct;
    for (size_t p = 0; p < a->n; p++) {
        double kids = 0, kids_fwd = 0;
        for (size_t c = 0; c < a->n; c++) {
            if (a->layers[c].up == (long)p) {
                kids += a->layers[c].bwd_us;
                kids_fwd += a->layers[c].fwd_us;
            }
        }
        cr_assert_geq(a->layers[p].bwd_us, kids, "%s", a->layers[p].path);
        cr_assert_geq(a->layers[p].fwd_us, kids_fwd, "%s", a->layers[p].path);
    }
    cr_assert_eq(row(a, "Net")->bwd_us, 43.0);
    cr_assert_eq(row(a, "blocks.1")->bwd_us, 20.0);
    lx_close(&x);
}

Test(layer_time, total_is_the_top_level_rows_plus_the_unattributed,
     .timeout = 10)
{
    struct lx x;
    lx_open(&x, 0);
    strings(&x);
    scope(&x, 1, S_NET, S_NET, 0, 1);
    fwd(&x, S_FC, S_LINEAR, 0, 2, 5);
    scope(&x, 0, S_NET, S_NET, 0, 6);
    created(&x.f, 0, 1, 7); /* the loss, outside any module */
    pass(&x, 1, 100, 0);
    node(&x.f, S_MM, UINT64_MAX, 101, 102); /* GraphRoot */
    node(&x.f, S_MM, 1, 110, 115);
    node(&x.f, S_MM, 0, 115, 125);
    pass(&x, 0, 130, 0);
    lx_run(&x);

    const struct gt__agg *a = &x.direct;
    double top = 0;
    for (size_t i = 0; i < a->n; i++)
        if (a->layers[i].up < 0)
            top += a->layers[i].bwd_us;
    cr_assert_eq(top, 10.0);
    cr_assert_eq(a->rest.un_us, 6.0);
    cr_assert_eq(a->rest.un_nodes, 2);
    cr_assert_eq(top + a->rest.un_us, a->rest.time_us);
    cr_assert_eq(a->rest.nodes, 3);
    lx_close(&x);
}

Test(layer_time, containers_show_their_childrens_sums_in_model_order,
     .timeout = 10)
{
    struct lx x;
    lx_open(&x, 0);
    strings(&x);
    scope(&x, 1, S_NET, S_NET, 0, 1);
    fwd(&x, S_L0, S_LINEAR, 0, 2, 5);   /* a ModuleList's items */
    fwd(&x, S_L1, S_LINEAR, 1, 6, 10);
    fwd(&x, S_FC, S_LINEAR, 2, 11, 12);
    scope(&x, 0, S_NET, S_NET, 0, 13);
    pass(&x, 1, 100, 0);
    node(&x.f, S_MM, 2, 105, 106);
    node(&x.f, S_MM, 1, 110, 120);
    node(&x.f, S_MM, 0, 120, 125);
    pass(&x, 0, 130, 0);
    lx_run(&x);

    struct gt__agg *a = &x.direct;
    const struct gt__agg_layer *l = row(a, "layers");
    cr_assert(l->container);
    cr_assert_eq(l->fwd_calls, 0);
    cr_assert_eq(l->fwd_us, 3.0 + 4.0);
    cr_assert_eq(l->bwd_us, 15.0);
    cr_assert_not(row(a, "Net")->container, "called itself");
    gt__agg_sort(a, GT__AGG_MODEL);
    static const char *const order[] = {"Net", "layers", "layers.0", "layers.1",
                                        "fc"};
    cr_assert_eq(a->n, 5);
    for (size_t i = 0; i < a->n; i++)
        cr_assert_str_eq(a->layers[i].path, order[i], "row %zu", i);
    cr_assert_eq(a->layers[2].depth, 2);
    lx_close(&x);
}

/* A checkpointed blk with AccumulateGrad nodes, after shared_module_run. */
static void checkpoint_run(struct lx *x)
{
    scope(x, 1, S_NET, S_NET, 0, 1001);
    fwd(x, S_BLK, S_BLOCK, UINT64_MAX, 1002, 1008);
    created(&x->f, S_NET, 20, 1009);
    scope(x, 0, S_NET, S_NET, 0, 1010);
    pass(x, 1, 1100, 1);
    nbegin(x, S_CKPT, 20, 1110);
    scope(x, 1, S_BLK, S_BLOCK, GT_SCOPE_F_RECOMPUTE, 1112);
    created(&x->f, S_BLK, 21, 1115);
    scope(x, 0, S_BLK, S_BLOCK, GT_SCOPE_F_RECOMPUTE, 1120);
    node(&x->f, S_MM, 21, 1125, 1135);
    nend(x, 20, 1160);
    nbegin(x, S_ACC, UINT64_MAX, 1161);
    node_layer(x, S_BLK, S_WEIGHT, 1161);
    nend(x, UINT64_MAX, 1163);
    node(&x->f, S_ACC, UINT64_MAX, 1164, 1167);
    pass(x, 0, 1170, 1);
}

static int file_write(const char *path, const void *a, size_t an,
                      const void *b, size_t bn)
{
    FILE *fp = fopen(path, "wb");
    if (!fp)
        return -1;
    int ok = fwrite(a, 1, an, fp) == an && fwrite(b, 1, bn, fp) == bn;
    return fclose(fp) == 0 && ok ? 0 : -1;
}

Test(layer_time, a_recording_reports_the_same_rows_as_its_trace_files,
     .timeout = 10)
{
    struct lx x;
    char gtr[96];
    lx_open(&x, 0);
    shared_module_run(&x);
    checkpoint_run(&x);
    /* The records as a .gtr: hello and one uncompressed chunk. */
    struct gt_hello h;
    memset(&h, 0, sizeof(h));
    h.pid = 4242;
    h.rank = -1;
    h.local_rank = -1;
    h.world_size = -1;
    h.flags = GT_HELLO_FILE | GT_HELLO_CAPTURE;
    h.start_mono_ns = T0;
    uint8_t hb[GT_HELLO_MAX_SIZE];
    ssize_t hl = gt__hello_encode(&h, "unit", "t", 1, hb, sizeof(hb));
    cr_assert_gt(hl, 0);
    size_t cap = gt__chunk_bound(x.f.b.len);
    uint8_t *chunk = malloc(cap);
    ssize_t cl = gt__chunk_encode(NULL, 0, x.f.b.data, x.f.b.len, x.f.b.count,
                                  0, T0, chunk, cap);
    cr_assert_gt(cl, 0);
    snprintf(gtr, sizeof(gtr), "%s/run.gtr", x.f.dir);
    cr_assert_eq(file_write(gtr, hb, (size_t)hl, chunk, (size_t)cl), 0);
    free(chunk);

    /* Fresh consumers: the ones lx_open made have had their hello. */
    struct gt__conv_opts co = {.out_dir = x.f.dir, .stem = "t"};
    gt__consumer_free(x.k[0]);
    gt__consumer_free(x.k[1]);
    x.k[0] = gt__chrome_consumer_create(&co);
    x.k[1] = gt__agg_consumer_create(&x.direct);
    struct gt__convert_info info = {0};
    cr_assert_eq(gt__convert_file(gtr, x.k, 2, &info), 0);
    unlink(gtr);
    const char *const *paths;
    size_t n = gt__conv_files(gt__chrome_consumer_conv(x.k[0]), &paths);
    cr_assert_gt(n, 0);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(gt__report_read_json(&x.json, paths[i]), 0);
    x.doc = load(paths[0]);
    gt__agg_finish(&x.json);
    gt__agg_finish(&x.direct);
    assert_same(&x.json, &x.direct);

    cr_assert_eq(x.direct.rest.groups, 2);
    cr_assert_eq(row(&x.direct, "blk")->rc_calls, 1);
    cr_assert_eq(row(&x.direct, "blk")->accg_us, 2.0);
    cr_assert_eq(row(&x.direct, "act")->bwd_us, 3.0);
    cr_assert_eq(x.direct.rest.un_accg, 1);
    lx_close(&x);
}

Test(layer_time, without_pass_marks_a_recompute_does_not_end_the_backward,
     .timeout = 10)
{
    struct lx x;
    lx_open(&x, 0);
    strings(&x);
    scope(&x, 1, S_NET, S_NET, 0, 1);
    fwd(&x, S_BLK, S_BLOCK, UINT64_MAX, 2, 8);
    created(&x.f, S_NET, 0, 9);
    fwd(&x, S_FC, S_LINEAR, 1, 10, 12);
    scope(&x, 0, S_NET, S_NET, 0, 13);
    node(&x.f, S_MM, 1, 100, 105);
    nbegin(&x, S_CKPT, 0, 110);
    scope(&x, 1, S_BLK, S_BLOCK, GT_SCOPE_F_RECOMPUTE, 112);
    created(&x.f, S_BLK, 10, 115); /* after fc's node ended: no forward */
    scope(&x, 0, S_BLK, S_BLOCK, GT_SCOPE_F_RECOMPUTE, 120);
    node(&x.f, S_MM, 10, 125, 135);
    nend(&x, 0, 160);
    lx_run(&x);

    cr_assert_eq(n_of(x.doc, "layer_backward", "Net (Net) backward"), 1,
                 "one backward, one span");
    cr_assert_eq(n_of(x.doc, "backward_totals", NULL), 1);
    cr_assert_eq(row(&x.direct, "Net")->bwd_us, 5.0 + 50.0 - 8.0,
                 "both nodes, less the recompute the checkpoint node ran");
    lx_close(&x);
}

/* Torch 1.13 names the node with its namespace: still AccumulateGrad. */
Test(layer_time, qualified_accumulate_grad_name_counts_as_one, .timeout = 10)
{
    struct lx x;
    lx_open(&x, 0);
    strings(&x);
    str(&x.f, S_ACC, "torch::autograd::AccumulateGrad");
    scope(&x, 1, S_NET, S_NET, 0, 1);
    fwd(&x, S_FC, S_LINEAR, 0, 2, 5);
    scope(&x, 0, S_NET, S_NET, 0, 6);
    pass(&x, 1, 100, 0);
    node(&x.f, S_MM, 0, 110, 120);
    nbegin(&x, S_ACC, UINT64_MAX, 121);
    node_layer(&x, S_FC, S_WEIGHT, 121);
    nend(&x, UINT64_MAX, 125);
    pass(&x, 0, 130, 0);
    lx_run(&x);
    const cJSON *fc = args(ev_of(x.doc, "layer_backward", "fc (Linear) backward", 0));
    cr_assert_eq(num(fc, "accumulate_grad_us"), 4.0);
    lx_close(&x);
}

/* A layer span names its own longest node, not a descendant's. */
Test(layer_time, span_names_its_own_longest_node, .timeout = 10)
{
    struct lx x;
    lx_open(&x, 0);
    strings(&x);
    scope(&x, 1, S_NET, S_NET, 0, 1);
    fwd(&x, S_FC, S_LINEAR, 0, 2, 5);
    scope(&x, 0, S_NET, S_NET, 0, 6);
    pass(&x, 1, 100, 0);
    node(&x.f, S_MM, 0, 110, 120);          /* 10 us */
    nbegin(&x, S_ACC, UINT64_MAX, 121);     /* 4 us */
    node_layer(&x, S_FC, S_WEIGHT, 121);
    nend(&x, UINT64_MAX, 125);
    pass(&x, 0, 130, 0);
    lx_run(&x);
    const cJSON *fc = args(ev_of(x.doc, "layer_backward", "fc (Linear) backward", 0));
    cr_assert_str_eq(s_of(fc, "top_node"), "MmBackward0");
    cr_assert_eq(num(fc, "top_node_us"), 10.0);
    lx_close(&x);
}

/* HF-style reentrant checkpointing: the checkpointed function does an op
 * of its own before calling the block (no module scope open), inside the
 * checkpoint node's recompute; the node it makes runs in the nested pass,
 * before the checkpoint node ends: a recompute's node, first order, not a
 * double backward's. */
Test(layer_time, a_reentrant_recompute_outside_a_module_is_first_order,
     .timeout = 10)
{
    struct lx x;
    lx_open(&x, 0);
    checkpointed(&x);
    created(&x.f, 0, 11, 111); /* h = x * 1.0, outside the block */
    scope(&x, 1, S_BLK, S_BLOCK, GT_SCOPE_F_RECOMPUTE, 112);
    created(&x.f, S_BLK, 10, 115);
    scope(&x, 0, S_BLK, S_BLOCK, GT_SCOPE_F_RECOMPUTE, 120);
    pass(&x, 1, 122, 0); /* torch.autograd.backward inside the node */
    node(&x.f, S_MM, 10, 125, 135);
    node(&x.f, S_RELU, 11, 136, 140);
    pass(&x, 0, 141, 0);
    nend(&x, 0, 160);
    pass(&x, 0, 170, 0);
    lx_run(&x);

    const cJSON *mul = args(ev_of(x.doc, "backward", "ReLU", 0));
    cr_assert_str_eq(s_of(mul, "layer"), "Net", "the running node's layer");
    cr_assert_null(cJSON_GetObjectItem(mul, "order"), "first order");
    cr_assert_eq(row(&x.direct, "Net")->order2, 0);
    cr_assert_eq(x.direct.rest.order2, 0);
    lx_close(&x);
}
