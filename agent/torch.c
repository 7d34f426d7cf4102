/*
 * PyTorch autograd hooks: node creation in the forward, each backward node,
 * each backward pass. No change to the user's code, no Python involved.
 *
 * How: libgradtrace.so exports five libtorch functions under their mangled
 * C++ names (listed in agent/libgradtrace.map). libtorch_cpu and
 * libtorch_python call them through their PLT, and an LD_PRELOADed library
 * comes first in the global lookup scope, so those calls land here:
 *
 *   at::sequence_number::get_and_increment()   every autograd Node
 *       constructor calls it: this is node creation, and its result is the
 *       node's sequence number;
 *   torch::autograd::Engine::evaluate_function(graph_task, Node*, ...)
 *       runs one backward node, on whatever thread the engine uses;
 *   torch::autograd::impl::set_gradient_edge(tensor, edge)   attaches a
 *       fresh node to its output; used only while the node layout is being
 *       learned (agent/torch_layout.c), a plain forward afterwards;
 *   torch::autograd::Engine::execute(...)      one backward pass (also
 *       torch.autograd.grad); nested calls on a thread (reentrant backward,
 *       checkpointing) count once;
 *   at::RecordFunction::currentThreadId()      not interposed, only called:
 *       torch's id of the creating thread, the half of the correlation id
 *       (fwd_tid, seq) that torch's own profiler uses too.
 *
 * libtorch is loaded RTLD_LOCAL by Python, so dlsym(RTLD_NEXT) cannot find
 * the real functions. They are resolved on first use from the libtorch_cpu
 * image found with dl_iterate_phdr (dlopen RTLD_NOLOAD + dlsym), or from
 * the object that called us; the pointers are then cached, so the steady
 * state takes no lock and allocates nothing. Both torch 1.13 (Debian) and
 * 2.x (PyPI, checked on 2.15) export these names with these signatures and
 * call them through the PLT; see schema/torch.md.
 *
 * A node's sequence number and forward thread id are members whose offsets
 * vary by version: agent/torch_layout.c learns and validates them. Its name
 * is what torch's profiler shows: Node::name() called through the vtable
 * slot found by matching Node's own vtable against Node::name's address
 * (x86-64 SysV, where the std::string return is a hidden pointer we can
 * pass from C), cached per vtable so it runs once per node class. PyNode
 * (custom autograd.Function) names depend on the Python class, so nodes
 * whose vtable lives in libtorch_python are named on every call. Where
 * the slot cannot be found, the name comes from the node's type_info
 * (e.g. "MmBackward0"), which needs no call at all.
 *
 * The evaluate_function hook also keeps the thread's backward-node depth
 * (gt__bwd_enter/leave, also while idle): a module forward that starts
 * while it is non-zero is a recomputed one (checkpointing), flagged by
 * the event core (agent/events.c). After the begin of an AccumulateGrad node (recognised by
 * its vtable pointer, learned from its name) the parameter it accumulates
 * is looked up (agent/torch_params.c) and recorded as the node's layer.
 *
 * C++ exceptions thrown by the real functions unwind through these C
 * frames (this file is built with -fexceptions, see the Makefile), and
 * cleanup handlers record the end of the node or pass (and restore the
 * depth) on the way out.
 */
#include <dlfcn.h>
#include <link.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/capture.h"
#include "agent/events.h"
#include "agent/hooks.h"
#include "agent/internal.h"
#include "agent/trigger.h"
#include "agent/torch.h"

/* ------------------------------------------------------------ symbols */

#define SYM_SEQ "_ZN2at15sequence_number17get_and_incrementEv"
#define SYM_TID "_ZN2at14RecordFunction15currentThreadIdEv"
#define SYM_EVAL                                                              \
    "_ZN5torch8autograd6Engine17evaluate_functionERSt10shared_ptrINS0_"       \
    "9GraphTaskEEPNS0_4NodeERNS0_11InputBufferERKS2_INS0_10ReadyQueueEE"
#define SYM_EXEC                                                              \
    "_ZN5torch8autograd6Engine7executeERKSt6vectorINS0_4EdgeESaIS3_EERKS2_"   \
    "IN2at6TensorESaIS9_EEbbbS7_"
#define SYM_EDGE                                                              \
    "_ZN5torch8autograd4impl17set_gradient_edgeERKN2at6TensorENS0_4EdgeE"
#define SYM_NODE_NAME "_ZNK5torch8autograd4Node4nameB5cxx11Ev"
#define SYM_NODE_VTABLE "_ZTVN5torch8autograd4NodeE"
#define SYM_DELETE "_ZdlPv"

typedef uint64_t (*seq_fn)(void);
typedef uint64_t (*tid_fn)(void);
typedef void (*edge_fn)(const void *, void *);
typedef void (*eval_fn)(void *, void *, void *, void *, const void *);
typedef struct gt__cxx_vector (*exec_fn)(void *, const void *, const void *,
                                         _Bool, _Bool, _Bool, const void *);

/* libstdc++'s std::string (the cxx11 ABI): 32 bytes, short-string buffer. */
struct gt__cxx_string {
    char *data;
    size_t len;
    union {
        char local[16];
        size_t cap;
    } u;
};
/* x86-64 SysV: hidden return pointer first, then `this`. */
typedef void (*name_fn)(struct gt__cxx_string *ret, const void *self);
typedef void (*delete_fn)(void *);

static _Atomic(seq_fn) real_seq;
static _Atomic(tid_fn) real_tid;
static _Atomic(eval_fn) real_eval;
static _Atomic(edge_fn) real_edge;
static _Atomic(exec_fn) real_exec;

static int torch_disabled; /* GRADTRACE_TORCH=0: pure pass-through */
/* A node was created since the last counted backward pass ended: the next
 * pass follows a forward. 1 at start (the first pass always counts). */
static _Atomic int fwd_seen = 1;
static _Atomic int ops_tried; /* the operator callback was offered */

/* ------------------------------------------------------------ resolution */

struct find_ctx {
    char path[GT__PATH_MAX];
};

static int find_libtorch_cb(struct dl_phdr_info *info, size_t size, void *ud)
{
    struct find_ctx *ctx = ud;
    (void)size;
    const char *name = info->dlpi_name;
    if (!name || !*name)
        return 0;
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    if (strncmp(base, "libtorch_cpu.so", 15) != 0)
        return 0;
    size_t n = strlen(name);
    if (n >= sizeof(ctx->path))
        return 0;
    memcpy(ctx->path, name, n + 1);
    return 1;
}

/*
 * A handle on libtorch_cpu (whose dependency scope also holds libstdc++),
 * else on the object containing `caller`. Never loads anything new.
 * @return the handle or NULL.
 */
static void *torch_handle(const void *caller)
{
    static _Atomic(void *) cached;
    void *h = atomic_load_explicit(&cached, memory_order_acquire);
    if (h)
        return h;

    /* Cold (first calls only); dl_iterate_phdr and dlopen are thread-safe,
     * so racing threads just both find the same image. */
    struct find_ctx ctx;
    ctx.path[0] = '\0';
    if (dl_iterate_phdr(find_libtorch_cb, &ctx) && ctx.path[0])
        h = dlopen(ctx.path, RTLD_NOLOAD | RTLD_LAZY);
    if (!h && caller) {
        Dl_info di;
        if (dladdr(caller, &di) && di.dli_fname)
            h = dlopen(di.dli_fname, RTLD_NOLOAD | RTLD_LAZY);
        /* Not cached: another caller might find libtorch_cpu proper. */
        return h;
    }
    if (h)
        atomic_store_explicit(&cached, h, memory_order_release);
    return h;
}

void *gt__torch_lib(void)
{
    return torch_handle(NULL);
}

int gt__torch_off(void)
{
    return torch_disabled;
}

/*
 * The real definition of sym, never our own. Cold: first call per symbol.
 * @return the address or NULL (then also one warning in the trace).
 */
static _Noreturn void fatal_unresolved(const char *sym);

static void *resolve(const char *sym, const void *self, const void *caller)
{
    void *h = torch_handle(caller);
    void *p = h ? dlsym(h, sym) : NULL;
    if (p == self)
        p = NULL;
    if (!p) {
        GT__DIAG("torch: cannot resolve %s", sym);
        gt__warn_once(GT__TORCH_WARN_RESOLVE,
                      "torch: a libtorch function could not be resolved");
    }
    return p;
}

void *gt__torch_resolve(const char *sym, const void *self, const void *caller)
{
    return resolve(sym, self, caller);
}

_Noreturn void gt__torch_unresolved(const char *sym)
{
    fatal_unresolved(sym);
}

#define RESOLVE(var, type, sym, self)                                         \
    __extension__({                                                           \
        type f_ = atomic_load_explicit(&(var), memory_order_acquire);        \
        if (GT__UNLIKELY(!f_)) {                                               \
            f_ = (type)resolve(sym, (const void *)(self),                     \
                               __builtin_return_address(0));                  \
            if (f_)                                                           \
                atomic_store_explicit(&(var), f_, memory_order_release);     \
        }                                                                     \
        f_;                                                                   \
    })

/*
 * Nothing sane is left to do when the function libtorch just called has no
 * definition to forward to (libtorch_cpu always defines it, so this means
 * a broken process). Say so on stderr regardless of GRADTRACE_LOG.
 */
static _Noreturn void fatal_unresolved(const char *sym)
{
    gt__diag("torch: %s has no definition to forward to; aborting", sym);
    abort();
}

/* ------------------------------------------------------------ thread id */

static __thread uint64_t tl_torch_tid
    __attribute__((tls_model("initial-exec")));

/* torch's id of the calling thread (the same number its profiler uses). */
static uint64_t torch_tid(void)
{
    uint64_t t = tl_torch_tid;
    if (GT__LIKELY(t))
        return t;
    tid_fn f = RESOLVE(real_tid, tid_fn, SYM_TID, NULL);
    t = f ? f() : 0;
    tl_torch_tid = t;
    return t;
}

/* The number get_and_increment last handed out on this thread, for the
 * creation-time layout evidence (valid while tl_last_ok is 1; 2 means
 * several creations since the last attached node). */
static __thread uint64_t tl_last_seq
    __attribute__((tls_model("initial-exec")));
static __thread int tl_last_ok __attribute__((tls_model("initial-exec")));

/* ------------------------------------------------------------ node names */

#define NAME_SLOTS 1024              /* node classes seen, power of two */
#define NAME_PROBES 32
#define NAME_PER_CALL UINT32_MAX     /* id marker: name varies per node */

static struct {
    _Atomic uintptr_t vptr;
    _Atomic uint32_t id;
} names[NAME_SLOTS];

static _Atomic int name_slot = -2;   /* -2 unknown, -1 none, else index */
static _Atomic(delete_fn) cxx_delete;

/* Finds Node::name's slot in Node's own vtable. Cold, once. */
static void find_name_slot(void)
{
    int slot = -1;
#if defined(__x86_64__)
    void *h = torch_handle(NULL);
    void *fn = h ? dlsym(h, SYM_NODE_NAME) : NULL;
    void *vt = h ? dlsym(h, SYM_NODE_VTABLE) : NULL;
    /*
     * The operator delete that matches the operator new libtorch's
     * std::string used: its PLT looks in the global scope first (where a
     * preloaded allocator or a sanitizer replaces it), then in its own.
     */
    delete_fn del = (delete_fn)dlsym(RTLD_DEFAULT, SYM_DELETE);
    if (!del && h)
        del = (delete_fn)dlsym(h, SYM_DELETE);
    atomic_store_explicit(&cxx_delete, del, memory_order_relaxed);
    Dl_info di;
    const ElfW(Sym) *sym = NULL;
    if (fn && vt && del &&
        dladdr1(vt, &di, (void **)&sym, RTLD_DL_SYMENT) && sym) {
        /* Itanium vtable: offset-to-top, typeinfo, then the slots. */
        void *const *slots = (void *const *)vt + 2;
        size_t n = sym->st_size / sizeof(void *);
        for (size_t i = 0; n >= 2 && i < n - 2; i++)
            if (slots[i] == fn) {
                slot = (int)i;
                break;
            }
    }
#endif
    if (slot < 0)
        gt__warn_once(GT__TORCH_WARN_NAME,
                      "torch: Node::name() not callable; backward nodes "
                      "are named from their C++ type");
    atomic_store_explicit(&name_slot, slot, memory_order_release);
}

/*
 * The class name from the node's type_info, e.g. "MmBackward0" from
 * "N5torch8autograd9generated11MmBackward0E": the last component of the
 * mangled nested name. No call into C++, no allocation.
 */
static uint32_t typeid_name(const void *node)
{
    void *const *vptr = *(void *const *const *)node;
    const void *ti = vptr[-1];
    const char *m = ti ? *((const char *const *)ti + 1) : NULL;
    if (!m)
        return GT__INTERN_STATIC("autograd::Node");
    if (*m == '*')
        m++;
    if (*m == 'N')
        m++;
    const char *last = NULL;
    size_t last_len = 0;
    while (*m >= '0' && *m <= '9') {
        size_t n = 0;
        while (*m >= '0' && *m <= '9' && n < GT_STRING_MAX)
            n = n * 10 + (size_t)(*m++ - '0');
        if (strnlen(m, n) < n)
            break;
        last = m;
        last_len = n;
        m += n;
    }
    return last ? gt__intern(last, last_len) : gt__intern(m, strlen(m));
}

/* Node::name() through the vtable, interned. Cold per class. */
static uint32_t called_name(const void *node, int slot)
{
    name_fn fn = (name_fn)(*(void *const *const *)node)[slot];
    struct gt__cxx_string s;
    fn(&s, node);
    uint32_t id = gt__intern(s.data, s.len);
    if (s.data != s.u.local)
        atomic_load_explicit(&cxx_delete, memory_order_relaxed)(s.data);
    return id;
}

static uint32_t compute_name(const void *node)
{
    int slot = atomic_load_explicit(&name_slot, memory_order_acquire);
    if (slot == -2) {
        find_name_slot();
        slot = atomic_load_explicit(&name_slot, memory_order_acquire);
    }
    return slot >= 0 ? called_name(node, slot) : typeid_name(node);
}

/* Whether nodes of this class may have different names (PyNode). */
static int name_varies(uintptr_t vptr)
{
    Dl_info di;
    return dladdr((void *)vptr, &di) && di.dli_fname &&
           strstr(di.dli_fname, "libtorch_python") != NULL;
}

/* @return the interned name of node: one hash probe after the first. */
static uint32_t node_name(const void *node)
{
    uintptr_t vptr = *(const uintptr_t *)node;
    size_t i = (size_t)((vptr >> 4) * 0x9e3779b97f4a7c15ull >> 54) &
               (NAME_SLOTS - 1);
    for (int probe = 0; probe < NAME_PROBES; probe++) {
        size_t k = (i + (size_t)probe) & (NAME_SLOTS - 1);
        uintptr_t v = atomic_load_explicit(&names[k].vptr,
                                           memory_order_acquire);
        if (v == vptr) {
            uint32_t id = atomic_load_explicit(&names[k].id,
                                               memory_order_acquire);
            if (id == NAME_PER_CALL)
                return compute_name(node);
            if (id)
                return id;
            return compute_name(node); /* another thread is filling it */
        }
        if (v == 0) {
            uintptr_t expect = 0;
            if (!atomic_compare_exchange_strong(&names[k].vptr, &expect,
                                                vptr) &&
                expect != vptr)
                continue; /* lost the slot to another class */
            uint32_t id = compute_name(node);
            if (expect == vptr)
                return id; /* raced with the same class: theirs fills it */
            atomic_store_explicit(&names[k].id,
                                  name_varies(vptr) ? NAME_PER_CALL : id,
                                  memory_order_release);
            return id;
        }
    }
    return compute_name(node); /* table full: still correct, just slower */
}

/* ------------------------------------------------------------ hooks */

uint64_t _ZN2at15sequence_number17get_and_incrementEv(void)
{
    seq_fn real = RESOLVE(real_seq, seq_fn, SYM_SEQ,
                          _ZN2at15sequence_number17get_and_incrementEv);
    if (GT__UNLIKELY(!real))
        fatal_unresolved(SYM_SEQ);
    uint64_t seq = real();

    /* A forward ran since the last counted pass (see execute below). */
    if (GT__UNLIKELY(!atomic_load_explicit(&fwd_seen, memory_order_relaxed)))
        atomic_store_explicit(&fwd_seen, 1, memory_order_relaxed);
    gt__trig_forward_seen();
    /* Armed triggers need node creations while capture is off (they count
     * the matching nodes of a window's layer in its forward). */
    int capturing = gt__capture_hooks();
    if (GT__LIKELY(!capturing) && !gt__torch_layout_learning())
        return seq;
    if (GT__UNLIKELY(torch_disabled))
        return seq;
    uint64_t tid = torch_tid();
    gt__torch_layout_note_created(seq, tid);
    tl_last_seq = seq;
    /* A second creation before the first node is attached (a custom
     * Function applied inside another one's forward, e.g. nested
     * checkpoints, builds a PyNode it never attaches): the next attached
     * node may be either, so it is no evidence. */
    tl_last_ok = tl_last_ok ? 2 : 1;
    if (capturing)
        gt__node_created(seq, tid);
    if (capturing)
        gt__torch_ops_offer();
    return seq;
}

/*
 * libtorch is loaded by now: time to register the operator callback
 * (agent/ops.c), from its own handle (Python loads it RTLD_LOCAL), once
 * operators are asked for (GRADTRACE_OPS=1, or an armed trigger with
 * ops=1, whose window may open in a backward where no node is created).
 * Once it is registered, a capture that starts resumes it if it was
 * paused.
 */
void gt__torch_ops_offer(void)
{
    if (GT__LIKELY(atomic_load_explicit(&ops_tried, memory_order_relaxed))) {
        if (gt__capture_on())
            gt__ops_resume();
        return;
    }
    if (!gt__ops_wanted())
        return;
    atomic_store_explicit(&ops_tried, 1, memory_order_relaxed);
    void *h = torch_handle(NULL);
    if (h)
        gt__ops_register(h);
    gt__ops_resume(); /* registered earlier (a C++ program) and paused */
}

void _ZN5torch8autograd4impl17set_gradient_edgeERKN2at6TensorENS0_4EdgeE(
    const void *tensor, void *edge)
{
    edge_fn real = RESOLVE(
        real_edge, edge_fn, SYM_EDGE,
        _ZN5torch8autograd4impl17set_gradient_edgeERKN2at6TensorENS0_4EdgeE);
    if (GT__UNLIKELY(!real))
        fatal_unresolved(SYM_EDGE);
    /* Only while the layout is unknown: the fresh node, before it runs. */
    if (GT__UNLIKELY(tl_last_ok)) {
        int one = tl_last_ok == 1;
        tl_last_ok = 0; /* one observation per creation (multi-output ops) */
        if (one && gt__torch_layout_learning() && edge)
            gt__torch_layout_note_edge(*(void *const *)edge, tl_last_seq,
                                       tl_torch_tid);
    }
    real(tensor, edge);
}

struct node_guard {
    uint64_t seq, tid;
    uint32_t acc_layer; /* an AccumulateGrad's module, for the triggers */
    int recorded;
};

static void node_guard_end(struct node_guard *g)
{
    gt__bwd_leave();
    if (g->recorded)
        gt__bwd_node_end(g->seq, g->tid, g->acc_layer);
}

static void depth_guard_end(unsigned *depth)
{
    (void)depth;
    gt__bwd_leave();
}

/*
 * AccumulateGrad's vtable pointer, learned from the first node named like
 * it (by Node::name() or, without it, by its C++ type), so that afterwards
 * recognising one is a compare.
 */
static _Atomic uintptr_t acc_vptr;

static int is_accumulate(const void *node, uint32_t name)
{
    uintptr_t v = *(const uintptr_t *)node;
    uintptr_t a = atomic_load_explicit(&acc_vptr, memory_order_relaxed);
    if (GT__LIKELY(a != 0))
        return v == a;
    if (name != GT__INTERN_STATIC("torch::autograd::AccumulateGrad") &&
        name != GT__INTERN_STATIC("AccumulateGrad"))
        return 0;
    atomic_store_explicit(&acc_vptr, v, memory_order_relaxed);
    return 1;
}

/* @return 1 with the module and parameter an AccumulateGrad node
 * accumulates into; 0 for other nodes or an unknown parameter. */
static int accumulate_layer(const void *node, uint32_t name, uint32_t *module,
                            uint32_t *param)
{
    return gt__torch_params_any() && is_accumulate(node, name) &&
           gt__torch_acc_lookup(node, module, param);
}

void
_ZN5torch8autograd6Engine17evaluate_functionERSt10shared_ptrINS0_9GraphTaskEEPNS0_4NodeERNS0_11InputBufferERKS2_INS0_10ReadyQueueEE(
    void *engine, void *graph_task, void *node, void *inputs,
    const void *ready_queue)
{
    eval_fn real = RESOLVE(
        real_eval, eval_fn, SYM_EVAL,
        _ZN5torch8autograd6Engine17evaluate_functionERSt10shared_ptrINS0_9GraphTaskEEPNS0_4NodeERNS0_11InputBufferERKS2_INS0_10ReadyQueueEE);
    if (GT__UNLIKELY(!real))
        fatal_unresolved(SYM_EVAL);

    /* With a trigger armed the node goes through gt__bwd_node_begin/end,
     * where a window may open or close. */
    int capturing = gt__capture_hooks();
    if (GT__UNLIKELY(torch_disabled || !node)) {
        real(engine, graph_task, node, inputs, ready_queue);
        return;
    }
    /* The depth is kept even while idle: a capture may start inside a
     * backward node whose recomputed forward is still to come. */
    if (GT__LIKELY(!capturing) && !gt__torch_layout_learning()) {
        unsigned d __attribute__((cleanup(depth_guard_end))) = 0;
        (void)d;
        gt__bwd_enter();
        real(engine, graph_task, node, inputs, ready_queue);
        return;
    }

    struct node_guard g __attribute__((cleanup(node_guard_end))) = {0, 0, 0, 0};
    gt__bwd_enter();
    gt__torch_layout_read(node, &g.seq, &g.tid);
    if (capturing) {
        uint32_t name = node_name(node);
        uint32_t module = 0, param = 0;
        int acc = accumulate_layer(node, name, &module, &param);
        /* A parameter's gradient belongs to its module's windows. */
        if (acc && gt__capture_triggers())
            g.acc_layer = module;
        gt__bwd_node_begin(name, g.seq, g.tid, g.acc_layer);
        g.recorded = 1;
        /* Read again: a trigger window may have opened at this begin. */
        if (acc && gt__capture_on())
            gt__torch_bwd_node_layer(module, param);
    }
    real(engine, graph_task, node, inputs, ready_queue);
}

static __thread unsigned tl_exec_depth
    __attribute__((tls_model("initial-exec")));

struct pass_guard {
    int recorded;
    int extra;
};

static void pass_guard_end(struct pass_guard *g)
{
    tl_exec_depth--;
    if (tl_exec_depth == 0)
        gt__torch_layout_pass_done();
    if (g->recorded) {
        /* Nodes a counted pass created itself (double backward, a
         * recompute) are no next forward. */
        if (!g->extra)
            atomic_store_explicit(&fwd_seen, 0, memory_order_relaxed);
        gt__bwd_pass_end();
    }
}

struct gt__cxx_vector
_ZN5torch8autograd6Engine7executeERKSt6vectorINS0_4EdgeESaIS3_EERKS2_IN2at6TensorESaIS9_EEbbbS7_(
    void *engine, const void *roots, const void *inputs, _Bool keep_graph,
    _Bool create_graph, _Bool accumulate_grad, const void *outputs)
{
    exec_fn real = RESOLVE(
        real_exec, exec_fn, SYM_EXEC,
        _ZN5torch8autograd6Engine7executeERKSt6vectorINS0_4EdgeESaIS3_EERKS2_IN2at6TensorESaIS9_EEbbbS7_);
    if (GT__UNLIKELY(!real))
        fatal_unresolved(SYM_EXEC);

    struct pass_guard g __attribute__((cleanup(pass_guard_end))) = {0, 0};
    /* Only the outermost pass on a thread is an iteration boundary. */
    if (tl_exec_depth++ == 0 && !torch_disabled) {
        if (GT__UNLIKELY(gt__torch_layout_learning()))
            gt__torch_layout_pass_begin();
        /* Not an iteration: torch.autograd.grad (accumulate_grad false;
         * torch.compile's compile-time backward is one), or a pass with no
         * node created since the last counted one ended (a second
         * backward over a retained graph). */
        g.extra = !accumulate_grad ||
                  !atomic_load_explicit(&fwd_seen, memory_order_relaxed);
        /* Always: passes are counted as iterations even while capture
         * is off, so a trigger can name one (gt__bwd_pass_begin records
         * a mark only while capturing). */
        gt__bwd_pass_begin(g.extra);
        g.recorded = 1;
    }
    return real(engine, roots, inputs, keep_graph, create_graph,
                accumulate_grad, outputs);
}

/* ------------------------------------------------------------ init */

/*
 * Called once by agent/ctor.c after the core started, before libtorch is
 * normally loaded: resolution stays lazy (first hook call). Reads
 * GRADTRACE_TORCH: "0" turns the hooks into pure pass-through.
 */
void gt__torch_init(void)
{
    torch_disabled = !gt__agent_config()->torch;
    if (torch_disabled)
        GT__DIAG("torch: hooks disabled by GRADTRACE_TORCH=0");
}
