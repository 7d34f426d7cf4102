/*
 * Trigger engine (agent/trigger.c): glob matching with ancestors, and the
 * window state machine driven
 * through the same hooks the torch interposer calls (gt_module_begin/end,
 * gt_node_created, gt_bwd_node_begin/end, gt_bwd_pass_begin/end), checking
 * where capture turns on and off. The spec parser (common/trigspec.c) is
 * tested in test_control.c.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/events.h"
#include "agent/internal.h"
#include "agent/trigger.h"

Test(agent_trigger, glob_matches_layer_or_ancestor)
{
    const char *p = "layers.17.mlp.up_proj";

    cr_assert(gt__trig_glob_match("layers.17", p, strlen(p), 1));
    cr_assert(gt__trig_glob_match("layers.1?.mlp", p, strlen(p), 1));
    cr_assert(gt__trig_glob_match("layers.17.mlp.up_proj", p, strlen(p), 0));
    cr_assert_not(gt__trig_glob_match("layers.1", p, strlen(p), 1),
                  "a prefix that is not a whole path component");
    cr_assert_not(gt__trig_glob_match("layers.17", p, strlen(p), 0),
                  "without ancestors only the path itself");
    cr_assert_not(gt__trig_glob_match("layers.2?", p, strlen(p), 1));
}

/* One forward + backward of a layer "blk" (two nodes) inside "net". */
static void iteration(uint32_t net, uint32_t blk, uint64_t *seq, int *on_in_bwd)
{
    uint64_t s0 = (*seq)++, s1 = (*seq)++, s2 = (*seq)++;

    gt_module_begin(net, 0);
    gt_node_created(s0, 1);          /* net's own node, before blk */
    gt_module_begin(blk, 0);
    gt_node_created(s1, 1);
    gt_node_created(s2, 1);
    gt_module_end();
    gt_module_end();
    gt_bwd_pass_begin();
    gt_bwd_node_begin(0, s2, 1);
    on_in_bwd[0] = gt_capture_active();
    gt_bwd_node_end(s2, 1);
    gt_bwd_node_begin(0, s1, 1);
    gt_bwd_node_end(s1, 1);
    on_in_bwd[1] = gt_capture_active(); /* after blk's last node: closed */
    gt_bwd_node_begin(0, s0, 1);
    on_in_bwd[2] = gt_capture_active();
    gt_bwd_node_end(s0, 1);
    gt_bwd_pass_end();
}

Test(agent_trigger, backward_window_spans_exactly_the_layers_nodes)
{
    uint32_t net = gt_intern("Net"), blk = gt_intern("blocks.3");
    uint64_t seq = 100;
    int on[3];
    struct gt__trig_info info;
    const char *spec = "layer=blocks.3,phase=backward,iteration=2";

    cr_assert_eq(gt__trig_arm(spec, strlen(spec)), 0);
    for (int it = 0; it < 4; it++) {
        iteration(net, blk, &seq, on);
        if (it == 2) {
            cr_assert(on[0], "open at the layer's first backward node");
            cr_assert_not(on[1], "closed after its last node");
            cr_assert_not(on[2], "other layers' nodes are outside");
        } else {
            cr_assert_not(on[0] || on[1] || on[2], "iteration %d has no window", it);
        }
    }
    gt__trig_info(&info);
    cr_assert_eq(info.windows, 1);
    cr_assert_eq(info.armed, 0, "count=1: disarmed after its window");
    cr_assert_eq(gt__trig_iteration(), 4);
}

/* Net checkpoints "ckpt.blk": its forward runs under no_grad (no nodes),
 * and its backward node recomputes it, then runs the recomputed nodes in
 * a nested pass. on: capture before the recompute, in it, in the inner
 * backward, after the last recomputed node. */
static void checkpointed(uint32_t net, uint32_t blk, uint64_t *seq, int *on)
{
    uint64_t s0 = (*seq)++, s1 = (*seq)++;

    gt_module_begin(net, 0);
    gt_module_begin(blk, 0);
    gt_module_end();
    gt_node_created(s0, 1); /* CheckpointFunctionBackward, in Net */
    gt_module_end();
    gt_bwd_pass_begin();
    gt_bwd_node_begin(0, s0, 1);
    on[0] = gt_capture_active();
    gt_module_begin(blk, 0); /* the recompute */
    on[1] = gt_capture_active();
    gt_node_created(s1, 1);
    gt_module_end();
    gt_bwd_pass_begin();
    gt_bwd_node_begin(0, s1, 1);
    on[2] = gt_capture_active();
    gt_bwd_node_end(s1, 1);
    on[3] = gt_capture_active();
    gt_bwd_pass_end();
    gt_bwd_node_end(s0, 1);
    gt_bwd_pass_end();
}

Test(agent_trigger, backward_window_holds_the_layers_recompute)
{
    uint32_t net = gt_intern("Net"), blk = gt_intern("ckpt.blk");
    uint64_t seq = 10;
    int on[4];
    struct gt__trig_info info;
    const char *spec = "layer=ckpt.blk,phase=backward,iteration=1";

    cr_assert_eq(gt__trig_arm(spec, strlen(spec)), 0);
    for (int it = 0; it < 3; it++) {
        checkpointed(net, blk, &seq, on);
        if (it == 1) {
            cr_assert_not(on[0], "the checkpoint node is Net's");
            cr_assert(on[1], "open at the recompute");
            cr_assert(on[2], "still open for the recomputed nodes");
            cr_assert_not(on[3], "closed after the last of them");
        } else {
            cr_assert_not(on[0] || on[1] || on[2] || on[3], "iteration %d", it);
        }
    }
    gt__trig_info(&info);
    cr_assert_eq(info.windows, 1, "one window for the pass");
    cr_assert_eq(gt__trig_iteration(), 3, "nested passes count once");
}

Test(agent_trigger, non_reentrant_recompute_leaves_the_count_to_the_forward)
{
    uint32_t blk = gt_intern("ckpt.blk");
    const char *spec = "layer=ckpt.blk,phase=backward,iteration=1";
    int on_after;

    cr_assert_eq(gt__trig_arm(spec, strlen(spec)), 0);
    gt_bwd_pass_begin(); /* iteration 0 */
    gt_bwd_pass_end();
    /* use_reentrant=False: the forward keeps its nodes; the first of them
     * recomputes the segment, whose nodes are never run. */
    gt_module_begin(blk, 0);
    gt_node_created(1, 1);
    gt_node_created(2, 1);
    gt_module_end();
    gt_bwd_pass_begin();
    gt_bwd_node_begin(0, 2, 1);
    cr_assert(gt_capture_active());
    gt_module_begin(blk, 0);
    gt_node_created(3, 1);
    gt_module_end();
    gt_bwd_node_end(2, 1);
    gt_bwd_node_begin(0, 1, 1);
    gt_bwd_node_end(1, 1);
    on_after = gt_capture_active();
    gt_bwd_pass_end();
    cr_assert_not(on_after, "closed after the forward's last node");
}

Test(agent_trigger, forward_window_and_count)
{
    uint32_t net = gt_intern("Net"), blk = gt_intern("blocks.3");
    uint64_t seq = 1;
    int on[3];
    struct gt__trig_info info;
    const char *spec = "layer=blocks.?,phase=forward,count=2";

    cr_assert_eq(gt__trig_arm(spec, strlen(spec)), 0);
    for (int it = 0; it < 4; it++) {
        gt_module_begin(net, 0);
        cr_assert_not(gt_capture_active());
        gt_module_begin(blk, 0);
        /* next = iteration 1; count=2: iterations 1 and 2. */
        cr_assert_eq(gt_capture_active(), it == 1 || it == 2, "iteration %d", it);
        gt_module_end();
        cr_assert_not(gt_capture_active(), "closed at the module's exit");
        gt_module_end();
        gt_bwd_pass_begin();
        gt_bwd_pass_end();
    }
    (void)seq;
    (void)on;
    gt__trig_info(&info);
    cr_assert_eq(info.windows, 2);
    cr_assert_eq(info.armed, 0);
}

Test(agent_trigger, layer_that_never_runs_stays_armed)
{
    uint32_t net = gt_intern("Net"), blk = gt_intern("blocks.3");
    uint64_t seq = 1;
    int on[3];
    struct gt__trig_info info;
    const char *spec = "layer=decoder,phase=both";

    cr_assert_eq(gt__trig_arm(spec, strlen(spec)), 0);
    for (int it = 0; it < 3; it++) {
        iteration(net, blk, &seq, on);
        cr_assert_not(on[0] || on[1] || on[2]);
    }
    gt__trig_info(&info);
    cr_assert_eq(info.windows, 0);
    cr_assert_eq(info.armed, 1);
    gt__trig_clear();
    gt__trig_info(&info);
    cr_assert_eq(info.armed, 0);
}

Test(agent_trigger, other_ranks_and_pids_are_ignored)
{
    const char *spec = "layer=a,ranks=5";
    const char *spec2 = "layer=a,pids=1";

    gt__trig_env_rank(2);
    cr_assert_eq(gt__trig_arm(spec, strlen(spec)), 1);
    cr_assert_eq(gt__trig_arm(spec2, strlen(spec2)), getpid() == 1 ? 0 : 1);
    /* The environment is read once, at start: a later setenv (racing the
     * application's own) changes nothing. */
    setenv("RANK", "5", 1);
    cr_assert_eq(gt__trig_arm(spec, strlen(spec)), 1);
    gt__trig_env_rank(5);
    cr_assert_eq(gt__trig_arm(spec, strlen(spec)), 0);
}

Test(agent_trigger, running_capture_is_left_alone)
{
    uint32_t net = gt_intern("Net"), blk = gt_intern("blocks.3");
    uint64_t seq = 1;
    int on[3];
    const char *spec = "layer=blocks.3";

    gt_capture_start();
    cr_assert_eq(gt__trig_arm(spec, strlen(spec)), 0);
    for (int it = 0; it < 3; it++) {
        iteration(net, blk, &seq, on);
        cr_assert(on[0] && on[1] && on[2], "a window must not stop a full capture");
    }
}

/*
 * A program without autograd nodes marks its backward per layer (agent/
 * nvtx.c calls these for NVTX ranges): backward and both windows open at
 * the layer's backward range and close at its end, in the iteration the
 * passes count.
 */
static void ranged_iteration(uint32_t blk, uint32_t other, int *on)
{
    gt__layer_begin(blk, 0);
    on[0] = gt_capture_active();
    gt__layer_end();
    gt_bwd_pass_begin();
    gt__layer_bwd_begin(other);
    on[1] = gt_capture_active();
    gt__layer_bwd_end();
    gt__layer_bwd_begin(blk);
    on[2] = gt_capture_active();
    cr_assert_eq(gt__current_layer(), 0, "a backward range is no node's layer");
    gt__layer_bwd_end();
    on[3] = gt_capture_active();
    gt_bwd_pass_end();
}

Test(agent_trigger, backward_ranges_open_backward_and_both_windows)
{
    uint32_t blk = gt_intern("block.2"), other = gt_intern("block.3");
    const char *specs[] = {"layer=block.2,phase=backward,iteration=1",
                           "layer=block.2,phase=both,iteration=2"};
    struct gt__trig_info info;
    int on[4];

    for (int i = 0; i < 2; i++)
        cr_assert_eq(gt__trig_arm(specs[i], strlen(specs[i])), 0);
    for (int it = 0; it < 4; it++) {
        ranged_iteration(blk, other, on);
        cr_assert_eq(on[0], it == 2, "forward of iteration %d", it);
        cr_assert_not(on[1], "another layer's range, iteration %d", it);
        cr_assert_eq(on[2], it == 1 || it == 2, "block.2's range, iteration %d", it);
        cr_assert_not(on[3], "closed at the range's end, iteration %d", it);
    }
    gt__trig_info(&info);
    cr_assert_eq(info.windows, 2);
    cr_assert_eq(info.armed, 0);
}

/*
 * Iterations are steps once the program announces them: a step of two
 * micro-batches (two passes) is one iteration, and its window has one
 * backward segment per pass; pass=1 keeps only the second.
 */
static void step_of_two(uint32_t net, uint32_t blk, uint64_t *seq, int *on)
{
    iteration(net, blk, seq, on);
    iteration(net, blk, seq, on + 3);
    gt_step(0);
}

Test(agent_trigger, a_step_of_several_passes_is_one_iteration)
{
    uint32_t net = gt_intern("Net"), blk = gt_intern("blocks.3");
    uint64_t seq = 1;
    int on[6];
    struct gt__trig_info info;
    const char *spec = "layer=blocks.3,iteration=1";

    gt_step_expect();
    cr_assert_eq(gt__trig_arm(spec, strlen(spec)), 0);
    for (int it = 0; it < 3; it++) {
        step_of_two(net, blk, &seq, on);
        cr_assert_eq(on[0], it == 1, "step %d, first pass", it);
        cr_assert_eq(on[3], it == 1, "step %d, second pass", it);
        cr_assert_not(on[1] || on[2] || on[4] || on[5]);
    }
    gt__trig_info(&info);
    cr_assert_eq(info.windows, 1);
    cr_assert_eq(gt__trig_iteration(), 3, "three steps, six passes");
}

Test(agent_trigger, pass_selects_one_pass_of_the_step)
{
    uint32_t net = gt_intern("Net"), blk = gt_intern("blocks.3");
    uint64_t seq = 1;
    int on[6];
    const char *spec = "layer=blocks.3,iteration=0,pass=1";

    gt_step_expect();
    cr_assert_eq(gt__trig_arm(spec, strlen(spec)), 0);
    step_of_two(net, blk, &seq, on);
    cr_assert_not(on[0], "pass 0 of step 0 is not selected");
    cr_assert(on[3], "pass 1 of step 0 is");
}

Test(agent_trigger, extra_passes_are_no_iterations)
{
    uint32_t net = gt_intern("Net"), blk = gt_intern("blocks.3");
    uint64_t seq = 1;
    int on[3];

    /* Without steps: a pass flagged extra (autograd.grad, a retained
     * graph's second pass) between two counted ones adds no iteration. */
    iteration(net, blk, &seq, on);
    gt__bwd_pass_begin(1);
    gt_bwd_pass_end();
    cr_assert_eq(gt__trig_iteration(), 1);
    iteration(net, blk, &seq, on);
    cr_assert_eq(gt__trig_iteration(), 2);
}

Test(agent_trigger, unannounced_steps_keep_the_numbering)
{
    uint32_t net = gt_intern("Net"), blk = gt_intern("blocks.3");
    uint64_t seq = 1;
    int on[3];
    const char *spec = "layer=blocks.3,iteration=1";

    /* A C program marking a step after each pass, without gt_step_expect:
     * the first step confirms the pass's iteration instead of adding one. */
    cr_assert_eq(gt__trig_arm(spec, strlen(spec)), 0);
    for (int it = 0; it < 3; it++) {
        iteration(net, blk, &seq, on);
        gt_step(0);
        cr_assert_eq(on[0], it == 1, "iteration %d", it);
        cr_assert_eq(gt__trig_iteration(), (uint64_t)it + 1);
    }
}

Test(agent_trigger, iteration_zero_armed_at_start_is_step_zero)
{
    uint32_t net = gt_intern("Net"), blk = gt_intern("blocks.3");
    uint64_t seq = 1;
    int on[6];
    const char *spec = "layer=blocks.3,iteration=0";

    gt_step_expect();
    cr_assert_eq(gt__trig_arm(spec, strlen(spec)), 0);
    step_of_two(net, blk, &seq, on);
    cr_assert(on[0] && on[3], "step 0's passes");
    /* Once a forward has begun, iteration=<current> means the next one. */
    gt_module_begin(net, 0);
    gt_module_end();
    cr_assert_eq(gt__trig_arm(spec, strlen(spec)), 0);
    step_of_two(net, blk, &seq, on);
    cr_assert_not(on[0] || on[3], "step 1 had begun when it was armed");
    step_of_two(net, blk, &seq, on);
    cr_assert(on[0] && on[3], "so step 2 has the window");
}

Test(agent_trigger, ranks_wait_for_a_late_rank)
{
    uint32_t net = gt_intern("Net"), blk = gt_intern("blocks.3");
    uint64_t seq = 1;
    int on[3];
    struct gt__trig_info info;
    const char *one = "layer=blocks.3,iteration=0,ranks=1";
    const char *zero = "layer=blocks.3,iteration=0,ranks=0";

    unsetenv("RANK");
    cr_assert_eq(gt__trig_arm(one, strlen(one)), 0, "armed while the rank is unknown");
    cr_assert_eq(gt__trig_arm(zero, strlen(zero)), 0);
    iteration(net, blk, &seq, on);
    cr_assert_not(on[0], "no window before the rank is known");
    gt__trig_set_rank(1);
    gt__trig_info(&info);
    cr_assert_eq(info.armed, 1, "ranks=0 dropped for rank 1");
    iteration(net, blk, &seq, on);
    cr_assert(on[0], "ranks=1 fires on rank 1");
    gt__trig_info(&info);
    cr_assert_eq(info.windows, 1);
}

/*
 * torch.compile(Net) (issue 26): blocks.0 and blocks.1 run inside one
 * compiled forward region, whose map names them (paths as the bare root
 * names them), and the graph's backward is one CompiledFunctionBackward
 * node, created before the region. on: capture in the forward region, in
 * the node, after it.
 */
static void compiled_iteration(uint32_t net, uint32_t fmap, uint32_t bmap,
                               uint64_t *seq, int *on)
{
    uint64_t s0 = (*seq)++;

    gt_module_begin(net, 0);
    gt_node_created(s0, 1); /* CompiledFunctionBackward */
    gt_compiled_begin(fmap);
    on[0] = gt_capture_active();
    gt_compiled_end(fmap);
    on[1] = gt_capture_active();
    gt_module_end();
    gt_bwd_pass_begin();
    gt_bwd_node_begin(0, s0, 1);
    gt_compiled_begin(bmap);
    on[2] = gt_capture_active();
    gt_compiled_end(bmap);
    gt_bwd_node_end(s0, 1);
    on[3] = gt_capture_active();
    gt_bwd_pass_end();
}

static void compiled_maps(uint32_t *fmap, uint32_t *bmap)
{
    uint32_t up0 = gt_intern("blocks.0.up"), b1 = gt_intern("blocks.1");
    *fmap = gt_compiled_graph(gt_intern("code"), 0, 0, 1, 0, 2);
    gt_compiled_call(*fmap, 0, gt_intern("k0"), gt_intern("k0"), up0, 0, 1, 0);
    gt_compiled_call(*fmap, 1, gt_intern("k1"), gt_intern("k1"), b1, 0, 1, 0);
    *bmap = gt_compiled_graph(gt_intern("code"), 0, 0, 2, 0, 1);
    gt_compiled_call(*bmap, 0, gt_intern("k2"), gt_intern("k2"), up0, 0, 2, 0);
}

Test(agent_trigger, backward_trigger_inside_a_compiled_graph_spans_its_node)
{
    uint32_t net = gt_intern("Net"), fmap, bmap;
    uint64_t seq = 500;
    int on[4];
    const char *spec = "layer=blocks.0,phase=backward,iteration=1";

    gt_layer_info(net, net, GT_LAYER_F_BARE_ROOT);
    compiled_maps(&fmap, &bmap);
    cr_assert_eq(gt__trig_arm(spec, strlen(spec)), 0);
    uint64_t it0 = gt__trig_iteration();
    for (int it = 0; it < 3; it++) {
        compiled_iteration(net, fmap, bmap, &seq, on);
        int want = gt__trig_iteration() - 1 == it0 + 1;
        cr_assert_not(on[0] || on[1], "no forward segment");
        cr_assert_eq(on[2], want, "iteration %d: the compiled node is blocks.0's", it);
        cr_assert_not(on[3], "closed after the node");
    }
}

Test(agent_trigger, forward_trigger_inside_a_compiled_graph_spans_its_region)
{
    uint32_t net = gt_intern("Net"), fmap, bmap;
    uint64_t seq = 900;
    int on[4];
    const char *spec = "layer=blocks.1,phase=forward,iteration=next";

    gt_layer_info(net, net, GT_LAYER_F_BARE_ROOT);
    compiled_maps(&fmap, &bmap);
    cr_assert_eq(gt__trig_arm(spec, strlen(spec)), 0);
    compiled_iteration(net, fmap, bmap, &seq, on);
    cr_assert_not(on[0], "armed for the next iteration");
    compiled_iteration(net, fmap, bmap, &seq, on);
    cr_assert(on[0], "open in the region that runs blocks.1");
    cr_assert_not(on[1] || on[2] || on[3], "closed at its end");
}

Test(agent_trigger, a_compiled_blocks_layers_hang_from_its_name)
{
    /* Each block compiled on its own: one graph, paths relative to the
     * block, whose scope is open around the region. */
    uint32_t net = gt_intern("Net"), b0 = gt_intern("blocks.0"),
             b1 = gt_intern("blocks.1"), up = gt_intern("up");
    const char *spec = "layer=blocks.1.up,phase=forward,iteration=next";
    int on[2];

    gt_layer_info(net, net, GT_LAYER_F_BARE_ROOT);
    uint32_t m = gt_compiled_graph(gt_intern("code"), 0, 0, 1, 0, 1);
    gt_compiled_call(m, 0, gt_intern("k0"), gt_intern("k0"), up, 0, 1, 0);
    cr_assert_eq(gt__trig_arm(spec, strlen(spec)), 0);
    for (int it = 0; it < 2; it++) {
        gt_module_begin(net, 0);
        gt_module_begin(b0, 0);
        gt_compiled_begin(m);
        on[0] = gt_capture_active();
        gt_compiled_end(m);
        gt_module_end();
        gt_module_begin(b1, 0);
        gt_compiled_begin(m);
        on[1] = gt_capture_active();
        gt_compiled_end(m);
        gt_module_end();
        gt_module_end();
        gt_bwd_pass_begin();
        gt_bwd_pass_end();
        cr_assert_not(on[0], "blocks.0's region holds no blocks.1.up");
        cr_assert_eq(on[1], it == 1, "iteration %d", it);
    }
}

/* A layer's parameters' AccumulateGrad nodes carry no forward of their
 * own; the engine may run one after the layer's last counted node (a
 * Linear's weight, after its TBackward). It resumes the layer's window;
 * another layer's does not. */
Test(agent_trigger, accumulate_grad_after_the_last_node_is_the_layers)
{
    uint32_t blk = gt_intern("blocks.3"), fc = gt_intern("blocks.3.fc"),
             other = gt_intern("blocks.2.fc");
    const char *spec = "layer=blocks.3,phase=backward,iteration=0";
    int in_acc, in_other;
    struct gt__trig_info info;

    cr_assert_eq(gt__trig_arm(spec, strlen(spec)), 0);
    gt_module_begin(blk, 0);
    gt_node_created(1, 1);
    gt_node_created(2, 1);
    gt_module_end();
    gt_bwd_pass_begin();
    gt_bwd_node_begin(0, 2, 1);
    gt_bwd_node_end(2, 1);
    gt_bwd_node_begin(0, 1, 1);
    gt_bwd_node_end(1, 1);
    cr_assert_not(gt_capture_active(), "closed after the counted nodes");
    gt__bwd_node_begin(0, UINT64_MAX, 1, fc); /* blocks.3.fc.weight's */
    in_acc = gt_capture_active();
    gt__bwd_node_end(UINT64_MAX, 1, fc);
    /* Open until the next node not the layer's (its bias's may follow). */
    gt__bwd_node_begin(0, UINT64_MAX, 1, other);
    in_other = gt_capture_active();
    gt__bwd_node_end(UINT64_MAX, 1, other);
    gt_bwd_pass_end();
    cr_assert(in_acc, "a sub-layer's parameter gradient is in the window");
    cr_assert_not(in_other, "another layer's is not");
    gt__trig_info(&info);
    cr_assert_eq(info.windows, 1);
}

/* A glob over two layers with a third layer's nodes between them: the
 * window holds only the matching layers' nodes, a segment each. */
Test(agent_trigger, other_layers_nodes_pause_the_window)
{
    uint32_t a = gt_intern("h.0.mlp"), attn = gt_intern("h.1.attn"),
             b = gt_intern("h.1.mlp");
    const char *spec = "layer=h.*.mlp,phase=backward,iteration=0";
    int on[4];

    cr_assert_eq(gt__trig_arm(spec, strlen(spec)), 0);
    gt_module_begin(a, 0);
    gt_node_created(1, 1);
    gt_module_end();
    gt_module_begin(attn, 0);
    gt_node_created(2, 1);
    gt_module_end();
    gt_module_begin(b, 0);
    gt_node_created(3, 1);
    gt_node_created(4, 1);
    gt_module_end();
    gt_bwd_pass_begin();
    gt_bwd_node_begin(0, 4, 1);
    on[0] = gt_capture_active();
    gt_bwd_node_end(4, 1);
    gt_bwd_node_begin(0, 2, 1); /* h.1.attn's, between the two MLPs */
    on[1] = gt_capture_active();
    /* A matching node running inside it (a nested pass) resumes. */
    gt_bwd_node_begin(0, 3, 1);
    on[2] = gt_capture_active();
    gt_bwd_node_end(3, 1);
    gt_bwd_node_end(2, 1);
    gt_bwd_node_begin(0, 1, 1);
    on[3] = gt_capture_active();
    gt_bwd_node_end(1, 1);
    cr_assert_not(gt_capture_active(), "closed after the last counted node");
    gt_bwd_pass_end();
    cr_assert(on[0] && on[2] && on[3], "the MLPs' nodes: %d %d %d", on[0], on[2], on[3]);
    cr_assert_not(on[1], "the attention's node is outside the window");
}

/* A gradient penalty: autograd.grad(create_graph=True) runs the layer's
 * nodes, which create the double backward's nodes outside any module;
 * they belong to the layer and run in the step's counted pass. */
Test(agent_trigger, double_backward_nodes_belong_to_the_layer_that_made_them)
{
    uint32_t blk = gt_intern("blocks.1"), net = gt_intern("Net");
    const char *spec = "layer=blocks.1,phase=backward,iteration=0";
    int on_dbl, on_net;

    gt_step_expect();
    cr_assert_eq(gt__trig_arm(spec, strlen(spec)), 0);
    gt_module_begin(net, 0);
    gt_node_created(1, 1);
    gt_module_begin(blk, 0);
    gt_node_created(2, 1);
    gt_module_end();
    gt_module_end();
    gt__bwd_pass_begin(1); /* autograd.grad: an extra pass */
    gt_bwd_node_begin(0, 1, 1);
    gt_node_created(11, 1); /* Net's node's double backward */
    gt_bwd_node_end(1, 1);
    gt_bwd_node_begin(0, 2, 1);
    gt_node_created(12, 1); /* blocks.1's */
    gt_bwd_node_end(2, 1);
    gt_bwd_pass_end();
    gt_bwd_pass_begin(); /* (loss + penalty).backward() */
    gt_bwd_node_begin(0, 11, 1);
    on_net = gt_capture_active();
    gt_bwd_node_end(11, 1);
    gt_bwd_node_begin(0, 12, 1);
    on_dbl = gt_capture_active();
    gt_bwd_node_end(12, 1);
    gt_bwd_node_begin(0, 2, 1);
    gt_bwd_node_end(2, 1);
    gt_bwd_pass_end();
    gt_step(0);
    cr_assert(on_dbl, "blocks.1's double backward node is in its window");
    cr_assert_not(on_net, "Net's is not");
}

/* A layer applied with stacked parameters names its i-th application
 * "layer[i]": an index after a name is literal in a trigger's glob, a
 * bracket after a dot is still a class. */
Test(agent_trigger, an_application_index_is_literal_in_a_glob)
{
    const char *p = "blocks[3].fc1", *q = "blocks3.fc1", *r = "layers.1";
    cr_assert(gt__trig_glob_match("blocks[3]", p, strlen(p), 1));
    cr_assert_not(gt__trig_glob_match("blocks[3]", q, strlen(q), 1),
                  "not the class [3]");
    cr_assert(gt__trig_glob_match("blocks[*].fc1", p, strlen(p), 0),
              "[*]: any application");
    cr_assert_not(gt__trig_glob_match("blocks[*].fc1", q, strlen(q), 0));
    cr_assert(gt__trig_glob_match("blocks[3]*", p, strlen(p), 0));
    cr_assert(gt__trig_glob_match("layers.[12]", r, strlen(r), 0),
              "after a dot a class as before");
    cr_assert_not(gt__trig_glob_match("blocks[4]", p, strlen(p), 1));
}
