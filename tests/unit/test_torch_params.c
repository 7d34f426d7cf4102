/*
 * agent/torch_params.c and the recompute flag of agent/events.c, without
 * torch: the parameter table (TensorImpl* -> module, name), the learner of
 * where AccumulateGrad keeps its variable, driven with synthetic nodes
 * whose layout the test chooses, and the records the hooks write
 * (GT_SCOPE_F_RECOMPUTE on module scopes, GT_R_BWD_NODE_LAYER). The real
 * layouts are checked end to end in tests/e2e/t_torch_recipes.sh.
 *
 * The table and the learner are process-global; Criterion runs every test
 * in its own process, so each test starts from an empty table.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "agent/events.h"
#include "agent/internal.h"
#include "agent/ring.h"
#include "agent/torch.h"

#define IMPL(i) (0x7f1200000000ull + 0x140ull * (uint64_t)(i))

Test(torch_params, registered_parameter_is_found_others_are_not)
{
    uint32_t m = 0, n = 0;

    cr_assert_eq(gt__torch_params_any(), 0);
    cr_assert_eq(gt__torch_param_set(IMPL(1), 7, 8), 0);
    cr_assert_eq(gt__torch_param_set(IMPL(2), 9, 10), 0);
    cr_assert(gt__torch_params_any());
    cr_assert_eq(gt__torch_param_find(IMPL(1), &m, &n), 1);
    cr_assert_eq(m, 7);
    cr_assert_eq(n, 8);
    cr_assert_eq(gt__torch_param_find(IMPL(2), &m, &n), 1);
    cr_assert_eq(m, 9);
    cr_assert_eq(n, 10);
    cr_assert_eq(gt__torch_param_find(IMPL(3), &m, &n), 0);
    cr_assert_eq(gt__torch_param_find(0, &m, &n), 0);
    cr_assert_eq(gt__torch_param_set(0, 1, 1), -EINVAL);
}

Test(torch_params, forgetting_and_registering_again)
{
    uint32_t m, n;

    cr_assert_eq(gt__torch_param_set(IMPL(1), 7, 8), 0);
    cr_assert_eq(gt__torch_param_set(IMPL(1), 0, 0), 0);
    cr_assert_eq(gt__torch_param_find(IMPL(1), &m, &n), 0,
                 "a forgotten parameter is not found");
    cr_assert_eq(gt__torch_params_any(), 0);
    cr_assert_eq(gt__torch_param_set(IMPL(1), 11, 12), 0);
    cr_assert_eq(gt__torch_param_find(IMPL(1), &m, &n), 1);
    cr_assert_eq(m, 11, "the address now maps to the new owner");
    cr_assert_eq(gt__torch_param_set(IMPL(1), 13, 14), 0);
    cr_assert_eq(gt__torch_param_find(IMPL(1), &m, &n), 1);
    cr_assert_eq(m, 13, "registering again replaces");
    cr_assert_eq(n, 14);
    cr_assert_eq(gt__torch_param_set(IMPL(99), 0, 0), 0,
                 "forgetting an unknown address is harmless");
}

Test(torch_params, table_is_bounded)
{
    uint32_t m, n;
    int full = 0;

    for (int i = 1; i <= 20000 && !full; i++) {
        int rc = gt__torch_param_set(IMPL(i), 1, (uint32_t)i);
        if (rc == -ENOSPC)
            full = i;
        else
            cr_assert_eq(rc, 0);
    }
    cr_assert_eq(full, 8193, "8192 parameters fit, the next one does not");
    cr_assert_eq(gt__torch_param_find(IMPL(8192), &m, &n), 1);
    cr_assert_eq(n, 8192);
    cr_assert_eq(gt__torch_param_set(IMPL(5), 2, 3), 0,
                 "a known address can still be updated when full");
}

/* ------------------------------------------------------------ learner */

static uint64_t reg[8];

static int is_reg(uint64_t w, const void *ctx)
{
    (void)ctx;
    for (size_t i = 0; i < sizeof(reg) / sizeof(reg[0]); i++)
        if (reg[i] && reg[i] == w)
            return 1;
    return 0;
}

/* A node of n words: junk, the variable at var_w (0: none). */
static void node(uint64_t *w, int n, int var_w, uint64_t var)
{
    for (int i = 0; i < n; i++)
        w[i] = 0x5500000000ull + 8ull * (uint64_t)i;
    if (var_w)
        w[var_w] = var;
}

Test(torch_params, learner_reports_from_the_first_node_and_settles)
{
    struct gt__acc_learner l = {0};
    uint64_t w[GT__ACC_WORDS];

    for (int i = 0; i < 8; i++)
        reg[i] = IMPL(i + 1);
    for (int i = 0; i < GT__ACC_SETTLE; i++) {
        cr_assert_eq(l.state, GT__ACC_LEARNING);
        node(w, GT__ACC_WORDS, 49, reg[i]);
        cr_assert_eq(gt__acc_learn(&l, w, GT__ACC_WORDS, is_reg, NULL), 49,
                     "node %d is reported while learning", i);
    }
    cr_assert_eq(l.state, GT__ACC_SETTLED);
    node(w, GT__ACC_WORDS, 0, 0);
    cr_assert_eq(gt__acc_learn(&l, w, GT__ACC_WORDS, is_reg, NULL), 49,
                 "settled: the word, whatever the node holds");
}

Test(torch_params, learner_skips_leaves_whose_neighbour_holds_a_parameter)
{
    struct gt__acc_learner l = {0};
    uint64_t w[GT__ACC_WORDS];

    reg[0] = IMPL(1);
    reg[1] = IMPL(2);
    node(w, GT__ACC_WORDS, 58, reg[0]);
    cr_assert_eq(gt__acc_learn(&l, w, GT__ACC_WORDS, is_reg, NULL), 58);
    /* An input leaf: its own variable is unregistered, a neighbouring
     * object beyond its end holds a parameter. */
    node(w, GT__ACC_WORDS, 80, reg[1]);
    cr_assert_eq(gt__acc_learn(&l, w, GT__ACC_WORDS, is_reg, NULL), -1);
    node(w, GT__ACC_WORDS, 0, 0);
    cr_assert_eq(gt__acc_learn(&l, w, GT__ACC_WORDS, is_reg, NULL), -1,
                 "no registered pointer: nothing to report");
    cr_assert_eq(l.state, GT__ACC_LEARNING);
    cr_assert_eq(l.word, 58, "the candidate stands");
}

Test(torch_params, learner_restarts_on_a_lower_pointer_then_gives_up)
{
    struct gt__acc_learner l = {0};
    uint64_t w[GT__ACC_WORDS];

    reg[0] = IMPL(1);
    /* The first node seen was a leaf with a neighbour's pointer at 70. */
    node(w, GT__ACC_WORDS, 70, reg[0]);
    cr_assert_eq(gt__acc_learn(&l, w, GT__ACC_WORDS, is_reg, NULL), 70);
    node(w, GT__ACC_WORDS, 49, reg[0]);
    cr_assert_eq(gt__acc_learn(&l, w, GT__ACC_WORDS, is_reg, NULL), 49,
                 "a lower pointer replaces the candidate");
    cr_assert_eq(l.agree, 1);
    cr_assert_eq(l.contradictions, 1);
    for (int k = 40; l.state == GT__ACC_LEARNING && k > 30; k--) {
        node(w, GT__ACC_WORDS, k, reg[0]);
        gt__acc_learn(&l, w, GT__ACC_WORDS, is_reg, NULL);
    }
    cr_assert_eq(l.state, GT__ACC_FAILED,
                 "candidates that keep moving end learning");
    cr_assert_eq(l.contradictions, GT__ACC_GIVE_UP);
}

Test(torch_params, learner_fails_when_no_node_holds_a_parameter)
{
    struct gt__acc_learner l = {0};
    uint64_t w[GT__ACC_WORDS];

    reg[0] = IMPL(1);
    node(w, GT__ACC_WORDS, 0, 0);
    for (int i = 0; i < GT__ACC_NO_HIT - 1; i++)
        cr_assert_eq(gt__acc_learn(&l, w, GT__ACC_WORDS, is_reg, NULL), -1);
    cr_assert_eq(l.state, GT__ACC_LEARNING);
    gt__acc_learn(&l, w, GT__ACC_WORDS, is_reg, NULL);
    cr_assert_eq(l.state, GT__ACC_FAILED);
}

Test(torch_params, learner_reads_only_the_words_it_has)
{
    struct gt__acc_learner l = {0};
    uint64_t w[GT__ACC_WORDS];

    reg[0] = IMPL(1);
    node(w, GT__ACC_WORDS, 49, reg[0]);
    cr_assert_eq(gt__acc_learn(&l, w, 40, is_reg, NULL), -1,
                 "a short read that stops before the variable");
    cr_assert_eq(gt__acc_learn(&l, w, 50, is_reg, NULL), 49);
}

/*
 * Fake AccumulateGrad nodes in memory, each with its TensorImpl and
 * AutogradMeta pointing back to it (words 4 -> 8, as on 1.13): the lookup
 * path end to end.
 */
static uint64_t nodes[8][64], impls[8][16], metas[8][24];

static uint64_t fake_param(int i, int var_w)
{
    node(nodes[i], 64, var_w, (uint64_t)(uintptr_t)impls[i]);
    impls[i][4] = (uint64_t)(uintptr_t)metas[i];
    metas[i][8] = (uint64_t)(uintptr_t)nodes[i];
    return (uint64_t)(uintptr_t)impls[i];
}

Test(torch_params, lookup_learns_on_real_memory_then_reads_one_word)
{
    uint32_t m, n;

    cr_assert_eq(gt__torch_acc_lookup(nodes[0], &m, &n), 0,
                 "nothing registered: nothing looked at");
    for (int i = 0; i < 6; i++)
        cr_assert_eq(gt__torch_param_set(fake_param(i, 49), 100 + (uint32_t)i,
                                         200 + (uint32_t)i), 0);
    for (int i = 0; i < 6; i++) {
        cr_assert_eq(gt__torch_acc_lookup(nodes[i], &m, &n), 1, "node %d", i);
        cr_assert_eq(m, 100 + (uint32_t)i);
        cr_assert_eq(n, 200 + (uint32_t)i);
    }
    cr_assert_eq(gt__torch_acc_word(), 49);
    nodes[0][49] = 0x5500001234ull; /* an unregistered leaf */
    cr_assert_eq(gt__torch_acc_lookup(nodes[0], &m, &n), 0);
}

Test(torch_params, a_neighbours_parameter_is_no_evidence)
{
    uint32_t m, n;
    uint64_t p = fake_param(1, 49);

    cr_assert_eq(gt__torch_param_set(p, 5, 6), 0);
    /* Node 0 is a leaf whose words include node 1's parameter (as if read
     * past its end): that parameter points back to node 1, not to it. */
    node(nodes[0], 64, 30, p);
    cr_assert_eq(gt__torch_acc_lookup(nodes[0], &m, &n), 0);
    cr_assert_eq(gt__torch_acc_lookup(nodes[1], &m, &n), 1);
    cr_assert_eq(m, 5);
    cr_assert_eq(gt__torch_acc_word(), -1, "one node is not enough");
}

/* ------------------------------------------------------------ records */

struct rec_seen {
    uint16_t type;
    uint16_t flags;
    uint32_t a, b;
};

static int take(struct rec_seen *out, int max)
{
    struct gt__thread *t = gt__thread_self();
    const uint8_t *p;
    uint32_t len;
    int k = 0;

    while ((len = gt__ring_peek(t, &p)) > 0) {
        for (uint32_t off = 0; off < len;) {
            struct gt_rec h;
            memcpy(&h, p + off, sizeof(h));
            cr_assert_geq(h.size, 4);
            if (k < max) {
                out[k].type = h.type;
                if (h.type == GT_R_SCOPE_BEGIN) {
                    struct gt_r_scope_begin r;
                    memcpy(&r, p + off, sizeof(r));
                    out[k].flags = r.flags;
                    out[k].a = r.name;
                } else if (h.type == GT_R_SCOPE_END) {
                    struct gt_r_scope_end r;
                    memcpy(&r, p + off, sizeof(r));
                    out[k].flags = r.flags;
                    out[k].a = r.name;
                } else if (h.type == GT_R_BWD_NODE_LAYER) {
                    struct gt_r_bwd_node_layer r;
                    memcpy(&r, p + off, sizeof(r));
                    out[k].flags = (uint16_t)r.flags;
                    out[k].a = r.layer;
                    out[k].b = r.param;
                }
            }
            k++;
            off += h.size;
        }
        gt__ring_consume(t, len);
    }
    return k;
}

Test(torch_params, recompute_flag_is_set_inside_backward_and_repeated_on_end)
{
    struct rec_seen r[8];

    gt__ring_configure(4, 4);
    gt_capture_start();
    gt_module_begin(11, 0);           /* a forward: no flag */
    gt__bwd_depth = 1;          /* a backward node starts running */
    gt_module_begin(12, 0);           /* its recomputed forward */
    gt__bwd_depth = 0;          /* depth changes before the end */
    gt_module_end();
    gt__bwd_depth = 2;
    gt_module_end();                  /* ends the forward begun outside */
    gt__bwd_depth = 0;
    cr_assert_eq(take(r, 8), 4);
    cr_assert_eq(r[0].type, GT_R_SCOPE_BEGIN);
    cr_assert_eq(r[0].flags, 0);
    cr_assert_eq(r[1].type, GT_R_SCOPE_BEGIN);
    cr_assert_eq(r[1].a, 12);
    cr_assert_eq(r[1].flags, GT_SCOPE_F_RECOMPUTE);
    cr_assert_eq(r[2].type, GT_R_SCOPE_END);
    cr_assert_eq(r[2].a, 12);
    cr_assert_eq(r[2].flags, GT_SCOPE_F_RECOMPUTE, "end matches its begin");
    cr_assert_eq(r[3].type, GT_R_SCOPE_END);
    cr_assert_eq(r[3].a, 11);
    cr_assert_eq(r[3].flags, 0, "end matches its begin, not the depth now");
}

Test(torch_params, bwd_node_layer_record)
{
    struct rec_seen r[2];

    gt__ring_configure(4, 4);
    gt_capture_start();
    gt__torch_bwd_node_layer(21, 22);
    cr_assert_eq(take(r, 2), 1);
    cr_assert_eq(r[0].type, GT_R_BWD_NODE_LAYER);
    cr_assert_eq(r[0].a, 21);
    cr_assert_eq(r[0].b, 22);
    cr_assert_eq(r[0].flags, 0);
}
