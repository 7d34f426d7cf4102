/*
 * CUDA support, part 1: starting CUPTI, the injection entry point, and the
 * kernels' layer tags.
 *
 * When CUDA is in the process, CUPTI's activity API records every kernel,
 * memcpy, memset, runtime launch/sync call and external correlation; the
 * records come back in buffers (agent/cupti_records.c turns them into wire
 * records) and per-device start events tie the device clocks to the host's
 * (agent/cupti_sync.c).
 *
 * How CUPTI starts, without the agent ever linking CUDA or CUPTI:
 *   - ctor: gt__cuda_init sets CUDA_INJECTION64_PATH (and
 *     NVTX_INJECTION64_PATH) to this library's own path when unset
 *     (gt__config_inject_self: config.c is the file that touches the
 *     environment). The
 *     CUDA driver then loads us at cuInit and calls InitializeInjection,
 *     which starts CUPTI before the first context exists: this is how a
 *     process that dlopens CUDA later (PyTorch) is covered.
 *   - ctor: when the CUDA runtime or driver is already mapped (a program
 *     linked against libcudart), CUPTI starts right away, so a failure (no
 *     driver: CUPTI answers 999) is one warning in the stream at start.
 *   - no CUDA in the process: nothing CUDA-related runs (no CUPTI load, no
 *     thread, no buffers).
 * CUPTI itself is found and loaded by agent/cupti_api.c.
 *
 * Every CUPTI call goes through GT__CUPTI_CALL: a failure becomes one
 * GT_R_WARNING naming the call, file and line, and start-up stops at the
 * first one: the process keeps running with CPU-side tracing only.
 *
 * External correlation: gt__cuda_ext_push/pop (module scopes, NVTX seq
 * ranges) and the backward-layer memory at the end of this file give each
 * kernel its layer and phase (see agent/cuda.h).
 *
 * Activity buffers come from agent/cupti_records.c's pool.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/capture.h"
#include "agent/cuda.h"
#include "agent/cupti_internal.h"
#include "agent/events.h"
#include "agent/hooks.h"
#include "agent/internal.h"
#include "agent/rec_out.h"
#include "common/alloc.h"

#define GT__CUPTI_FLUSH_MS 200u

/* ------------------------------------------------------------------ state */

enum { ST_OFF = 0, ST_RUNNING = 1, ST_FAILED = -1 };

static _Atomic int g_state;
static pthread_mutex_t g_start_lock = PTHREAD_MUTEX_INITIALIZER;

/* ------------------------------------------------------------ start */

/* CUPTI's clock for every timestamp it takes: the host's monotonic clock. */
static uint64_t cupti_timestamp(void)
{
    return gt__rec_out->now();
}

/* The start-up sequence; the first failure ends it. Under g_start_lock. */
static int cupti_start_locked(void)
{
    char msg[256];
    int r = gt__cupti_load(NULL);
    if (r) {
        snprintf(msg, sizeof(msg),
                 "CUDA is in the process but CUPTI could not be loaded (%s): "
                 "no GPU activity recorded; set GRADTRACE_CUPTI to libcupti's path",
                 r == -ENOENT ? "libcupti not found" : "symbols missing");
        gt__rec_out->warn(GT__CUDA_WARN_NO_CUPTI, msg);
        return r;
    }
    uint32_t version = 0;
    if ((r = GT__CUPTI_CALL(gt__cupti.GetVersion(&version))))
        return r;
    /* 0 before a driver is there; the soname already says >= 11.8. */
    if (version && version < GT__CUPTI_MIN_VERSION) {
        snprintf(msg, sizeof(msg),
                 "CUPTI API version %u is older than CUDA 11.0's: "
                 "no GPU activity recorded", version);
        gt__rec_out->warn(GT__CUDA_WARN_NO_CUPTI, msg);
        return -ENOTSUP;
    }
    if (gt__cupti_pool_create()) {
        gt__rec_out->warn(GT__CUDA_WARN_POOL,
                          "no memory for CUPTI activity buffers: "
                          "no GPU activity recorded");
        return -ENOMEM;
    }
    if ((r = GT__CUPTI_CALL(gt__cupti.SetThreadIdType(GT__CU_THREAD_ID_SYSTEM))))
        return r;
    /*
     * With our clock as CUPTI's, activity timestamps (GPU ones included,
     * which CUPTI converts) arrive in host CLOCK_MONOTONIC already; the
     * CUPTI-domain clock model then only confirms a zero offset. Older
     * CUPTI uses CLOCK_REALTIME, which the model maps.
     */
    if (gt__cupti.ActivityRegisterTimestampCallback &&
        (r = GT__CUPTI_CALL(gt__cupti.ActivityRegisterTimestampCallback(cupti_timestamp))))
        return r;
    if ((r = GT__CUPTI_CALL(gt__cupti.ActivityRegisterCallbacks(
             gt__cupti_buffer_requested, gt__cupti_buffer_completed))))
        return r;
    if (gt__capture_on() &&
        (r = gt__cupti_set_enabled(1)))
        return r;
    if (gt__cupti.ActivityFlushPeriod &&
        (r = GT__CUPTI_CALL(gt__cupti.ActivityFlushPeriod(GT__CUPTI_FLUSH_MS))))
        return r;
    gt__cupti_sync_cupti_pair();
    return 0;
}

/* The capture's flush (gt__capture_set_flush), registered by whatever
 * makes CUPTI run: capture stop and the exit flush hand over buffered
 * records. */
static void cuda_flush(void)
{
    if (!gt__cuda_active())
        return;
    /* Forced: also hands over buffers that are not full yet. */
    (void)GT__CUPTI_CALL(gt__cupti.ActivityFlushAll(GT__CU_FLUSH_FORCED));
}

/* What the event core calls so that kernels carry their layer and phase
 * (agent/events.h), registered once CUPTI runs. */
static const struct gt__kernel_tags cuda_tags = {
    .push = gt__cuda_ext_push,
    .pop = gt__cuda_ext_pop,
    .node_created = gt__cuda_node_created,
    .bwd_begin = gt__cuda_bwd_begin,
    .bwd_end = gt__cuda_bwd_end,
};

/*
 * Starts CUPTI once per process; later calls report the first outcome.
 * Never waits for another start: CUPTI may call into the driver, whose
 * cuInit calls InitializeInjection (on this thread: re-entry, or on a
 * thread already holding the driver's init lock): a busy lock means a
 * start is under way, so the caller just goes on.
 */
static int cupti_start(void)
{
    int st = atomic_load(&g_state);
    if (st != ST_OFF)
        return st == ST_RUNNING ? 0 : -EIO;
    if (pthread_mutex_trylock(&g_start_lock))
        return -EBUSY;
    int r = 0;
    if (atomic_load(&g_state) == ST_OFF) {
        r = cupti_start_locked();
        if (!r)
            gt__capture_set_flush(cuda_flush);
        atomic_store(&g_state, r ? ST_FAILED : ST_RUNNING);
        if (!r)
            gt__events_set_tags(&cuda_tags);
        if (!r && gt__cupti_sync_start())
            gt__rec_out->warn(GT__CUDA_WARN_SYNC,
                              "could not start the CUDA clock-sync thread: "
                              "no per-device clock offsets");
        GT__DIAG("cupti: start %s", r ? "failed" : "ok");
    } else if (atomic_load(&g_state) != ST_RUNNING) {
        r = -EIO;
    }
    pthread_mutex_unlock(&g_start_lock);
    return r;
}

int gt__cuda_active(void)
{
    return atomic_load_explicit(&g_state, memory_order_relaxed) == ST_RUNNING;
}

/* ------------------------------------------------------------ entry points */

void gt__cuda_init(void)
{
    if (!gt__agent_config()->cuda)
        return;
    /* The driver loads us by this path at cuInit: same handle, no copy. */
    if (gt__config_inject_self() < 0)
        GT__DIAG("cupti: this library's path not found: no CUDA injection");
    if (gt__cuda_in_process())
        (void)cupti_start();
}

/*
 * CUDA injection entry point: the driver calls it from cuInit when
 * CUDA_INJECTION64_PATH names this library.
 * @return 1 (the driver ignores failure; ours is in the stream).
 */
GT_API int InitializeInjection(void)
{
    if (!gt__agent_config()->cuda)
        return 1;
    (void)gt__cuda_in_process(); /* note libcudart's directory for the search */
    (void)cupti_start();
    return 1;
}

/* ------------------------------------------------------ external correlation */

/*
 * CUPTI's external-id stacks are per thread and per kind; CUPTI can start
 * in the middle of a scope (at cuInit, typically inside the first module
 * forward that touches the GPU), so the scope's end must not pop what its
 * begin never pushed: a per-thread count of our own pushes per kind
 * decides. Pushes only ever start at one moment and scopes nest, so the
 * count pairs every pop with its push.
 */
static __thread unsigned t_pushed[4];

static uint32_t ext_kind_to_cupti(uint16_t kind)
{
    switch (kind) {
    case GT_EXT_LAYER_FWD:
        return GT__CU_EXT_CUSTOM0;
    case GT_EXT_LAYER_BWD:
        return GT__CU_EXT_CUSTOM1;
    case GT_EXT_NVTX_SEQ:
        return GT__CU_EXT_CUSTOM2;
    default:
        return 0;
    }
}

void gt__cuda_ext_push(uint16_t kind, uint64_t ext)
{
    if (GT__LIKELY(atomic_load_explicit(&g_state, memory_order_relaxed) !=
                  ST_RUNNING))
        return;
    uint32_t k = ext_kind_to_cupti(kind);
    if (k && !GT__CUPTI_CALL(gt__cupti.ActivityPushExternalCorrelationId(k, ext)))
        t_pushed[kind & 3]++;
}

void gt__cuda_ext_pop(uint16_t kind)
{
    uint32_t k = ext_kind_to_cupti(kind);
    if (GT__LIKELY(!k || !t_pushed[kind & 3]))
        return;
    uint64_t last;
    t_pushed[kind & 3]--;
    (void)GT__CUPTI_CALL(gt__cupti.ActivityPopExternalCorrelationId(k, &last));
}

/* ------------------------------------------------------ backward layers */

/*
 * Which layer a backward node's kernels belong to.
 *
 * Module forward scopes push their path as an external correlation id, so
 * forward kernels carry their layer directly. A backward node runs later,
 * often on another thread (autograd's per-device thread), outside any
 * module scope: its layer is the module that was innermost when the node
 * was created in the forward. The agent remembers that at creation
 * (gt__cuda_node_created, from the event core's gt__node_created) and
 * pushes it as GT_EXT_LAYER_BWD around the node's execution
 * (gt__cuda_bwd_begin/end, from gt__bwd_node_begin/end), so backward
 * kernels carry layer and phase.
 *
 * The memory is a fixed direct-mapped table keyed by (forward thread id,
 * sequence number): one 64-bit atomic per slot holding a 32-bit key hash
 * and the 32-bit layer id, written and read in one access, so concurrent
 * writers can only replace an entry, never tear it. A slot overwritten
 * before its node runs backward (more than GT__LAYER_SLOTS nodes alive, or
 * a hash collision) costs that node's kernels their layer, never
 * correctness of anything else. No lock, no allocation.
 */
#define GT__LAYER_SLOTS (1u << 16)

static _Atomic uint64_t g_slots[GT__LAYER_SLOTS];

/* Per-thread: how many backward pushes are open (see gt__cuda_bwd_end). */
static __thread unsigned t_bwd_open;

static uint64_t mix(uint64_t seq, uint64_t tid)
{
    uint64_t h = seq * 0x9e3779b97f4a7c15ull ^ (tid + 0x632be59bd9b4e019ull) * 0xbf58476d1ce4e5b9ull;
    h ^= h >> 31;
    h *= 0x94d049bb133111ebull;
    return h ^ (h >> 29);
}

void gt__cuda_node_created(uint64_t seq, uint64_t fwd_tid, uint32_t layer)
{
    if (GT__LIKELY(atomic_load_explicit(&g_state, memory_order_relaxed) !=
                  ST_RUNNING) || !layer)
        return;
    uint64_t h = mix(seq, fwd_tid);
    uint32_t key = (uint32_t)(h >> 32) | 1u;
    atomic_store_explicit(&g_slots[h & (GT__LAYER_SLOTS - 1)],
                          (uint64_t)key << 32 | layer, memory_order_relaxed);
}

uint32_t gt__cuda_node_layer(uint64_t seq, uint64_t fwd_tid)
{
    uint64_t h = mix(seq, fwd_tid);
    uint32_t key = (uint32_t)(h >> 32) | 1u;
    uint64_t v = atomic_load_explicit(&g_slots[h & (GT__LAYER_SLOTS - 1)],
                                      memory_order_relaxed);
    return (uint32_t)(v >> 32) == key ? (uint32_t)v : 0;
}

void gt__cuda_bwd_begin(uint64_t seq, uint64_t fwd_tid)
{
    if (GT__LIKELY(atomic_load_explicit(&g_state, memory_order_relaxed) !=
                  ST_RUNNING))
        return;
    uint32_t layer = gt__cuda_node_layer(seq, fwd_tid);
    if (!layer)
        return;
    gt__cuda_ext_push(GT_EXT_LAYER_BWD, layer);
    t_bwd_open++;
}

void gt__cuda_bwd_end(void)
{
    if (GT__LIKELY(!t_bwd_open))
        return;
    t_bwd_open--;
    gt__cuda_ext_pop(GT_EXT_LAYER_BWD);
}

/* ------------------------------------------------------------ tests */

void gt__cupti_test_set_running(int on)
{
    if (on)
        gt__capture_set_flush(cuda_flush);
    atomic_store(&g_state, on ? ST_RUNNING : ST_OFF);
    gt__events_set_tags(on ? &cuda_tags : NULL);
}
