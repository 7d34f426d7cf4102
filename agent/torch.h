/*
 * Shared between agent/torch.c (the interposed libtorch functions) and
 * agent/torch_layout.c (run-time discovery of where a torch::autograd::Node
 * keeps its sequence number and forward thread id). Private to those two
 * files; the rest of the agent knows torch only through gt__torch_init.
 */
#ifndef GRADTRACE_AGENT_TORCH_H
#define GRADTRACE_AGENT_TORCH_H

#include <stdint.h>

/* Warning codes (GT_R_WARNING.code) used by the torch hooks. */
enum gt__torch_warn {
    GT__TORCH_WARN_LAYOUT = 0x7401,  /* node offsets not found: seq unknown */
    GT__TORCH_WARN_NAME = 0x7402,    /* Node::name() unusable: typeid names */
    GT__TORCH_WARN_RESOLVE = 0x7403, /* a libtorch function not found */
};

/*
 * Node creation seen by the get_and_increment hook: remembers (seq, tid)
 * while the layout is still being discovered. Lock-free, no allocation;
 * a no-op once the layout is settled. Any thread.
 */
void gt__torch_layout_note_created(uint64_t seq, uint64_t tid);

/* 1 while creations are still worth noting (layout not settled). */
int gt__torch_layout_learning(void);

/*
 * Reads the (seq, fwd_tid) of the backward node at `node`, a live
 * torch::autograd::Node. While the layout is unknown, each call is also an
 * observation that narrows the candidate offsets down; a value is only
 * returned when it is validated (for this very node while learning).
 * @return 1 with *seq and *tid set, 0 when unknown (then *seq = UINT64_MAX,
 *         *tid = 0). Any thread; never blocks (learning uses a trylock).
 */
int gt__torch_layout_read(const void *node, uint64_t *seq, uint64_t *tid);

/*
 * A node was just attached to its output tensor on this thread; seq and tid
 * are what get_and_increment last handed out here. Creation-time evidence
 * for the layout; a no-op once settled. Any thread; never blocks.
 */
void gt__torch_layout_note_edge(const void *node, uint64_t seq, uint64_t tid);

/* Start of a backward pass: last chance to settle from the forward. */
void gt__torch_layout_pass_begin(void);

/* End of a backward pass: lets learning settle or give up. Any thread. */
void gt__torch_layout_pass_done(void);

/* Test and diagnostics: settled offsets, or -1 while unknown/failed. */
int gt__torch_layout_offsets(int *seq_off, int *tid_off);

#endif
