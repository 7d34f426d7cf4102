/*
 * libtorch operators (aten ops) as GT_R_OP_BEGIN/END records: the
 * converter writes them as Kineto's cpu_op events (schema/trace-output.md).
 *
 * Mechanism: one at::RecordFunction global callback pair for scope
 * FUNCTION (every dispatched aten operator), registered through
 * at::addGlobalCallback, as agent/recordfn.c does for USER_SCOPE (that
 * file documents the C++ ABI this relies on, x86-64 only). Where the
 * callback can be registered:
 *   - a C++ program linked with libtorch_cpu: at start, from the global
 *     scope (RTLD_DEFAULT);
 *   - Python, which loads libtorch_cpu later and RTLD_LOCAL: from the
 *     autograd hook (agent/torch.c) the first time it runs while
 *     capturing, with its handle on libtorch_cpu (dlopen RTLD_NOLOAD).
 *     The first operators of the run, before the first autograd node,
 *     are missed.
 * GRADTRACE_OPS=0 registers nothing (torch then runs its operators
 * without any RecordFunction callback, as before).
 *
 * Idle stays free after a capture: while any global callback is enabled,
 * libtorch builds a RecordFunction for every operator (about 70 ns each
 * beside a 2-op Python loop, tests/bench/bench_ops_idle.py). So the
 * first operator that finds capture off pauses the callback
 * (at::disableCallback; libtorch then runs operators as if none were
 * registered). A capture the program starts (gt_capture_start, a trigger
 * window) resumes it at once (at::reenableCallback, through
 * gt__capture_started); one the daemon starts, at the next module scope
 * or node creation (gt__torch_ops_offer). Both are safe from inside a
 * callback: a RecordFunction runs the callbacks it took at its start
 * (at::StepCallbacks, 1.13 and 2.x), so the operator that paused still
 * gets its end. One mutex orders pause and resume against each other
 * (each runs once per capture transition); the hot paths read a relaxed
 * flag. Operators begun while paused are not seen, begin or end.
 *
 * Per operator while capturing: the name (RecordFunction::name()) is
 * interned once per thread through a small cache keyed by its pointer. A
 * dispatched operator's name points into its schema, stable while the
 * operator is registered; a RECORD_FUNCTION with a built name (libtorch's
 * "autograd::engine::evaluate_function: AddmmBackward0", one per
 * backward node) passes a temporary string, whose buffer the next node's
 * name reuses. So a hit also compares the whole text with the interned
 * one (a first version compared 16 bytes, and every evaluate_function
 * after the first took the first one's name).
 *
 * The id (the operator's Kineto "External id") is unique in the process:
 * each thread takes GT__OPS_ID_BLOCK ids at a time from a process-wide
 * counter and hands them out in order, so ids rise along a thread but
 * not across threads (the converter pairs an end with its begin by name
 * and id on the thread's stack; consumers link by equality). Threads
 * that run operators at once (the autograd engine's device threads, a
 * data-loading thread) then no longer pass one counter's cache line
 * between them on every operator. The id is pushed as a CUPTI external
 * correlation (GT_EXT_OP) so CUDA calls and kernels inside carry it.
 *
 * The sequence number of the node an operator creates is not read here:
 * the converter takes it from the node creation recorded inside the
 * operator. A thread keeps a stack of open operators (ends name their
 * begin's id); depth beyond GT__OPS_DEPTH records nothing.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/capture.h"
#include "agent/cuda.h"
#include "agent/hooks.h"
#include "agent/internal.h"
#include "agent/ring.h"
#include "agent/strings.h"
#include "agent/torch.h"
#include "agent/trigger.h"
#include "common/alloc.h"

#define GT__OPS_DEPTH 64
#define GT__OPS_NAMES 128 /* per-thread name cache, power of two */
#define GT__OPS_ID_BLOCK 1024u /* operator ids a thread takes at a time */
#define GT__OPS_LOCAL_DEPTH 32 /* nesting a compiled region's callback keeps */

#define SYM_ADD "_ZN2at17addGlobalCallbackENS_22RecordFunctionCallbackE"
#define SYM_NAME "_ZNK2at14RecordFunction4nameEv"
#define SYM_DISABLE "_ZN2at15disableCallbackEm"
#define SYM_REENABLE "_ZN2at16reenableCallbackEm"
#define SYM_ADD_LOCAL "_ZN2at22addThreadLocalCallbackENS_22RecordFunctionCallbackE"
#define SYM_REMOVE "_ZN2at14removeCallbackEm"

enum { OPS_UNTRIED = 0, OPS_ON = 1, OPS_OFF = 2 };

static _Atomic int ops_state;
static int ops_always; /* GRADTRACE_OPS=1: every capture records them */
static const char *(*rf_name)(const void *rf);
static _Atomic uint64_t op_next_id;

/* Pausing (see the top of the file); rf_disable is NULL where libtorch
 * has no at::disableCallback: the callback then stays on. */
static void (*rf_disable)(uint64_t handle);
static void (*rf_reenable)(uint64_t handle);
static uint64_t ops_handle;
static _Atomic int ops_can_pause; /* rf_disable, rf_reenable are set */
static _Atomic int ops_paused;
static pthread_mutex_t ops_pause_mu = PTHREAD_MUTEX_INITIALIZER;

struct op_open {
    uint64_t id;
    uint32_t name;
    uint32_t epoch;  /* capture epoch of its begin, 0: nothing recorded */
    _Bool pushed;    /* a CUPTI external id was pushed for it */
};

/*
 * A thread's operator state, allocated at its first operator (a cold
 * path, like a thread's first record) and freed when it exits: 5 KiB,
 * too large for TLS in an agent that may be dlopen'ed (the static TLS
 * surplus is a few hundred bytes; t_agent_dlopen).
 */
struct ops_tls {
    uint32_t depth;
    uint32_t local_depth;   /* the compiled-region callback's stack */
    uint64_t local_handle;  /* its handle while added on this thread */
    struct op_open local[GT__OPS_LOCAL_DEPTH];
    uint64_t id_next, id_end; /* this thread's unused ids [next, end) */
    struct op_open e[GT__OPS_DEPTH];
    struct op_name {
        const char *key;  /* the name pointer it was cached for */
        const char *text; /* the interned text (agent/strings.h: never
                           * moves), not NUL-terminated */
        uint32_t len;
        uint32_t id;
    } names[GT__OPS_NAMES];
};

static __thread struct ops_tls *tl_ops_p
    __attribute__((tls_model("initial-exec")));
static pthread_key_t ops_key;
static pthread_once_t ops_key_once_ctl = PTHREAD_ONCE_INIT;
static int ops_key_err = -1;

static void ops_tls_free(void *p)
{
    tl_ops_p = NULL; /* runs on the exiting thread itself */
    gt__free(p);
}

static void ops_key_make(void)
{
    ops_key_err = pthread_key_create(&ops_key, ops_tls_free);
}

/* Creates the key that frees a thread's state, once. @return 0 or an errno. */
static int ops_key_once(void)
{
    (void)pthread_once(&ops_key_once_ctl, ops_key_make);
    return ops_key_err;
}

/* This thread's state, NULL when it cannot be allocated (nothing is then
 * recorded on it). */
static struct ops_tls *ops_tls(void)
{
    struct ops_tls *t = tl_ops_p;
    if (GT__LIKELY(t != NULL))
        return t;
    t = gt__calloc(1, sizeof(*t));
    if (t) {
        tl_ops_p = t;
        (void)pthread_setspecific(ops_key, t);
    }
    return t;
}

/*
 * The interned id of an operator name, cached per thread by pointer; a
 * hit is a pointer match whose text is still the cached one (see the top
 * of the file). strncmp stops at name's end, so a shorter name is never
 * read past it.
 */
static uint32_t op_name_id(struct ops_tls *tl_ops, const char *name)
{
    uintptr_t k = (uintptr_t)name;
    struct op_name *c =
        &tl_ops->names[(uint32_t)((k >> 4) ^ (k >> 12)) & (GT__OPS_NAMES - 1)];
    if (!name)
        return 0;
    if (GT__LIKELY(c->key == name && strncmp(name, c->text, c->len) == 0 &&
                   name[c->len] == '\0'))
        return c->id;
    size_t len = strlen(name);
    uint32_t id = gt__intern(name, len);
    const char *text;
    uint32_t tlen;
    if (id && gt__strings_get(id, &text, &tlen) == 0 && tlen == len) {
        c->key = name;
        c->text = text;
        c->len = tlen;
        c->id = id;
    }
    return id;
}

/* Operators are recorded now: capture is on and GRADTRACE_OPS or the open
 * trigger window asks for them. */
static inline int ops_now(void)
{
    return gt__capture_on() && (ops_always || gt__trig_window_ops());
}

/* The global callback is registered and not paused: it records what
 * ops_now() allows. */
static inline int ops_recording(void)
{
    return atomic_load_explicit(&ops_state, memory_order_relaxed) == OPS_ON &&
           !atomic_load_explicit(&ops_paused, memory_order_relaxed);
}

/* Pauses (want 1) or resumes (want 0) the callback in libtorch, unless
 * capture has changed its mind since the caller looked. */
static void ops_set_paused(int want)
{
    pthread_mutex_lock(&ops_pause_mu);
    if (atomic_load_explicit(&ops_can_pause, memory_order_relaxed) &&
        atomic_load_explicit(&ops_paused, memory_order_relaxed) != want &&
        ops_now() == !want) {
        (want ? rf_disable : rf_reenable)(ops_handle);
        atomic_store_explicit(&ops_paused, want, memory_order_relaxed);
        GT__DIAG("torch operators: callback %s", want ? "paused" : "resumed");
    }
    pthread_mutex_unlock(&ops_pause_mu);
}

void gt__ops_resume(void)
{
    if (GT__UNLIKELY(atomic_load_explicit(&ops_paused, memory_order_relaxed)))
        ops_set_paused(0);
}

/* Records one operator's begin into stack entry o (capture is on). */
static void op_begin_rec(struct ops_tls *tl_ops, struct op_open *o,
                         const void *rf)
{
    if (!gt__thread_self())
        return;
    if (GT__UNLIKELY(tl_ops->id_next == tl_ops->id_end)) {
        uint64_t b = atomic_fetch_add_explicit(&op_next_id, GT__OPS_ID_BLOCK,
                                               memory_order_relaxed);
        tl_ops->id_next = b + 1; /* ids start at 1 */
        tl_ops->id_end = b + 1 + GT__OPS_ID_BLOCK;
    }
    o->id = tl_ops->id_next++;
    o->name = op_name_id(tl_ops, rf_name(rf));
    o->epoch = gt__capture_epoch();
    o->pushed = gt__cuda_ext_push != NULL;
    struct gt_r_op_begin *r = gt__reserve_inline(sizeof(*r));
    if (GT__LIKELY(r != NULL)) {
        r->h.type = GT_R_OP_BEGIN;
        r->h.size = sizeof(*r);
        r->name = o->name;
        r->flags = 0;
        r->ts = gt__now();
        r->id = o->id;
        r->seq = UINT64_MAX;
        r->fwd_tid = 0;
        gt__commit_inline(sizeof(*r));
    }
    if (o->pushed)
        gt__cuda_ext_push(GT_EXT_OP, o->id);
}

/* Records the end of the operator of stack entry o, unless it was begun
 * while not capturing or a capture stopped or restarted since. */
static void op_end_rec(const struct op_open *o)
{
    if (o->pushed)
        gt__cuda_ext_pop(GT_EXT_OP);
    if (o->epoch == 0 || !gt__capture_on() || o->epoch != gt__capture_epoch())
        return;
    struct gt_r_op_end *r = gt__reserve_inline(sizeof(*r));
    if (GT__LIKELY(r != NULL)) {
        r->h.type = GT_R_OP_END;
        r->h.size = sizeof(*r);
        r->name = o->name;
        r->ts = gt__now();
        r->id = o->id;
        gt__commit_inline(sizeof(*r));
    }
}

/* The start callback (see agent/recordfn.c): *ctx_out is the (null)
 * ObserverContext, returned through the hidden pointer. */
static void **op_start(void **ctx_out, const void *rf)
{
    *ctx_out = NULL;
    struct ops_tls *tl_ops = ops_tls();
    if (GT__UNLIKELY(!tl_ops))
        return ctx_out;
    /* Every begin takes a stack entry, so that every end pops its own. */
    uint32_t d = tl_ops->depth++;
    if (GT__UNLIKELY(d >= GT__OPS_DEPTH))
        return ctx_out;
    struct op_open *o = &tl_ops->e[d];
    o->epoch = 0;
    o->pushed = 0;
    if (GT__UNLIKELY(!ops_now())) {
        if (atomic_load_explicit(&ops_can_pause, memory_order_relaxed) &&
            !atomic_load_explicit(&ops_paused, memory_order_relaxed))
            ops_set_paused(1);
        return ctx_out;
    }
    op_begin_rec(tl_ops, o, rf);
    return ctx_out;
}

static void op_end(const void *rf, void *ctx)
{
    (void)rf;
    (void)ctx;
    struct ops_tls *tl_ops = tl_ops_p;
    if (GT__UNLIKELY(!tl_ops) || tl_ops->depth == 0)
        return;
    if (--tl_ops->depth >= GT__OPS_DEPTH)
        return;
    const struct op_open *o = &tl_ops->e[tl_ops->depth];
    if (!ops_now()) {
        if (o->pushed)
            gt__cuda_ext_pop(GT_EXT_OP);
        return;
    }
    op_end_rec(o);
}

/* ------------------------------------------------ compiled regions
 *
 * Inside a compiled graph's wrapper (agent/compiled.c) every
 * RecordFunction of the thread is one of its kernels or extern calls, or
 * an operator inside one: a thread-local callback (at::
 * addThreadLocalCallback, FUNCTION scope, the generated kernels' scope
 * too) records them for the region only and is removed at its end, so
 * operators outside compiled regions pay nothing (libtorch builds no
 * RecordFunction while a thread has no callback). Where the global
 * callback records already (GRADTRACE_OPS, a window with ops=1) the
 * region adds none. Its own stack (local[]): the global callback's ends
 * run in the same order as the starts, not nested inside this one's.
 */
static uint64_t (*rf_add_local)(struct gt__rf_callback);
static void (*rf_remove)(uint64_t handle);
static _Atomic int local_state; /* OPS_UNTRIED, OPS_ON, OPS_OFF */

static void **local_start(void **ctx_out, const void *rf)
{
    *ctx_out = NULL;
    struct ops_tls *tl_ops = tl_ops_p;
    if (GT__UNLIKELY(!tl_ops))
        return ctx_out;
    uint32_t d = tl_ops->local_depth++;
    if (GT__UNLIKELY(d >= GT__OPS_LOCAL_DEPTH))
        return ctx_out;
    struct op_open *o = &tl_ops->local[d];
    o->epoch = 0;
    o->pushed = 0;
    if (gt__capture_on() && !(ops_now() && ops_recording()))
        op_begin_rec(tl_ops, o, rf);
    return ctx_out;
}

static void local_end(const void *rf, void *ctx)
{
    (void)rf;
    (void)ctx;
    struct ops_tls *tl_ops = tl_ops_p;
    if (GT__UNLIKELY(!tl_ops) || tl_ops->local_depth == 0)
        return;
    if (--tl_ops->local_depth >= GT__OPS_LOCAL_DEPTH)
        return;
    op_end_rec(&tl_ops->local[tl_ops->local_depth]);
}

/* Resolves the thread-local callback functions once, from handle. */
static int local_resolve(void *handle)
{
    int st = atomic_load_explicit(&local_state, memory_order_acquire);
    if (GT__LIKELY(st != OPS_UNTRIED))
        return st == OPS_ON;
    if (!handle)
        return 0; /* libtorch not loaded (yet): nothing to register with */
#if defined(__x86_64__)
    void *add = handle ? dlsym(handle, SYM_ADD_LOCAL) : NULL;
    void *rm = handle ? dlsym(handle, SYM_REMOVE) : NULL;
    void *name = handle ? dlsym(handle, SYM_NAME) : NULL;
    if (!add || !rm || !name || ops_key_once() != 0) {
        atomic_store_explicit(&local_state, OPS_OFF, memory_order_release);
        gt__warn_once(GT__TORCH_WARN_OPS, "compiled regions: libtorch's "
                      "thread-local RecordFunction callbacks not found: "
                      "no kernel events of compiled graphs");
        return 0;
    }
    pthread_mutex_lock(&ops_pause_mu);
    if (!rf_name)
        *(void **)&rf_name = name;
    *(void **)&rf_add_local = add;
    *(void **)&rf_remove = rm;
    pthread_mutex_unlock(&ops_pause_mu);
    atomic_store_explicit(&local_state, OPS_ON, memory_order_release);
    return 1;
#else
    (void)handle;
    atomic_store_explicit(&local_state, OPS_OFF, memory_order_release);
    gt__warn_once(GT__TORCH_WARN_OPS, "compiled regions: supported on x86-64 "
                  "only (schema/torch.md): no kernel events of compiled graphs");
    return 0;
#endif
}

int gt__ops_local_on(void *handle)
{
    if (!local_resolve(handle))
        return 0;
    struct ops_tls *tl_ops = ops_tls();
    if (!tl_ops || tl_ops->local_handle)
        return 0;
    struct gt__rf_callback cb = {.start = local_start, .end = local_end,
                                 .sampling_prob = 1.0};
    cb.scopes[GT__RF_FUNCTION] = 1;
    tl_ops->local_depth = 0;
    tl_ops->local_handle = rf_add_local(cb);
    return tl_ops->local_handle != 0;
}

void gt__ops_local_off(void)
{
    struct ops_tls *tl_ops = tl_ops_p;
    if (!tl_ops || !tl_ops->local_handle)
        return;
    rf_remove(tl_ops->local_handle);
    tl_ops->local_handle = 0;
    /* Entries still open (a region that raised inside an operator) get
     * no end: their RecordFunction ran the callbacks it took at its
     * start, ours among them, so none is left in practice. */
    tl_ops->local_depth = 0;
}

void gt__ops_register(void *handle)
{
    int expect = OPS_UNTRIED;
    uint64_t (*add)(struct gt__rf_callback);

    if (atomic_load_explicit(&ops_state, memory_order_relaxed) != OPS_UNTRIED)
        return;
#if defined(__x86_64__)
    *(void **)&add = dlsym(handle, SYM_ADD);
    void *name = dlsym(handle, SYM_NAME);
    if (!add || !name) {
        /* Not in this scope (Python before torch): try again later. */
        if (handle != RTLD_DEFAULT)
            gt__warn_once(GT__TORCH_WARN_OPS, "torch operators: libtorch's "
                          "RecordFunction not found: no cpu_op events");
        return;
    }
    if (!atomic_compare_exchange_strong(&ops_state, &expect, OPS_ON))
        return; /* another thread registers */
    if (ops_key_once() != 0) {
        atomic_store(&ops_state, OPS_OFF);
        return;
    }
    *(void **)&rf_name = name;
    struct gt__rf_callback cb = {.start = op_start, .end = op_end,
                                 .sampling_prob = 1.0};
    cb.scopes[GT__RF_FUNCTION] = 1;
    uint64_t h = add(cb);
    void *dis = dlsym(handle, SYM_DISABLE), *re = dlsym(handle, SYM_REENABLE);
    pthread_mutex_lock(&ops_pause_mu);
    ops_handle = h;
    if (dis && re) {
        *(void **)&rf_reenable = re;
        *(void **)&rf_disable = dis;
        atomic_store_explicit(&ops_can_pause, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&ops_pause_mu);
    gt__capture_set_started(gt__ops_resume);
    GT__DIAG("torch operators: function-scope callback %llu registered",
             (unsigned long long)h);
#else
    (void)add;
    (void)expect;
    (void)handle;
    atomic_store(&ops_state, OPS_OFF);
    gt__warn_once(GT__TORCH_WARN_OPS, "torch operators: supported on x86-64 "
                  "only (schema/torch.md): no cpu_op events");
#endif
}

int gt__ops_wanted(void)
{
    return atomic_load_explicit(&ops_state, memory_order_relaxed) ==
               OPS_UNTRIED &&
           (ops_always || gt__trig_ops_asked());
}

void gt__ops_init(void)
{
    ops_always = gt__agent_config()->ops;
    if (!ops_always) {
        /* Opt-in: nothing is registered until a trigger asks (ops=1), so
         * libtorch runs its operators without any callback of ours. */
        GT__DIAG("torch operators: only in windows that ask (GRADTRACE_OPS=1: always)");
        return;
    }
    gt__ops_register(RTLD_DEFAULT); /* a C++ program linked with libtorch */
}
