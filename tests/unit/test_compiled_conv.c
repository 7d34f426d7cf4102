/*
 * torch.compile'd regions in the converter (daemon/convert/compiled.c,
 * issue 26) on hand-built streams fed to both consumers: a region's
 * operators joined to its map's calls in order, named for their layers
 * (under the bare root as the paths stand, under a compiled block with
 * its name in front, in a backward with the running node's), forward
 * spans from the kernels, backward credited per layer as kernels (time,
 * not node counts) and taken out of the CompiledFunctionBackward node's
 * own time, recompute, fused calls on their common ancestor, the
 * totals instant, classes from GT_R_LAYER_INFO, and hostile maps.
 */
#include "tests/unit/layer_fixture.h"

enum { S_NET = 1, S_BLOCKS, S_B0, S_B0UP, S_B1, S_B1UP, S_NETC, S_LIST,
       S_BLOCK, S_LINEAR, S_ADDMM, S_MM, S_K1, S_K2, S_FOO, S_UP, S_EMPTY,
       S_FUSED, S_CFB, S_ACC, S_W, S_B0UP_REL, S_B1UP_REL, S_B0_REL, S_KB0,
       S_KB1, S_CODE, S_CID, S_COMPILE };

static void strings(struct lx *x)
{
    static const char *const s[] = {
        NULL, "Net", "blocks", "blocks.0", "blocks.0.up", "blocks.1",
        "blocks.1.up", "Net", "ModuleList", "Block", "Linear", "aten::addmm",
        "aten::mm", "graph_0_cpp_fused_gelu_0", "graph_0_cpp_fused_add_1",
        "aten::foo", "up", "", "blocks.0 blocks.1",
        "CompiledFunctionBackward", "torch::autograd::AccumulateGrad",
        "weight", "blocks.0.up", "blocks.1.up", "blocks.0",
        "graph_0_cpp_fused_gelu_backward_0", "graph_0_cpp_fused_gelu_1",
        "fx_code_key", "0/0", "compile 0/0"};
    for (uint32_t i = 1; i < sizeof(s) / sizeof(s[0]); i++)
        str(&x->f, i, s[i]);
    thr(&x->f, 100);
}

static void layer_info(struct lx *x, uint32_t layer, uint32_t cls,
                       uint32_t flags)
{
    struct gt_r_layer_info r = {{GT_R_LAYER_INFO, sizeof(r)}, layer, cls,
                                flags, T0};
    add(&x->f, &r, sizeof(r));
}

static void cgraph(struct lx *x, uint32_t graph, uint16_t phase,
                   uint32_t calls)
{
    struct gt_r_compiled_graph r = {{GT_R_COMPILED_GRAPH, sizeof(r)}, graph,
                                    S_CODE, S_CID, 0, phase, 0, calls, T0};
    add(&x->f, &r, sizeof(r));
}

static void ccall(struct lx *x, uint32_t graph, uint32_t index,
                  uint32_t scope, uint32_t owner, uint32_t fused,
                  uint16_t phase, uint16_t flags)
{
    struct gt_r_compiled_call r = {{GT_R_COMPILED_CALL, sizeof(r)}, graph,
                                   index, scope, scope, owner, fused, phase,
                                   flags};
    add(&x->f, &r, sizeof(r));
}

static void region(struct lx *x, int begin, uint32_t graph, uint32_t layer,
                   uint64_t us)
{
    struct gt_r_compiled_region r = {
        {begin ? GT_R_COMPILED_BEGIN : GT_R_COMPILED_END, sizeof(r)}, graph,
        layer, 0, T0 + us * 1000};
    add(&x->f, &r, sizeof(r));
}

static uint64_t op_ids;

/* Operator name from b to e (us). */
static void op(struct lx *x, uint32_t name, uint64_t b, uint64_t e)
{
    uint64_t id = ++op_ids;
    struct gt_r_op_begin ob = {{GT_R_OP_BEGIN, sizeof(ob)}, name, 0,
                               T0 + b * 1000, id, UINT64_MAX, 0};
    struct gt_r_op_end oe = {{GT_R_OP_END, sizeof(oe)}, name, T0 + e * 1000,
                             id};
    add(&x->f, &ob, sizeof(ob));
    add(&x->f, &oe, sizeof(oe));
}

static void op_begin(struct lx *x, uint32_t name, uint64_t id, uint64_t us)
{
    struct gt_r_op_begin r = {{GT_R_OP_BEGIN, sizeof(r)}, name, 0,
                              T0 + us * 1000, id, UINT64_MAX, 0};
    add(&x->f, &r, sizeof(r));
}

static void op_end(struct lx *x, uint32_t name, uint64_t id, uint64_t us)
{
    struct gt_r_op_end r = {{GT_R_OP_END, sizeof(r)}, name, T0 + us * 1000,
                            id};
    add(&x->f, &r, sizeof(r));
}

/* The nth cpu_op named name. */
static const cJSON *op_ev(const struct lx *x, const char *name, int nth)
{
    return ev_of(x->doc, "cpu_op", name, nth);
}

static double arg_num(const cJSON *ev, const char *key)
{
    return num(args(ev), key);
}

static const char *arg_str(const cJSON *ev, const char *key)
{
    const cJSON *v = cJSON_GetObjectItem(args(ev), key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static const cJSON *totals(const struct lx *x, const char *phase)
{
    for (int i = 0;; i++) {
        const cJSON *ev = ev_of(x->doc, "compiled_totals", NULL, i);
        if (!ev)
            return NULL;
        const char *p = arg_str(ev, "phase");
        if (p && strcmp(p, phase) == 0)
            return ev;
    }
}

/*
 * torch.compile(Net): the bare root's forward holds a region of forward
 * map 1; its backward is one CompiledFunctionBackward node (created in
 * Net's forward) holding a region of backward map 2, then an
 * AccumulateGrad node.
 */
static void whole_model(struct lx *x)
{
    strings(x);
    layer_info(x, S_NET, S_NETC, GT_LAYER_F_BARE_ROOT);
    layer_info(x, S_BLOCKS, S_LIST, 0);
    layer_info(x, S_B0, S_BLOCK, 0);
    layer_info(x, S_B1, S_BLOCK, 0);
    layer_info(x, S_B0UP, S_LINEAR, 0);
    layer_info(x, S_B1UP, S_LINEAR, 0);
    cgraph(x, 1, GT_COMPILED_FORWARD, 4);
    ccall(x, 1, 0, S_ADDMM, S_B0UP_REL, 0, GT_COMPILED_FORWARD, GT_CCALL_EXTERN);
    ccall(x, 1, 1, S_K1, S_B0_REL, 0, GT_COMPILED_FORWARD, 0);
    ccall(x, 1, 2, S_ADDMM, S_B1UP_REL, 0, GT_COMPILED_FORWARD, GT_CCALL_EXTERN);
    ccall(x, 1, 3, S_K2, S_EMPTY, S_FUSED, GT_COMPILED_FORWARD, GT_CCALL_FUSED);
    cgraph(x, 2, GT_COMPILED_BACKWARD, 3);
    ccall(x, 2, 0, S_KB0, S_B1UP_REL, 0, GT_COMPILED_BACKWARD, 0);
    ccall(x, 2, 1, S_MM, S_B0UP_REL, 0, GT_COMPILED_BACKWARD, GT_CCALL_EXTERN);
    ccall(x, 2, 2, S_KB1, S_B0_REL, 0, GT_COMPILED_RECOMPUTE, 0);

    scope(x, 1, S_NET, S_NETC, 0, 0);
    created(&x->f, S_NET, 7, 1);
    region(x, 1, 1, S_NET, 2);
    op_begin(x, S_ADDMM, 900, 10);
    op(x, S_MM, 11, 19); /* inside the extern call: not a call itself */
    op_end(x, S_ADDMM, 900, 20);
    op(x, S_K1, 20, 25);
    op(x, S_ADDMM, 30, 50);
    op(x, S_K2, 50, 60);
    op(x, S_FOO, 60, 62); /* no call of the map */
    region(x, 0, 1, S_NET, 70);
    scope(x, 0, S_NET, S_NETC, 0, 100);

    pass(x, 1, 190, 0);
    nbegin(x, S_CFB, 7, 200);
    region(x, 1, 2, 0, 201);
    op(x, S_KB0, 210, 230);
    op(x, S_MM, 230, 260);
    op(x, S_KB1, 260, 270);
    region(x, 0, 2, 0, 290);
    nend(x, 7, 300);
    nbegin(x, S_ACC, UINT64_MAX, 310);
    node_layer(x, S_B0UP, S_W, 311);
    nend(x, UINT64_MAX, 315);
    pass(x, 0, 320, 0);
}

Test(compiled_conv, whole_model_operators_join_their_calls_and_layers,
     .timeout = 10)
{
    struct lx x;
    lx_open(&x, 0);
    whole_model(&x);
    lx_run(&x);

    const cJSON *e = op_ev(&x, "aten::addmm", 0);
    cr_assert_str_eq(arg_str(e, "layer"), "blocks.0.up");
    cr_assert_str_eq(arg_str(e, "phase"), "forward");
    cr_assert_str_eq(arg_str(e, "mark"), "module");
    cr_assert_str_eq(arg_str(e, "kernel"), "aten::addmm");
    cr_assert_str_eq(arg_str(op_ev(&x, "aten::addmm", 1), "layer"), "blocks.1.up",
                     "a repeated name takes the map's next call");
    e = op_ev(&x, "graph_0_cpp_fused_add_1", 0);
    cr_assert_str_eq(arg_str(e, "layer"), "Net", "owner \"\": the compiled module");
    cr_assert_str_eq(arg_str(e, "mark"), "fused");
    cr_assert_str_eq(arg_str(e, "fused"), "blocks.0 blocks.1");
    cr_assert_null(arg_str(op_ev(&x, "aten::mm", 0), "layer"),
                   "an operator inside an extern call is no call");
    cr_assert_null(arg_str(op_ev(&x, "aten::foo", 0), "layer"));
    cr_assert_eq(anomaly(x.doc, "compiled_unmatched"), 1);
    cr_assert_eq(anomaly(x.doc, "compiled_dropped"), 0);
    e = op_ev(&x, "aten::mm", 1);
    cr_assert_str_eq(arg_str(e, "layer"), "blocks.0.up",
                     "in a backward, the paths hang from the node's layer");
    cr_assert_str_eq(arg_str(e, "phase"), "backward");
    cr_assert_eq(n_of(x.doc, "compiled", "compiled graph 0 forward"), 1);
    cr_assert_eq(n_of(x.doc, "compiled", "compiled graph 0 backward"), 1);
    lx_close(&x);
}

Test(compiled_conv, forward_spans_are_the_kernels_time_per_layer,
     .timeout = 10)
{
    struct lx x;
    lx_open(&x, 0);
    whole_model(&x);
    lx_run(&x);

    const cJSON *e = ev_of(x.doc, "layer_forward", "blocks.0 (Block) forward", 0);
    cr_assert_not_null(e, "classes come from GT_R_LAYER_INFO");
    cr_assert_eq(arg_num(e, "time_us"), 15.0, "addmm 10 + gelu 5");
    cr_assert_eq(num(e, "ts"), 10.0);
    cr_assert_eq(num(e, "dur"), 15.0);
    e = ev_of(x.doc, "layer_forward", "blocks.1.up (Linear) forward", 0);
    cr_assert_eq(arg_num(e, "time_us"), 20.0);
    cr_assert_str_eq(arg_str(e, "parent"), "blocks.1");
    cr_assert_null(ev_of(x.doc, "layer_forward", "blocks (ModuleList) forward", 0),
                   "a ModuleList is never called: no span, as eager");
    cr_assert_eq(n_of(x.doc, "layer_forward", NULL), 5,
                 "Net's own scope, blocks.0, blocks.0.up, blocks.1, blocks.1.up");

    const struct gt__agg_layer *r = row(&x.json, "blocks.0");
    cr_assert_eq(r->fwd_calls, 1);
    cr_assert_eq(r->fwd_us, 15.0);
    cr_assert_eq(row(&x.json, "blocks.0.up")->fwd_us, 10.0);
    cr_assert_eq(row(&x.json, "blocks")->container, 1);
    cr_assert_eq(row(&x.json, "blocks")->fwd_us, 35.0, "its children's sums");
    lx_close(&x);
}

Test(compiled_conv, backward_kernels_are_their_layers_not_the_node,
     .timeout = 10)
{
    struct lx x;
    lx_open(&x, 0);
    whole_model(&x);
    lx_run(&x);

    cr_assert_eq(row(&x.json, "blocks.1.up")->bwd_us, 20.0);
    cr_assert_eq(row(&x.json, "blocks.0.up")->bwd_us, 35.0, "mm 30 + AccumulateGrad 5");
    cr_assert_eq(row(&x.json, "blocks.0.up")->bwd_nodes, 1,
                 "kernels are no nodes: only the AccumulateGrad");
    cr_assert_eq(row(&x.json, "blocks.0")->rc_us, 10.0, "the recompute kernel");
    const struct gt__agg_layer *n = row(&x.json, "Net");
    cr_assert_eq(n->bwd_self_us, 40.0,
                 "the node's 100 less its kernels (20 + 30) and recompute (10)");
    cr_assert_eq(n->bwd_us, 95.0, "all but the recompute, which is no backward");
    cr_assert_eq(n->bwd_nodes, 2);
    /* The layer spans nest as the kernels ran: blocks.0.up's is not
     * stretched to its AccumulateGrad after the node. */
    const cJSON *e = ev_of(x.doc, "layer_backward", "blocks.0.up (Linear) backward", 0);
    cr_assert_eq(num(e, "ts"), 230.0);
    cr_assert_eq(num(e, "dur"), 30.0);
    cr_assert_eq(anomaly(x.doc, "overlap_dropped"), 0);
    lx_close(&x);
}

Test(compiled_conv, totals_say_where_the_regions_time_went, .timeout = 10)
{
    struct lx x;
    lx_open(&x, 0);
    whole_model(&x);
    lx_run(&x);

    const cJSON *f = totals(&x, "forward"), *b = totals(&x, "backward");
    cr_assert(f && b);
    cr_assert_eq(arg_num(f, "region_us"), 68.0);
    cr_assert_eq(arg_num(f, "one_layer_us"), 35.0);
    cr_assert_eq(arg_num(f, "fused_us"), 10.0);
    cr_assert_eq(arg_num(f, "unowned_us"), 0.0);
    cr_assert_eq(arg_num(f, "unmatched_us"), 2.0);
    cr_assert_eq(arg_num(f, "calls"), 4.0);
    cr_assert_eq(arg_num(b, "one_layer_us"), 60.0);
    for (int i = 0; i < 2; i++) {
        const struct gt__agg *a = i ? &x.json : &x.direct;
        cr_assert_eq(a->compiled[0].regions, 1);
        cr_assert_eq(a->compiled[0].us[GT__AGG_C_FUSED], 10.0);
        cr_assert_eq(a->compiled[1].us[GT__AGG_C_ONE], 60.0);
    }
    lx_close(&x);
}

/*
 * Each block compiled on its own, one graph for both (torch 2.x passes
 * parameters as inputs): paths relative to the block, which the region's
 * layer names at run time; a block is no bare root.
 */
Test(compiled_conv, a_shared_block_graph_takes_each_blocks_name, .timeout = 10)
{
    struct lx x;
    lx_open(&x, 0);
    strings(&x);
    layer_info(&x, S_NET, S_NETC, GT_LAYER_F_BARE_ROOT);
    layer_info(&x, S_B0UP, S_LINEAR, 0);
    cgraph(&x, 1, GT_COMPILED_FORWARD, 2);
    ccall(&x, 1, 0, S_ADDMM, S_UP, 0, GT_COMPILED_FORWARD, GT_CCALL_EXTERN);
    ccall(&x, 1, 1, S_K1, S_EMPTY, 0, GT_COMPILED_FORWARD, 0);
    scope(&x, 1, S_NET, S_NETC, 0, 0);
    static const uint32_t blk[2] = {S_B0, S_B1};
    for (int i = 0; i < 2; i++) {
        uint64_t t = 10 + 40 * (uint64_t)i;
        scope(&x, 1, blk[i], S_BLOCK, 0, t);
        region(&x, 1, 1, blk[i], t + 1);
        op(&x, S_ADDMM, t + 2, t + 12);
        op(&x, S_K1, t + 12, t + 15);
        region(&x, 0, 1, blk[i], t + 16);
        scope(&x, 0, blk[i], S_BLOCK, 0, t + 20);
    }
    scope(&x, 0, S_NET, S_NETC, 0, 100);
    lx_run(&x);

    cr_assert_str_eq(arg_str(op_ev(&x, "aten::addmm", 0), "layer"), "blocks.0.up");
    cr_assert_str_eq(arg_str(op_ev(&x, "aten::addmm", 1), "layer"), "blocks.1.up");
    cr_assert_str_eq(arg_str(op_ev(&x, "graph_0_cpp_fused_gelu_0", 1), "layer"),
                     "blocks.1", "owner \"\": the block itself");
    cr_assert_not_null(ev_of(x.doc, "layer_forward", "blocks.0.up (Linear) forward", 0));
    cr_assert_null(ev_of(x.doc, "layer_forward", "blocks.1.up (Linear) forward", 0));
    cr_assert_not_null(ev_of(x.doc, "layer_forward", "blocks.1.up forward", 0),
                       "no class told: none made up");
    /* The blocks' own rows are their scopes: the kernels add no span. */
    cr_assert_eq(row(&x.json, "blocks.1")->fwd_calls, 1);
    cr_assert_eq(row(&x.json, "blocks.1")->fwd_us, 20.0);
    cr_assert_eq(row(&x.json, "blocks.1.up")->fwd_us, 10.0);
    lx_close(&x);
}

/* A damaged or hostile stream: maps and regions that do not fit are
 * counted and change nothing else. */
Test(compiled_conv, bad_maps_are_counted_and_harmless, .timeout = 10)
{
    struct lx x;
    lx_open(&x, 0);
    strings(&x);
    cgraph(&x, 0, GT_COMPILED_FORWARD, 1);           /* number 0 */
    cgraph(&x, 65537, GT_COMPILED_FORWARD, 1); /* beyond GT__MAX_CGRAPHS */
    cgraph(&x, 3, 9, 1);                             /* bad phase */
    cgraph(&x, 2, GT_COMPILED_FORWARD, 1);
    ccall(&x, 2, 5, S_K1, S_UP, 0, GT_COMPILED_FORWARD, 0); /* index */
    ccall(&x, 9, 0, S_K1, S_UP, 0, GT_COMPILED_FORWARD, 0); /* no map */
    ccall(&x, 2, 0, S_K1, S_UP, 0, 7, 0);            /* bad phase */
    cgraph(&x, 4, GT_COMPILED_FORWARD, 0xffffffffu);  /* a huge map */
    scope(&x, 1, S_B0, S_BLOCK, 0, 0);
    region(&x, 1, 9, S_B0, 1);                        /* unknown map */
    op(&x, S_K1, 2, 3);
    region(&x, 0, 9, S_B0, 4);
    region(&x, 1, 2, S_B0, 5);                        /* call never said */
    op(&x, S_K1, 6, 7);
    region(&x, 0, 2, S_B0, 8);
    region(&x, 0, 2, S_B0, 9);                        /* an extra end */
    scope(&x, 0, S_B0, S_BLOCK, 0, 10);
    lx_run(&x);

    cr_assert_eq(anomaly(x.doc, "compiled_dropped"), 7);
    cr_assert_eq(anomaly(x.doc, "compiled_unmatched"), 2);
    cr_assert_eq(anomaly(x.doc, "end_without_begin"), 1);
    cr_assert_eq(n_of(x.doc, "cpu_op", "graph_0_cpp_fused_gelu_0"), 2);
    cr_assert_null(arg_str(op_ev(&x, "graph_0_cpp_fused_gelu_0", 0), "layer"));
    cr_assert_eq(n_of(x.doc, "compiled", NULL), 2);
    cr_assert_eq(row(&x.json, "blocks.0")->fwd_us, 10.0);
    lx_close(&x);
}

/* Dynamo's compile time: a span on its own track, in no layer or step. */
Test(compiled_conv, compile_spans_are_their_own_track, .timeout = 10)
{
    struct lx x;
    lx_open(&x, 0);
    strings(&x);
    struct gt_r_compile_span r = {{GT_R_COMPILE_SPAN, sizeof(r)}, S_COMPILE, 0,
                                  T0 + 5000, T0 + 905000};
    add(&x.f, &r, sizeof(r));
    lx_run(&x);
    const cJSON *e = ev_of(x.doc, "compile", "compile 0/0", 0);
    cr_assert_not_null(e);
    cr_assert_eq(num(e, "ts"), 5.0);
    cr_assert_eq(num(e, "dur"), 900.0);
    cr_assert_eq(x.json.n, 0, "no row");
    lx_close(&x);
}

static void cuda_api(struct lx *x, uint32_t tid, uint32_t corr, uint32_t name,
                     uint64_t b, uint64_t e)
{
    struct gt_r_cuda_api r = {{GT_R_CUDA_API, sizeof(r)}, tid, 211, corr, name,
                              T0 + b * 1000, T0 + e * 1000};
    add(&x->f, &r, sizeof(r));
}

static void gpu_kernel(struct lx *x, uint32_t name, uint32_t corr, uint64_t b,
                       uint64_t e)
{
    struct gt_r_gpu_kernel r = {{GT_R_GPU_KERNEL, sizeof(r)}, 0, 7, name, corr,
                                T0 + b * 1000, T0 + e * 1000, {1, 1, 1},
                                {128, 1, 1}, 0, 32};
    add(&x->f, &r, sizeof(r));
}

/* A CUDA graph: its Triton kernels are CUPTI records, joined through
 * their launches, which ran inside the region on its thread; the names
 * repeat across blocks. */
Test(compiled_conv, gpu_kernels_take_their_calls_through_their_launch,
     .timeout = 10)
{
    struct lx x;
    lx_open(&x, 0);
    strings(&x);
    str(&x.f, 40, "triton_poi_fused_gelu_0");
    str(&x.f, 41, "cudaLaunchKernel");
    layer_info(&x, S_NET, S_NETC, GT_LAYER_F_BARE_ROOT);
    cgraph(&x, 1, GT_COMPILED_FORWARD, 3);
    ccall(&x, 1, 0, 40, S_B0UP_REL, 0, GT_COMPILED_FORWARD, GT_CCALL_GPU);
    ccall(&x, 1, 1, S_ADDMM, S_B0_REL, 0, GT_COMPILED_FORWARD, GT_CCALL_EXTERN);
    ccall(&x, 1, 2, 40, S_B1UP_REL, 0, GT_COMPILED_FORWARD, GT_CCALL_GPU);
    scope(&x, 1, S_NET, S_NETC, 0, 0);
    region(&x, 1, 1, S_NET, 10);
    op(&x, S_ADDMM, 20, 25);
    region(&x, 0, 1, S_NET, 50);
    scope(&x, 0, S_NET, S_NETC, 0, 60);
    /* CUPTI's buffer, later: launches, then the kernels. */
    cuda_api(&x, 100, 77, 41, 12, 14);
    cuda_api(&x, 100, 78, 41, 30, 32);
    cuda_api(&x, 100, 79, 41, 55, 56); /* after the region */
    gpu_kernel(&x, 40, 77, 100, 120);
    gpu_kernel(&x, 40, 78, 120, 150);
    gpu_kernel(&x, 40, 79, 150, 151);
    lx_run(&x);

    const cJSON *k0 = ev_of(x.doc, "kernel", "triton_poi_fused_gelu_0", 0);
    const cJSON *k1 = ev_of(x.doc, "kernel", "triton_poi_fused_gelu_0", 1);
    const cJSON *k2 = ev_of(x.doc, "kernel", "triton_poi_fused_gelu_0", 2);
    cr_assert_str_eq(arg_str(k0, "layer"), "blocks.0.up");
    cr_assert_str_eq(arg_str(k0, "phase"), "forward");
    cr_assert_str_eq(arg_str(k1, "layer"), "blocks.1.up", "the next GPU call");
    cr_assert_null(arg_str(k2, "layer"), "launched outside any region");
    cr_assert_str_eq(arg_str(op_ev(&x, "aten::addmm", 0), "layer"), "blocks.0");
    for (int i = 0; i < 2; i++) {
        const struct gt__agg *a = i ? &x.json : &x.direct;
        cr_assert_eq(row(a, "blocks.0.up")->gpu_self_us[0], 20.0);
        cr_assert_eq(row(a, "blocks.1.up")->gpu_self_us[0], 30.0);
    }
    lx_close(&x);
}

/*
 * A module named as the bare root's direct child that runs no forward of
 * its own (a ParameterDict, a module whose weights another uses; or any
 * row of a backward window, which holds no forward scopes): its rows hang
 * under the root by LAYER_INFO's GT_LAYER_F_ROOT_CHILD, from their first
 * credit on, so the root's sums hold them.
 */
static void param_only(struct lx *x, uint32_t flags)
{
    strings(x);
    layer_info(x, S_NET, S_NETC, GT_LAYER_F_BARE_ROOT);
    layer_info(x, S_BLOCKS, S_LIST, flags);
    pass(x, 1, 190, 0);
    nbegin(x, S_ACC, UINT64_MAX, 200);
    node_layer(x, S_B0UP, S_W, 201);
    nend(x, UINT64_MAX, 210);
    nbegin(x, S_ACC, UINT64_MAX, 220);
    node_layer(x, S_B1UP, S_W, 221);
    nend(x, UINT64_MAX, 225);
    pass(x, 0, 230, 0);
}

Test(compiled_conv, a_root_child_without_a_forward_hangs_under_the_root,
     .timeout = 10)
{
    struct lx x;
    lx_open(&x, 0);
    param_only(&x, GT_LAYER_F_ROOT_CHILD);
    lx_run(&x);
    const struct gt__agg_layer *b = row(&x.json, "blocks"), *n = row(&x.json, "Net");
    cr_assert(b && n);
    cr_assert_str_eq(b->parent, "Net");
    cr_assert_eq(n->bwd_nodes, 2, "both gradients in the root's sums");
    cr_assert_eq(n->bwd_us, 15.0);
    lx_close(&x);

    /* Without the flag (another root's child, or an older package) the
     * row stays where its path puts it. */
    lx_open(&x, 0);
    param_only(&x, 0);
    lx_run(&x);
    cr_assert_null(row(&x.json, "blocks")->parent);
    for (size_t i = 0; i < x.json.n; i++)
        cr_assert_str_neq(x.json.layers[i].path, "Net", "no row for the root");
    lx_close(&x);
}
