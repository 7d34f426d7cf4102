/*
 * agent/torch_layout.c: learning where an autograd Node keeps its sequence
 * number and forward thread id, on synthetic nodes whose layout the test
 * chooses (the real layouts are checked end to end in tests/e2e/t_torch*).
 *
 * The learner's state is process-global and one-way (learning -> settled
 * or failed); Criterion runs every test in its own process, so each test
 * starts from a learner that has seen nothing.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "agent/torch.h"

/* A fake node: 16 words, like the first 128 bytes of a real one. */
struct fake_node {
    uint64_t w[16];
};

/*
 * Fills a node the way torch would, with the true fields at words
 * seq_w/tid_w, a topological number, a has_parent_ flag word (true) and
 * pointer-like junk elsewhere.
 */
static void fill(struct fake_node *n, int seq_w, int tid_w, uint64_t seq,
                 uint64_t tid, uint64_t topo, int topo_w, int flag_w)
{
    for (int i = 0; i < 16; i++)
        n->w[i] = 0x7f0000001000ull + 0x40ull * (uint64_t)i + seq * 0x1000;
    n->w[seq_w] = seq;
    n->w[tid_w] = tid;
    n->w[topo_w] = topo;
    n->w[flag_w] = 1;
}

Test(torch_layout, settles_from_fresh_nodes_in_the_forward)
{
    struct fake_node n;
    /* 2.x-like layout: seq +16, topo +24, has_parent +32, tid +40. */
    for (uint64_t seq = 0; seq < 16; seq++) {
        gt__torch_layout_note_created(seq, 1);
        fill(&n, 2, 5, seq, 1, seq % 3, 3, 4);
        n.w[4] = 0; /* a fresh node has no parent yet */
        gt__torch_layout_note_edge(&n, seq, 1);
    }
    int so, to;
    cr_assert_eq(gt__torch_layout_offsets(&so, &to), 0);
    cr_assert_eq(so, 16);
    cr_assert_eq(to, 40);
    cr_assert_not(gt__torch_layout_learning());

    uint64_t seq, tid;
    fill(&n, 2, 5, 1234, 7, 2, 3, 4);
    cr_assert_eq(gt__torch_layout_read(&n, &seq, &tid), 1);
    cr_assert_eq(seq, 1234);
    cr_assert_eq(tid, 7);
}

Test(torch_layout, fresh_node_evidence_with_a_rival_does_not_settle)
{
    struct fake_node n;
    /* A second word always equal to seq: two perfect pairs, no decision. */
    for (uint64_t seq = 0; seq < 40; seq++) {
        gt__torch_layout_note_created(seq, 1);
        fill(&n, 3, 6, seq, 1, seq, 4, 5);
        n.w[5] = 0;
        gt__torch_layout_note_edge(&n, seq, 1);
    }
    int so, to;
    cr_assert_eq(gt__torch_layout_offsets(&so, &to), -1);
    cr_assert(gt__torch_layout_learning());
}

/* Fresh nodes whose topological number is 1, as the forward thread's id,
 * for a while: a known layout settles at the rival's first miss. */
static int settled_after(int seq_w, int tid_w, int topo_w, int flag_w,
                         uint64_t n_nodes)
{
    struct fake_node n;
    int so, to;
    for (uint64_t seq = 0; seq < n_nodes; seq++) {
        gt__torch_layout_note_created(seq, 1);
        fill(&n, seq_w, tid_w, seq, 1, seq < 14 ? 1 : 2 + seq, topo_w, flag_w);
        n.w[flag_w] = 0;
        gt__torch_layout_note_edge(&n, seq, 1);
        if (gt__torch_layout_offsets(&so, &to) == 0) {
            cr_assert_eq(so, 8 * seq_w);
            cr_assert_eq(to, 8 * tid_w);
            return (int)seq + 1;
        }
    }
    return 0;
}

Test(torch_layout, a_known_layout_settles_when_its_rival_first_fails)
{
    cr_assert_eq(settled_after(2, 5, 3, 4, 20), 15, "2.15's +16/+40");
}

Test(torch_layout, an_unknown_layout_waits_for_a_clear_majority)
{
    /* The same evidence at offsets no torch is known to use: the rival
     * holds 14 of 20, more than half. */
    cr_assert_eq(settled_after(7, 10, 8, 9, 20), 0);
}

Test(torch_layout, backward_reports_only_unanimous_values_then_settles)
{
    struct fake_node n;
    /* 1.13's seq +24 and tid +48, with a topological number placed before
     * them (+16, so a scan in offset order meets it first) and a true
     * has_parent_ at +40. The forward created seqs 0..19 on torch thread
     * 1; no fresh-node evidence. */
    for (uint64_t seq = 0; seq < 20; seq++)
        gt__torch_layout_note_created(seq, 1);

    /* Backward, newest first; the topological number is a small created
     * number too, equal to seq for the first node. */
    int reported = 0;
    for (uint64_t seq = 19; seq + 1 > 0 && seq < 20; seq--) {
        uint64_t topo = seq == 19 ? 19 : seq % 4;
        fill(&n, 3, 6, seq, 1, topo, 2, 5);
        uint64_t s, t;
        if (gt__torch_layout_read(&n, &s, &t)) {
            cr_assert_eq(s, seq, "reported seq %lu for node %lu",
                         (unsigned long)s, (unsigned long)seq);
            cr_assert_eq(t, 1);
            reported++;
        } else {
            cr_assert_eq(s, UINT64_MAX);
        }
    }
    /* Wrong candidates die as the pass goes on: most nodes are reported. */
    cr_assert_geq(reported, 15, "only %d of 20 reported", reported);
    gt__torch_layout_pass_done();

    /* has_parent_ (always 1) ties with thread_id_ (1): the known 1.13
     * layout decides. */
    int so, to;
    cr_assert_eq(gt__torch_layout_offsets(&so, &to), 0);
    cr_assert_eq(so, 24);
    cr_assert_eq(to, 48);
}

Test(torch_layout, a_second_thread_breaks_the_flag_tie_for_unknown_layouts)
{
    struct fake_node n;
    /* Unknown layout: seq +56, flag +64, tid +72. Two forward threads. */
    for (uint64_t seq = 0; seq < 12; seq++) {
        gt__torch_layout_note_created(seq, 1);
        gt__torch_layout_note_created(seq, 2);
    }
    for (uint64_t seq = 0; seq < 12; seq++)
        for (uint64_t tid = 1; tid <= 2; tid++) {
            fill(&n, 7, 9, seq, tid, 0, 10, 8);
            n.w[10] = 0xdeadbeef00ull + seq; /* no usable topo here */
            uint64_t s, t;
            if (gt__torch_layout_read(&n, &s, &t)) {
                cr_assert_eq(s, seq);
                cr_assert_eq(t, tid);
            }
        }
    gt__torch_layout_pass_done();
    int so, to;
    cr_assert_eq(gt__torch_layout_offsets(&so, &to), 0);
    cr_assert_eq(so, 56);
    cr_assert_eq(to, 72);
}

Test(torch_layout, gives_up_and_reports_nothing_when_nothing_matches)
{
    struct fake_node n;
    for (uint64_t seq = 0; seq < 10; seq++)
        gt__torch_layout_note_created(seq, 1);
    /* Nodes whose words never form a created (seq, tid). */
    for (int pass = 0; pass < 3; pass++) {
        for (uint64_t i = 0; i < 10; i++) {
            for (int w = 0; w < 16; w++)
                n.w[w] = 0x5500000000ull + i * 131 + (uint64_t)w;
            uint64_t s, t;
            cr_assert_eq(gt__torch_layout_read(&n, &s, &t), 0);
            cr_assert_eq(s, UINT64_MAX);
        }
        gt__torch_layout_pass_done();
    }
    int so, to;
    cr_assert_eq(gt__torch_layout_offsets(&so, &to), -1);
    cr_assert_not(gt__torch_layout_learning(), "still learning after 3 "
                  "passes without any surviving candidate");
    /* Failed for good: even a node with the 1.13 layout stays unknown. */
    fill(&n, 3, 6, 4, 1, 0, 4, 5);
    uint64_t s, t;
    cr_assert_eq(gt__torch_layout_read(&n, &s, &t), 0);
    cr_assert_eq(s, UINT64_MAX);
}
