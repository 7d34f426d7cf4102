/*
 * Shared between agent/torch.c (the interposed libtorch functions) and
 * agent/torch_layout.c (run-time discovery of where a torch::autograd::Node
 * keeps its sequence number and forward thread id). Private to those two
 * files; the rest of the agent knows torch only through gt__torch_init.
 */
#ifndef GRADTRACE_AGENT_TORCH_H
#define GRADTRACE_AGENT_TORCH_H

#include <stdint.h>

#include "gradtrace/gradtrace.h"

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

/* ------------------------------------------------ interposed (agent/torch.c)
 *
 * Exported by libgradtrace.so under the mangled names libtorch's callers
 * use, so the PLT reaches them first (agent/libgradtrace.map); each calls
 * the real function, resolved in libtorch_cpu, around its hook.
 */
/* The interposed functions, under the names libtorch calls them by. */
GT_API uint64_t _ZN2at15sequence_number17get_and_incrementEv(void);
GT_API void
_ZN5torch8autograd6Engine17evaluate_functionERSt10shared_ptrINS0_9GraphTaskEEPNS0_4NodeERNS0_11InputBufferERKS2_INS0_10ReadyQueueEE(
    void *engine, void *graph_task, void *node, void *inputs,
    const void *ready_queue);

/*
 * torch::autograd::Edge is passed by value but is not trivially copyable
 * (it holds a shared_ptr<Node>), so the Itanium ABI passes a pointer to a
 * caller-owned temporary; its first word is the Node pointer.
 */
GT_API void
_ZN5torch8autograd4impl17set_gradient_edgeERKN2at6TensorENS0_4EdgeE(
    const void *tensor, void *edge);

/*
 * std::vector<at::Tensor> returned by value: three pointers, returned
 * through a hidden pointer on x86-64 and aarch64 alike for a 24-byte
 * struct, which is how C++ returns it. Moving it bitwise is fine (libstdc++
 * vectors hold no pointer into themselves).
 */
struct gt__cxx_vector {
    void *begin, *end, *cap;
};
GT_API struct gt__cxx_vector
_ZN5torch8autograd6Engine7executeERKSt6vectorINS0_4EdgeESaIS3_EERKS2_IN2at6TensorESaIS9_EEbbbS7_(
    void *engine, const void *roots, const void *inputs, _Bool keep_graph,
    _Bool create_graph, _Bool accumulate_grad, const void *outputs);

#endif
