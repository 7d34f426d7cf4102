/*
 * CUDA support, part 1: finding and starting CUPTI.
 *
 * When CUDA is in the process, CUPTI's activity API records every kernel,
 * memcpy, memset, runtime launch/sync call and external correlation; the
 * records come back in buffers (agent/cupti_records.c turns them into wire
 * records) and per-device start events tie the device clocks to the host's
 * (agent/cupti_sync.c).
 *
 * How CUPTI starts, without the agent ever linking CUDA or CUPTI:
 *   - ctor: gt__cuda_init sets CUDA_INJECTION64_PATH (and, through nvtx.c,
 *     NVTX_INJECTION64_PATH) to this library's own path when unset. The
 *     CUDA driver then loads us at cuInit and calls InitializeInjection,
 *     which starts CUPTI before the first context exists: this is how a
 *     process that dlopens CUDA later (PyTorch) is covered.
 *   - ctor: when the CUDA runtime or driver is already mapped (a program
 *     linked against libcudart), CUPTI starts right away, so a failure (no
 *     driver: CUPTI answers 999) is one warning in the stream at start.
 *   - no CUDA in the process: nothing CUDA-related runs (no CUPTI load, no
 *     thread, no buffers).
 * CUPTI itself is found with dlopen, preferring a copy already loaded in
 * the process (RTLD_NOLOAD), then GRADTRACE_CUPTI, CUDA_HOME, the CUDA
 * runtime's own directory (and the pip wheel layout next to it), and
 * /usr/local/cuda.
 *
 * Every CUPTI call goes through GT__CUPTI_CALL: a failure becomes one
 * GT_R_WARNING naming the call, file and line, and start-up stops at the
 * first one: the process keeps running with CPU-side tracing only.
 *
 * External correlation: gt__cuda_ext_push/pop (module scopes, NVTX seq
 * ranges) and the backward-layer memory at the end of this file give each
 * kernel its layer and phase (see agent/cuda.h).
 *
 * Buffers: CUPTI asks for activity buffers from its own threads, where
 * allocating is not allowed; they come from a pool allocated once at start
 * (GT__CUPTI_BUFFERS x GT__CUPTI_BUFFER_SIZE) through a lock-free bitmap. An
 * empty pool makes CUPTI drop records, which it counts and we report.
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
#include "agent/core.h"
#include "agent/cuda.h"
#include "agent/cupti_internal.h"
#include "agent/internal.h"
#include "agent/nvtx.h"
#include "agent/rec_out.h"
#include "common/alloc.h"

#define GT__CUPTI_BUFFER_SIZE (512u << 10)
#define GT__CUPTI_BUFFERS 32u
#define GT__CUPTI_FLUSH_MS 200u

_Static_assert(GT__CUPTI_BUFFERS <= 64, "pool bitmap is one uint64_t");

/* ------------------------------------------------------------------ state */

struct gt__cupti_api gt__cupti;

enum { ST_OFF = 0, ST_RUNNING = 1, ST_FAILED = -1 };

static _Atomic int g_state;
static pthread_mutex_t g_start_lock = PTHREAD_MUTEX_INITIALIZER;
static void *g_cupti_handle;
static char g_cudart_dir[GT__PATH_MAX]; /* where the CUDA runtime was found */

static uint8_t *g_pool;
static _Atomic uint64_t g_pool_free; /* bit i set: buffer i is free */

/* ------------------------------------------------------------ checking */

int gt__cupti_check(int result, const char *call, const char *file, int line)
{
    if (GT__LIKELY(result == GT__CUPTI_SUCCESS))
        return 0;
    const char *name = NULL;
    if (gt__cupti.GetResultString &&
        gt__cupti.GetResultString(result, &name) != GT__CUPTI_SUCCESS)
        name = NULL;
    char msg[512];
    snprintf(msg, sizeof(msg), "CUPTI %s failed at %s:%d: %s (%d)", call,
             file, line, name ? name : "CUPTI error", result);
    gt__rec_out->warn((uint32_t)result, msg);
    return -EIO;
}

/* ------------------------------------------------------------ loading */

/* Finds the mapped CUDA runtime/driver; remembers the runtime's dir. */
static int find_cuda_cb(struct dl_phdr_info *info, size_t size, void *ud)
{
    (void)size;
    int *found = ud;
    const char *name = info->dlpi_name;
    if (!name || !*name)
        return 0;
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    if (!strncmp(base, "libcudart.so", 12)) {
        size_t dir_len = (size_t)(base - name);
        if (dir_len > 0 && dir_len < sizeof(g_cudart_dir)) {
            memcpy(g_cudart_dir, name, dir_len - 1);
            g_cudart_dir[dir_len - 1] = '\0';
        }
        *found = 1;
    } else if (!strncmp(base, "libcuda.so", 10)) {
        *found = 1;
    }
    return 0;
}

/* @return 1 when the CUDA runtime or driver is mapped in this process. */
static int cuda_in_process(void)
{
    int found = 0;
    dl_iterate_phdr(find_cuda_cb, &found);
    return found;
}

static void *try_open(const char *dir, const char *name, int flags)
{
    char path[GT__PATH_MAX + 64];
    if (dir) {
        if (snprintf(path, sizeof(path), "%s/%s", dir, name) >=
            (int)sizeof(path))
            return NULL;
        name = path;
    }
    void *h = dlopen(name, flags);
    if (h)
        GT__DIAG("cupti: loaded %s", name);
    return h;
}

static const char *const cupti_names[] = {
    "libcupti.so.13", "libcupti.so.12", "libcupti.so.11.8", "libcupti.so",
};

static void *open_in(const char *dir)
{
    for (size_t i = 0; i < sizeof(cupti_names) / sizeof(cupti_names[0]); i++) {
        void *h = try_open(dir, cupti_names[i], RTLD_NOW | RTLD_LOCAL);
        if (h)
            return h;
    }
    return NULL;
}

static void *open_cupti(const char *path)
{
    void *h;
    if (path)
        return try_open(NULL, path, RTLD_NOW | RTLD_LOCAL);
    for (size_t i = 0; i < sizeof(cupti_names) / sizeof(cupti_names[0]); i++)
        if ((h = try_open(NULL, cupti_names[i], RTLD_NOW | RTLD_NOLOAD)))
            return h;
    const char *env = gt__agent_config()->cupti_path;
    if (*env && (h = try_open(NULL, env, RTLD_NOW | RTLD_LOCAL)))
        return h;
    char dir[GT__PATH_MAX + 64];
    const char *home = gt__agent_config()->cuda_home;
    if (*home) {
        snprintf(dir, sizeof(dir), "%s/lib64", home);
        if ((h = open_in(dir)))
            return h;
        snprintf(dir, sizeof(dir), "%s/extras/CUPTI/lib64", home);
        if ((h = open_in(dir)))
            return h;
    }
    if (g_cudart_dir[0]) {
        if ((h = open_in(g_cudart_dir)))
            return h;
        /* pip wheels: nvidia/cuda_runtime/lib next to nvidia/cuda_cupti/lib */
        snprintf(dir, sizeof(dir), "%s/../../cuda_cupti/lib", g_cudart_dir);
        if ((h = open_in(dir)))
            return h;
    }
    if ((h = open_in("/usr/local/cuda/lib64")))
        return h;
    if ((h = open_in("/usr/local/cuda/extras/CUPTI/lib64")))
        return h;
    return open_in(NULL); /* the loader's own search path */
}

#define SYM(field, name, required)                                            \
    do {                                                                      \
        *(void **)&gt__cupti.field = dlsym(h, name);                          \
        if ((required) && !gt__cupti.field)                                   \
            missing = name;                                                   \
    } while (0)

int gt__cupti_load(const char *path)
{
    void *h = open_cupti(path);
    if (!h)
        return -ENOENT;
    const char *missing = NULL;
    memset(&gt__cupti, 0, sizeof(gt__cupti));
    SYM(GetVersion, "cuptiGetVersion", 1);
    SYM(GetResultString, "cuptiGetResultString", 0);
    SYM(SetThreadIdType, "cuptiSetThreadIdType", 1);
    SYM(ActivityRegisterTimestampCallback,
        "cuptiActivityRegisterTimestampCallback", 0);
    SYM(ActivityRegisterCallbacks, "cuptiActivityRegisterCallbacks", 1);
    SYM(ActivityEnable, "cuptiActivityEnable", 1);
    SYM(ActivityDisable, "cuptiActivityDisable", 1);
    SYM(ActivityGetNextRecord, "cuptiActivityGetNextRecord", 1);
    SYM(ActivityGetNumDroppedRecords, "cuptiActivityGetNumDroppedRecords", 1);
    SYM(ActivityFlushAll, "cuptiActivityFlushAll", 1);
    SYM(ActivityFlushPeriod, "cuptiActivityFlushPeriod", 0);
    SYM(ActivityPushExternalCorrelationId,
        "cuptiActivityPushExternalCorrelationId", 1);
    SYM(ActivityPopExternalCorrelationId,
        "cuptiActivityPopExternalCorrelationId", 1);
    SYM(ActivityEnableCudaEventDeviceTimestamps,
        "cuptiActivityEnableCudaEventDeviceTimestamps", 0);
    SYM(GetTimestamp, "cuptiGetTimestamp", 1);
    SYM(GetCallbackName, "cuptiGetCallbackName", 0);
    SYM(GetStreamId, "cuptiGetStreamId", 0);
    if (missing) {
        GT__DIAG("cupti: %s missing", missing);
        memset(&gt__cupti, 0, sizeof(gt__cupti));
        dlclose(h);
        return -ENOSYS;
    }
    g_cupti_handle = h;
    return 0;
}

/* ------------------------------------------------------------ buffer pool */

static int pool_create(void)
{
    if (g_pool)
        return 0;
    g_pool = gt__malloc((size_t)GT__CUPTI_BUFFERS * GT__CUPTI_BUFFER_SIZE);
    if (!g_pool)
        return -ENOMEM;
    atomic_store(&g_pool_free, GT__CUPTI_BUFFERS == 64
                                   ? UINT64_MAX
                                   : (1ull << GT__CUPTI_BUFFERS) - 1);
    return 0;
}

/* CUPTI's buffer-requested callback: lock-free, no allocation. */
static void buffer_requested(uint8_t **buf, size_t *size, size_t *max_records)
{
    uint64_t m = atomic_load_explicit(&g_pool_free, memory_order_acquire);
    *max_records = 0;
    while (m) {
        unsigned i = (unsigned)__builtin_ctzll(m);
        if (atomic_compare_exchange_weak_explicit(&g_pool_free, &m,
                                                  m & ~(1ull << i),
                                                  memory_order_acq_rel,
                                                  memory_order_acquire)) {
            *buf = g_pool + (size_t)i * GT__CUPTI_BUFFER_SIZE;
            *size = GT__CUPTI_BUFFER_SIZE;
            return;
        }
    }
    /* Pool empty: CUPTI drops and counts, reported as GT_LOST_CUPTI. */
    *buf = NULL;
    *size = 0;
}

void gt__cupti_pool_put(uint8_t *buf)
{
    if (!g_pool || buf < g_pool ||
        buf >= g_pool + (size_t)GT__CUPTI_BUFFERS * GT__CUPTI_BUFFER_SIZE)
        return;
    size_t i = (size_t)(buf - g_pool) / GT__CUPTI_BUFFER_SIZE;
    atomic_fetch_or_explicit(&g_pool_free, 1ull << i, memory_order_release);
}

/* ------------------------------------------------------------ start */

/* CUPTI's clock for every timestamp it takes: the host's monotonic clock. */
static uint64_t cupti_timestamp(void)
{
    return gt__rec_out->now();
}

static const uint32_t activity_kinds[] = {
    GT__CU_KIND_CONCURRENT_KERNEL, GT__CU_KIND_MEMCPY, GT__CU_KIND_MEMSET,
    GT__CU_KIND_RUNTIME, GT__CU_KIND_EXTERNAL_CORRELATION, GT__CU_KIND_OVERHEAD,
};

int gt__cupti_set_enabled(int on)
{
    for (size_t i = 0; i < sizeof(activity_kinds) / sizeof(activity_kinds[0]);
         i++) {
        int r = on ? GT__CUPTI_CALL(gt__cupti.ActivityEnable(activity_kinds[i]))
                   : GT__CUPTI_CALL(gt__cupti.ActivityDisable(activity_kinds[i]));
        if (r)
            return r;
    }
    /* Start events' device timestamps: optional, older CUPTI lacks them. */
    if (gt__cupti.ActivityEnableCudaEventDeviceTimestamps) {
        if (on && (GT__CUPTI_CALL(gt__cupti.ActivityEnable(GT__CU_KIND_CUDA_EVENT)) ||
                   GT__CUPTI_CALL(gt__cupti.ActivityEnableCudaEventDeviceTimestamps(1))))
            return -EIO;
        if (!on && GT__CUPTI_CALL(gt__cupti.ActivityDisable(GT__CU_KIND_CUDA_EVENT)))
            return -EIO;
    }
    return 0;
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
    if (pool_create()) {
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
             buffer_requested, gt__cupti_buffer_completed))))
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

/* The path this library was loaded from, for the injection variables. */
static int self_path(char *out, size_t cap)
{
    Dl_info info;
    if (!dladdr((void *)self_path, &info) || !info.dli_fname ||
        !*info.dli_fname)
        return -ENOENT;
    char real[PATH_MAX];
    if (!realpath(info.dli_fname, real))
        return -errno;
    if (strlen(real) >= cap)
        return -ENAMETOOLONG;
    strcpy(out, real);
    return 0;
}

void gt__cuda_init(void)
{
    if (!gt__agent_config()->cuda)
        return;
    char self[GT__PATH_MAX];
    if (!self_path(self, sizeof(self))) {
        /* The driver loads us by this path at cuInit: same handle, no copy. */
        setenv("CUDA_INJECTION64_PATH", self, 0);
        gt__nvtx_env(self);
    }
    if (cuda_in_process())
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
    (void)cuda_in_process(); /* note libcudart's directory for the search */
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
 * (gt__cuda_node_created, from gt_node_created) and pushes it as
 * GT_EXT_LAYER_BWD around the node's execution (gt__cuda_bwd_begin/end,
 * from gt_bwd_node_begin/end), so backward kernels carry layer and phase.
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
}
