/*
 * Communication inside backward (GT_SCOPE_COMM scopes: DDP's reducer, a
 * torch.distributed call; issue #27) on hand-built record streams fed to
 * both consumers (layer_fixture.h): a node's communication is its own
 * column, not its compute, in the node, its layer's span, the pass
 * group's totals, the table and the hints; communication in a pass but
 * in no node is the group's; in a forward it is the forward's (inclusive,
 * like forward time, and out of it), nobody's backward.
 */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <string.h>

#include "daemon/cli/report.h"
#include "tests/unit/layer_fixture.h"

enum { S_NET = 1, S_FC, S_LINEAR, S_MM, S_ACC, S_WEIGHT, S_RED, S_WAIT,
       S_AR, S_BLK, S_BLOCK };

static void strings(struct lx *x)
{
    static const char *const s[] = {
        NULL, "Net", "fc", "Linear", "MmBackward0",
        "torch::autograd::AccumulateGrad", "weight", "DDP reducer",
        "DDP all-reduce wait", "all_reduce", "blk", "Block"};
    for (uint32_t i = 1; i < sizeof(s) / sizeof(s[0]); i++)
        str(&x->f, i, s[i]);
    thr(&x->f, 100);
}

static void comm(struct lx *x, int begin, uint32_t name, uint64_t us)
{
    if (begin) {
        struct gt_r_scope_begin r = {{GT_R_SCOPE_BEGIN, sizeof(r)},
                                     GT_SCOPE_COMM, 0, name, 0,
                                     T0 + us * 1000};
        add(&x->f, &r, sizeof(r));
    } else {
        struct gt_r_scope_end r = {{GT_R_SCOPE_END, sizeof(r)}, GT_SCOPE_COMM,
                                   0, name, T0 + us * 1000};
        add(&x->f, &r, sizeof(r));
    }
}

/* Net.fc's forward; one pass: MmBackward0 [110, 120], fc.weight's
 * AccumulateGrad [121, 141] holding the reducer [125, 139] (with an
 * all_reduce [130, 135] inside it), the wait [145, 155] in no node. */
static void ddp_like(struct lx *x)
{
    strings(x);
    scope(x, 1, S_NET, S_NET, 0, 1);
    fwd(x, S_FC, S_LINEAR, 0, 2, 5);
    scope(x, 0, S_NET, S_NET, 0, 6);
    pass(x, 1, 100, 0);
    node(&x->f, S_MM, 0, 110, 120);
    nbegin(x, S_ACC, UINT64_MAX, 121);
    node_layer(x, S_FC, S_WEIGHT, 121);
    comm(x, 1, S_RED, 125);
    comm(x, 1, S_AR, 130);
    comm(x, 0, S_AR, 135);
    comm(x, 0, S_RED, 139);
    nend(x, UINT64_MAX, 141);
    comm(x, 1, S_WAIT, 145);
    comm(x, 0, S_WAIT, 155);
    pass(x, 0, 160, 0);
}

Test(layer_comm, a_nodes_communication_is_not_its_compute, .timeout = 10)
{
    struct lx x;
    lx_open(&x, 0);
    ddp_like(&x);
    lx_run(&x);

    const cJSON *acc = ev_of(x.doc, "backward", "torch::autograd::AccumulateGrad", 0);
    cr_assert_eq(num(args(acc), "comm_us"), 14.0, "the outermost scope only");
    const cJSON *mm = args(ev_of(x.doc, "backward", "MmBackward0", 0));
    cr_assert_null(cJSON_GetObjectItem(mm, "comm_us"));
    /* Drawn inside the node, on its track. */
    const cJSON *red = ev_of(x.doc, "comm", "DDP reducer", 0);
    cr_assert_not_null(red);
    cr_assert_eq(num(red, "tid"), num(acc, "tid"));
    cr_assert_eq(num(red, "dur"), 14.0);
    cr_assert_eq(n_of(x.doc, "comm", NULL), 3);
    const cJSON *fc = args(ev_of(x.doc, "layer_backward", "fc (Linear) backward", 0));
    cr_assert_eq(num(fc, "comm_us"), 14.0);
    cr_assert_eq(num(fc, "self_us"), 10.0 + 6.0, "Mm 10 + AccumulateGrad 20 - 14");
    cr_assert_eq(num(fc, "accumulate_grad_us"), 6.0);
    const cJSON *tot = args(ev_of(x.doc, "backward_totals", NULL, 0));
    cr_assert_eq(num(tot, "comm_us"), 14.0 + 10.0, "with the wait in no node");
    cr_assert_eq(num(tot, "time_us"), 16.0);

    const struct gt__agg_layer *r = row(&x.direct, "fc");
    cr_assert_eq(r->comm_us, 14.0);
    cr_assert_eq(r->bwd_self_us, 16.0);
    cr_assert_eq(r->accg_us, 6.0);
    cr_assert_eq(x.direct.rest.comm_us, 24.0);
    struct gt__rep_totals t = gt__report_totals(&x.direct);
    cr_assert_eq(t.comm_us, 24.0);
    cr_assert_eq(t.comm_un_us, 10.0);
    lx_close(&x);
}

Test(layer_comm, hints_name_communication_not_parameter_gradients,
     .timeout = 10)
{
    struct lx x;
    lx_open(&x, 0);
    ddp_like(&x);
    lx_run(&x);

    struct gt__hint h[GT__MAX_HINTS];
    size_t n = gt__hints_find(&x.direct, h, GT__MAX_HINTS);
    int layer = 0, free_ = 0;
    for (size_t i = 0; i < n; i++) {
        cr_assert_str_neq(h[i].kind, "accumulate-grad", "%s", h[i].text);
        if (strcmp(h[i].kind, "comm") == 0 && strcmp(h[i].layer, "fc") == 0)
            layer = strstr(h[i].text, "14.000 ms") != NULL ||
                    strstr(h[i].text, "0.014 ms") != NULL;
        if (strcmp(h[i].kind, "comm") == 0 && h[i].layer[0] == '\0')
            free_ = strstr(h[i].text, "0.010 ms") != NULL;
    }
    cr_assert(layer, "a comm hint names fc with its 14 us");
    cr_assert(free_, "a comm hint gives the 10 us outside nodes");
    lx_close(&x);
}

Test(layer_comm, forward_communication_is_the_forwards_not_its_compute,
     .timeout = 10)
{
    struct lx x;
    lx_open(&x, 0);
    strings(&x);
    /* FSDP's all-gather in a forward: the module's forward time. */
    scope(&x, 1, S_NET, S_NET, 0, 1);
    scope(&x, 1, S_BLK, S_BLOCK, 0, 2);
    comm(&x, 1, S_AR, 3);
    comm(&x, 0, S_AR, 7);
    created(&x.f, S_BLK, 0, 8);
    scope(&x, 0, S_BLK, S_BLOCK, 0, 9);
    scope(&x, 0, S_NET, S_NET, 0, 10);
    pass(&x, 1, 100, 0);
    /* A checkpoint's recompute inside the node communicates: recompute. */
    nbegin(&x, S_MM, 0, 110);
    scope(&x, 1, S_BLK, S_BLOCK, GT_SCOPE_F_RECOMPUTE, 112);
    comm(&x, 1, S_AR, 113);
    comm(&x, 0, S_AR, 116);
    scope(&x, 0, S_BLK, S_BLOCK, GT_SCOPE_F_RECOMPUTE, 120);
    nend(&x, 0, 130);
    pass(&x, 0, 140, 0);
    /* Between passes, in no node: nobody's. */
    comm(&x, 1, S_AR, 150);
    comm(&x, 0, S_AR, 152);
    lx_run(&x);

    cr_assert_eq(n_of(x.doc, "comm", "all_reduce"), 3);
    const cJSON *bf = args(ev_of(x.doc, "layer_forward", "blk (Block) forward", 0));
    cr_assert_eq(num(bf, "comm_us"), 4.0);
    const cJSON *nf = args(ev_of(x.doc, "layer_forward", "Net (Net) forward", 0));
    cr_assert_eq(num(nf, "comm_us"), 4.0, "inclusive, as its time");
    cr_assert_null(cJSON_GetObjectItem(
        args(ev_of(x.doc, "layer_recompute", "blk (Block) recompute", 0)), "comm_us"));
    const cJSON *mm = args(ev_of(x.doc, "backward", "MmBackward0", 0));
    cr_assert_null(cJSON_GetObjectItem(mm, "comm_us"));
    const struct gt__agg_layer *b = row(&x.direct, "blk");
    cr_assert_eq(b->comm_us, 0.0);
    cr_assert_eq(b->fwd_comm_us, 4.0);
    cr_assert_eq(b->fwd_us, 7.0 - 4.0);
    const struct gt__agg_layer *net = row(&x.direct, "Net");
    cr_assert_eq(net->fwd_comm_us, 4.0);
    cr_assert_eq(net->fwd_us, 9.0 - 4.0);
    struct gt__hint h[GT__MAX_HINTS];
    size_t nh = gt__hints_find(&x.direct, h, GT__MAX_HINTS), fwd_hints = 0;
    for (size_t i = 0; i < nh; i++)
        if (strcmp(h[i].kind, "comm") == 0 && strstr(h[i].text, "forward")) {
            cr_assert_str_eq(h[i].layer, "blk", "its own, not Net's inclusive");
            fwd_hints++;
        }
    cr_assert_eq(fwd_hints, 1);
    cr_assert_eq(b->bwd_self_us, 12.0, "20 us node less its 8 us recompute");
    cr_assert_eq(x.direct.rest.comm_us, 0.0);
    cr_assert_eq(gt__report_totals(&x.direct).comm_us, 0.0);
    cr_assert_eq(gt__report_totals(&x.direct).fwd_comm_us, 4.0);
    lx_close(&x);
}

Test(layer_comm, a_scope_the_stream_never_ends_is_no_ones_time, .timeout = 10)
{
    struct lx x;
    lx_open(&x, 0);
    strings(&x);
    scope(&x, 1, S_NET, S_NET, 0, 1);
    fwd(&x, S_FC, S_LINEAR, 0, 2, 5);
    comm(&x, 1, S_AR, 6); /* capture stopped before its end, and Net's */
    created(&x.f, S_NET, 1, 20);
    lx_run(&x);

    const cJSON *ar = ev_of(x.doc, "comm", "all_reduce", 0);
    cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(args(ar), "unclosed")));
    const cJSON *net = args(ev_of(x.doc, "module", "Net (Net) forward", 0));
    cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(net, "unclosed")));
    cr_assert_null(cJSON_GetObjectItem(net, "comm_us"), "no one's time");
    cr_assert_eq(row(&x.direct, "Net")->fwd_comm_us, 0.0);
    lx_close(&x);
}
