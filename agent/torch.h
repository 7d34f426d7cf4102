/*
 * Shared between agent/torch.c (the interposed libtorch functions),
 * agent/torch_layout.c (run-time discovery of where a torch::autograd::Node
 * keeps its sequence number and forward thread id) and agent/torch_params.c
 * (parameters registered by the Python package, and where AccumulateGrad
 * keeps its variable), and agent/ops.c and agent/recordfn.c (libtorch's
 * RecordFunction callbacks). Private to those files and agent/api.c
 * (gt__torch_ops_offer); the rest of the agent knows torch only through
 * its init (agent/hooks.h).
 */
#ifndef GRADTRACE_AGENT_TORCH_H
#define GRADTRACE_AGENT_TORCH_H

#include <stddef.h>
#include <stdint.h>

#include "gradtrace/gradtrace.h"

/* Warning codes (GT_R_WARNING.code) used by the torch hooks. */
enum gt__torch_warn {
    GT__TORCH_WARN_LAYOUT = 0x7401,  /* node offsets not found: seq unknown */
    GT__TORCH_WARN_NAME = 0x7402,    /* Node::name() unusable: typeid names */
    GT__TORCH_WARN_RESOLVE = 0x7403, /* a libtorch function not found */
    GT__TORCH_WARN_ACC = 0x7404,     /* AccumulateGrad variable not found */
    GT__TORCH_WARN_PARAMS = 0x7405,  /* parameter table full */
    GT__TORCH_WARN_RECORDFN = 0x7406, /* RecordFunction layers unavailable */
    GT__TORCH_WARN_OPS = 0x740A,     /* operator (cpu_op) records unavailable */
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
/* DDP's reducer (agent/torch_comm.c): communication scopes. */
GT_API void _ZN4c10d7Reducer13autograd_hookEm(void *self, size_t index);
GT_API void _ZN4c10d7Reducer17finalize_backwardEv(void *self);
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
/* ------------------------------------------------ parameters (torch_params.c) */

/*
 * Registers (module != 0) or forgets (module == 0) the parameter whose
 * TensorImpl* is impl. Re-registering a key replaces its value. Cold:
 * takes a mutex. Any thread, not from signal handlers.
 * @return 0, -EINVAL (impl 0) or -ENOSPC (table full).
 */
int gt__torch_param_set(uint64_t impl, uint32_t module, uint32_t name)
    __attribute__((warn_unused_result));

/*
 * Lock-free lookup, no allocation. Any thread.
 * @return 1 with *module/ *name set when impl is a registered parameter.
 */
int gt__torch_param_find(uint64_t impl, uint32_t *module, uint32_t *name);

/* 1 once at least one parameter is registered (and not forgotten). */
int gt__torch_params_any(void);

/* AccumulateGrad offset learner: pure, driven by gt__torch_acc_lookup. */
#define GT__ACC_WORDS 96     /* words scanned: offsets 8 .. 760 */
#define GT__ACC_SETTLE 4     /* agreeing nodes needed to settle */
#define GT__ACC_GIVE_UP 3    /* contradictions before giving up */
#define GT__ACC_NO_HIT 256   /* nodes without any registered pointer */
#define GT__ACC_IMPL_WORDS 16 /* TensorImpl words searched for its meta */
#define GT__ACC_META_WORDS 24 /* AutogradMeta words searched for the node */

enum { GT__ACC_LEARNING = 0, GT__ACC_SETTLED = 1, GT__ACC_FAILED = 2 };

struct gt__acc_learner {
    int state;               /* GT__ACC_* */
    int word;                /* candidate (settled) word index */
    unsigned agree;          /* nodes whose first hit is `word` */
    unsigned misses;         /* nodes without a hit before any agreed */
    unsigned contradictions;
};

/*
 * One AccumulateGrad node's first n words (w[0] the vtable pointer);
 * is_param(word, ctx) says whether a word is the TensorImpl* of a
 * registered parameter accumulated by this node. Caller serialises calls
 * on one learner.
 * @return the word that holds this node's variable when it is known to be
 *         right (settled, or agreeing with the candidate), else -1.
 */
int gt__acc_learn(struct gt__acc_learner *l, const uint64_t *w, int n,
                  int (*is_param)(uint64_t, const void *), const void *ctx);

/*
 * The module and parameter name an AccumulateGrad node accumulates into.
 * Settled: one load and a table probe. Learning: a trylock and a scan.
 * @return 1 with *module/ *name set, 0 when unknown or not a parameter.
 */
int gt__torch_acc_lookup(const void *node, uint32_t *module, uint32_t *name);

/* Test and diagnostics: the settled word index, -1 while unknown. */
int gt__torch_acc_word(void);

/*
 * at::RecordFunctionCallback as libtorch 1.13 and 2.x lay it out
 * (ATen/record_function.h; agent/recordfn.c explains the ABI): passed by
 * value to at::addGlobalCallback. x86-64 only.
 */
struct gt__rf_callback {
    void **(*start)(void **ctx_out, const void *rf);
    void (*end)(const void *rf, void *ctx);
    double sampling_prob;
    _Bool scopes[10];     /* at::RecordScope::NUM_SCOPES */
    _Bool needs_inputs, needs_outputs, needs_ids;
};
_Static_assert(sizeof(struct gt__rf_callback) == 40,
               "at::RecordFunctionCallback is 40 bytes");

#define GT__RF_FUNCTION 0   /* at::RecordScope::FUNCTION: aten operators */
#define GT__RF_USER_SCOPE 7 /* at::RecordScope::USER_SCOPE */

/*
 * Operators (agent/ops.c; gt__ops_init in agent/internal.h).
 * gt__ops_register: registers the callback from libtorch_cpu's handle (the
 * autograd hook, once libtorch is loaded); a no-op once registered or
 * turned off. gt__ops_wanted: 1 while no registration was made or refused.
 */
void gt__ops_register(void *handle);
/* Registers the operator callback once, from libtorch's handle, when
 * capture is on: called at the first autograd node and the first module
 * scope (gt_module_begin: the Python package's hooks, which run before a
 * module's first operator) recorded. */
void gt__torch_ops_offer(void);
int gt__ops_wanted(void);
/* Resumes the operator callback if a stretch without capture paused it
 * (agent/ops.c); a relaxed load when it is not paused. */
void gt__ops_resume(void);

/*
 * Compiled regions (agent/ops.c): gt__ops_local_on adds the calling
 * thread's RecordFunction callback (FUNCTION scope) that records every
 * operator and generated kernel scope while capturing, from libtorch's
 * handle; @return 1 when added (gt__ops_local_off then removes it), 0 when
 * not possible or added already. Cold-ish: once per region.
 */
int gt__ops_local_on(void *handle);
void gt__ops_local_off(void);

/* A handle on libtorch_cpu once it is loaded (agent/torch.c), or NULL. */
void *gt__torch_lib(void);

/* GRADTRACE_TORCH=0: the hooks pass every call through, recording nothing. */
int gt__torch_off(void);

/* The real definition of the interposed libtorch function sym (never
 * self), from libtorch_cpu or the object containing caller; NULL (and one
 * warning) when there is none. Cold: cache the result. */
void *gt__torch_resolve(const char *sym, const void *self, const void *caller);

/* Aborts: libtorch called an interposed function that has no definition
 * to forward to (a broken process); says so on stderr first. */
_Noreturn void gt__torch_unresolved(const char *sym);

/*
 * torch.compile'd graphs (agent/compiled.c; the C API's gt_compiled_*):
 * the compile-time map (graph, calls), the regions that run it, compile
 * spans. gt__compiled_graph @return the map's number in the stream.
 */
uint32_t gt__compiled_graph(uint32_t code, uint32_t compile_id,
                            uint32_t graph_id, uint16_t phase,
                            uint16_t flags, uint32_t calls);
void gt__compiled_call(uint32_t graph, uint32_t index, uint32_t kernel,
                       uint32_t scope, uint32_t owner, uint32_t fused,
                       uint16_t phase, uint16_t flags);
void gt__compiled_begin(uint32_t graph);
void gt__compiled_end(uint32_t graph);
void gt__compile_span(uint32_t name, uint64_t begin_ns, uint64_t end_ns);
/* GT_R_LAYER_INFO: a module's name, class and GT_LAYER_F_* flags. */
void gt__layer_info(uint32_t layer, uint32_t cls, uint32_t flags);

/* Records GT_R_BWD_NODE_LAYER (caller checked that capture is on). */
void gt__torch_bwd_node_layer(uint32_t layer, uint32_t param);

#endif
