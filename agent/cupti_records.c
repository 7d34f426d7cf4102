/*
 * CUDA support, part 2: CUPTI activity buffers -> wire records.
 *
 * CUPTI calls gt__cupti_buffer_completed from its worker thread (or from
 * whichever thread forces a flush) with a buffer of activity records; the
 * real cuptiActivityGetNextRecord walks it (record sizes are CUPTI's
 * business) and each record we know becomes one wire record:
 *
 *   CONCURRENT_KERNEL / KERNEL -> GT_R_GPU_KERNEL
 *   MEMCPY                     -> GT_R_GPU_MEMCPY
 *   MEMSET                     -> GT_R_GPU_MEMSET
 *   RUNTIME (and DRIVER)       -> GT_R_CUDA_API, launches, copies, syncs and
 *                                 allocations only (the rest is noise such
 *                                 as cudaGetDevice, called per op by torch)
 *   EXTERNAL_CORRELATION       -> GT_R_EXT_CORR (layer fwd/bwd, NVTX seq)
 *   OVERHEAD                   -> GT_R_CUDA_API named "CUPTI overhead: ..."
 *                                 with cbid GT__CUDA_CBID_OVERHEAD | kind
 *   CUDA_EVENT                 -> start events for clock sync (cupti_sync.c)
 *
 * Timestamps go through the CUPTI-domain clock model onto host
 * CLOCK_MONOTONIC before they are written. After every buffer the
 * cumulative number of records CUPTI dropped is emitted (GT_R_LOST,
 * GT_LOST_CUPTI, tid 0), so the trace always states it, zero included.
 *
 * Names are interned once: kernel names by CUPTI's string pointer (stable
 * for the session) in a fixed open-addressing table, API names by callback
 * id in a fixed array. Buffers are processed under one mutex: completion
 * is not a hot path, and it may run on two threads during a forced flush.
 *
 * The buffers themselves: CUPTI asks for them from its own threads, where
 * allocating is not allowed; they come from a pool allocated once at
 * start (GT__CUPTI_BUFFERS x GT__CUPTI_BUFFER_SIZE) through a lock-free
 * bitmap, and go back to it once converted. An empty pool makes CUPTI
 * drop records, which it counts and we report.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "agent/cupti_internal.h"
#include "agent/internal.h"
#include "agent/rec_out.h"
#include "common/alloc.h"

#define NAME_SLOTS 4096u          /* kernel-name cache, power of two */
#define CBID_SLOTS 4096u          /* API-name cache per domain */
#define CBID_SKIP UINT32_MAX      /* cached "not recorded" */

/* cuda_api.cbid flags: which CUPTI domain or pseudo-API the id is from. */
#define GT__CUDA_CBID_DRIVER 0x80000000u
#define GT__CUDA_CBID_OVERHEAD 0x40000000u

#define GT__CUPTI_BUFFER_SIZE (512u << 10)
#define GT__CUPTI_BUFFERS 32u

_Static_assert(GT__CUPTI_BUFFERS <= 64, "pool bitmap is one uint64_t");

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

static uint8_t *g_pool;
static _Atomic uint64_t g_pool_free; /* bit i set: buffer i is free */

static struct {
    const char *ptr;
    uint32_t id;
} g_names[NAME_SLOTS];
static uint32_t g_cbid_names[2][CBID_SLOTS];
static uint64_t g_dropped;

/* ------------------------------------------------------------ buffer pool */

int gt__cupti_pool_create(void)
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
void gt__cupti_buffer_requested(uint8_t **buf, size_t *size, size_t *max_records)
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

/* Returns buf to the pool (no-op for other memory). */
static void pool_put(uint8_t *buf)
{
    if (!g_pool || buf < g_pool ||
        buf >= g_pool + (size_t)GT__CUPTI_BUFFERS * GT__CUPTI_BUFFER_SIZE)
        return;
    size_t i = (size_t)(buf - g_pool) / GT__CUPTI_BUFFER_SIZE;
    atomic_fetch_or_explicit(&g_pool_free, 1ull << i, memory_order_release);
}

void gt__cupti_records_reset(void)
{
    memset(g_names, 0, sizeof(g_names));
    memset(g_cbid_names, 0, sizeof(g_cbid_names));
    g_dropped = 0;
}

static uint32_t intern_str(const char *s)
{
    return gt__rec_out->intern(s, strlen(s));
}

static uint32_t kernel_name(const char *name)
{
    if (!name)
        return intern_str("(unnamed kernel)");
    uintptr_t h = (uintptr_t)name;
    h ^= h >> 17;
    h *= 0x9e3779b97f4a7c15ull;
    for (uint32_t i = 0; i < NAME_SLOTS; i++) {
        uint32_t slot = (uint32_t)((h >> 20) + i) & (NAME_SLOTS - 1);
        if (g_names[slot].ptr == name)
            return g_names[slot].id;
        if (!g_names[slot].ptr) {
            uint32_t id = intern_str(name);
            if (id) {
                g_names[slot].ptr = name;
                g_names[slot].id = id;
            }
            return id;
        }
    }
    return intern_str(name); /* table full: still correct, just slower */
}

/* API calls worth a span: they launch, copy, allocate or wait. */
static int api_wanted(const char *name)
{
    static const char *const prefixes[] = {
        "cudaLaunch", "cudaGraphLaunch", "cudaMemcpy", "cudaMemset",
        "cudaMalloc", "cudaFree", "cudaStreamWaitEvent", "cudaEventRecord",
        "cuLaunch", "cuGraphLaunch", "cuMemcpy", "cuMemset",
    };
    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
        if (!strncmp(name, prefixes[i], strlen(prefixes[i])))
            return 1;
    return strstr(name, "Synchronize") != NULL;
}

/*
 * @return the string id for API cbid of domain (GT_CU_DOMAIN_*), CBID_SKIP
 *         for calls not recorded, 0 when interning failed.
 */
static uint32_t api_name(uint32_t domain, uint32_t cbid)
{
    uint32_t *slot = cbid < CBID_SLOTS
                         ? &g_cbid_names[domain == GT__CU_DOMAIN_DRIVER][cbid]
                         : NULL;
    if (slot && *slot)
        return *slot;
    const char *name = NULL;
    char buf[96];
    uint32_t id;
    /* Not GT__CUPTI_CALL: before a driver initialised CUPTI the lookup
     * fails as a matter of course, and the fallback name is fine. */
    if (gt__cupti.GetCallbackName &&
        gt__cupti.GetCallbackName(domain, cbid, &name) == GT__CUPTI_SUCCESS &&
        name && *name) {
        if (!api_wanted(name)) {
            id = CBID_SKIP;
        } else {
            /* "cudaLaunchKernel_v7000" -> "cudaLaunchKernel" */
            size_t len = strlen(name);
            const char *v = strstr(name, "_v");
            if (v && v[2] >= '0' && v[2] <= '9')
                len = (size_t)(v - name);
            id = gt__rec_out->intern(name, len);
        }
    } else {
        /* No name (CUPTI not initialised by a driver): keep the record. */
        snprintf(buf, sizeof(buf), "%s API #%u",
                 domain == GT__CU_DOMAIN_DRIVER ? "CUDA driver" : "CUDA runtime",
                 cbid);
        id = intern_str(buf);
    }
    if (slot && id)
        *slot = id;
    return id;
}

static const char *overhead_name(uint32_t kind)
{
    switch (kind) {
    case 1: return "CUPTI overhead: driver compiler";
    case 1u << 16: return "CUPTI overhead: buffer flush";
    case 2u << 16: return "CUPTI overhead: instrumentation";
    case 3u << 16: return "CUPTI overhead: resource";
    case 4u << 16: return "CUPTI overhead: module loading";
    case 5u << 16: return "CUPTI overhead: lazy function loading";
    case 6u << 16: return "CUPTI overhead: command buffer full";
    case 7u << 16: return "CUPTI overhead: activity buffer request";
    default: return "CUPTI overhead";
    }
}

static uint32_t clamp_u32(int32_t v)
{
    return v < 0 ? 0 : (uint32_t)v;
}

static void emit_kernel(const struct gt__cu_kernel *k)
{
    if (!k->start || k->end < k->start)
        return; /* CUPTI marks unknown times with 0: nothing to place */
    struct gt_r_gpu_kernel r = {
        .h = {GT_R_GPU_KERNEL, sizeof(r)},
        .device = k->device_id,
        .stream = k->stream_id,
        .name = kernel_name(k->name),
        .corr = k->correlation_id,
        .start = gt__cupti_map_ts(k->start),
        .end = gt__cupti_map_ts(k->end),
        .grid = {clamp_u32(k->grid[0]), clamp_u32(k->grid[1]),
                 clamp_u32(k->grid[2])},
        .block = {clamp_u32(k->block[0]), clamp_u32(k->block[1]),
                  clamp_u32(k->block[2])},
        .shared_mem = clamp_u32(k->static_shared_memory) +
                      clamp_u32(k->dynamic_shared_memory),
        .registers = k->registers_per_thread,
    };
    (void)gt__rec_out->emit(&r, sizeof(r));
}

static void emit_memcpy(const struct gt__cu_memcpy *m)
{
    if (!m->start || m->end < m->start)
        return;
    struct gt_r_gpu_memcpy r = {
        .h = {GT_R_GPU_MEMCPY, sizeof(r)},
        .device = m->device_id,
        .stream = m->stream_id,
        .corr = m->correlation_id,
        .copy_kind = m->copy_kind,
        .src_kind = m->src_kind,
        .dst_kind = m->dst_kind,
        .bytes = m->bytes,
        .start = gt__cupti_map_ts(m->start),
        .end = gt__cupti_map_ts(m->end),
    };
    (void)gt__rec_out->emit(&r, sizeof(r));
}

static void emit_memset(const struct gt__cu_memset *m)
{
    if (!m->start || m->end < m->start)
        return;
    struct gt_r_gpu_memset r = {
        .h = {GT_R_GPU_MEMSET, sizeof(r)},
        .device = m->device_id,
        .stream = m->stream_id,
        .corr = m->correlation_id,
        .value = m->value,
        .bytes = m->bytes,
        .start = gt__cupti_map_ts(m->start),
        .end = gt__cupti_map_ts(m->end),
    };
    (void)gt__rec_out->emit(&r, sizeof(r));
}

static void emit_api(const struct gt__cu_api *a, uint32_t domain)
{
    uint32_t name = api_name(domain, a->cbid);
    if (name == CBID_SKIP || a->end < a->start)
        return;
    struct gt_r_cuda_api r = {
        .h = {GT_R_CUDA_API, sizeof(r)},
        .tid = a->thread_id,
        .cbid = a->cbid | (domain == GT__CU_DOMAIN_DRIVER ? GT__CUDA_CBID_DRIVER : 0),
        .corr = a->correlation_id,
        .name = name,
        .start = gt__cupti_map_ts(a->start),
        .end = gt__cupti_map_ts(a->end),
    };
    (void)gt__rec_out->emit(&r, sizeof(r));
}

static void emit_ext(const struct gt__cu_ext_corr *e)
{
    uint16_t kind;
    switch (e->external_kind) {
    case GT__CU_EXT_CUSTOM0: kind = GT_EXT_LAYER_FWD; break;
    case GT__CU_EXT_CUSTOM1: kind = GT_EXT_LAYER_BWD; break;
    case GT__CU_EXT_CUSTOM2: kind = GT_EXT_NVTX_SEQ; break;
    default: return; /* another tool's ids */
    }
    struct gt_r_ext_corr r = {
        .h = {GT_R_EXT_CORR, sizeof(r)},
        .kind = kind,
        .corr = e->correlation_id,
        .ext = e->external_id,
    };
    (void)gt__rec_out->emit(&r, sizeof(r));
}

static void emit_overhead(const struct gt__cu_overhead *o)
{
    if (!o->start || o->end < o->start)
        return;
    struct gt_r_cuda_api r = {
        .h = {GT_R_CUDA_API, sizeof(r)},
        .tid = o->object_kind == GT__CU_OBJECT_THREAD ? o->object_id[1] : 0,
        .cbid = GT__CUDA_CBID_OVERHEAD | (o->overhead_kind & 0x3fffffffu),
        .corr = 0,
        .name = intern_str(overhead_name(o->overhead_kind)),
        .start = gt__cupti_map_ts(o->start),
        .end = gt__cupti_map_ts(o->end),
    };
    (void)gt__rec_out->emit(&r, sizeof(r));
}

static void convert(const void *rec)
{
    const struct gt__cu_record *r = rec;
    switch (r->kind) {
    case GT__CU_KIND_CONCURRENT_KERNEL:
    case GT__CU_KIND_KERNEL:
        emit_kernel(rec);
        break;
    case GT__CU_KIND_MEMCPY:
        emit_memcpy(rec);
        break;
    case GT__CU_KIND_MEMSET:
        emit_memset(rec);
        break;
    case GT__CU_KIND_RUNTIME:
        emit_api(rec, GT__CU_DOMAIN_RUNTIME);
        break;
    case GT__CU_KIND_DRIVER:
        emit_api(rec, GT__CU_DOMAIN_DRIVER);
        break;
    case GT__CU_KIND_EXTERNAL_CORRELATION:
        emit_ext(rec);
        break;
    case GT__CU_KIND_OVERHEAD:
        emit_overhead(rec);
        break;
    case GT__CU_KIND_CUDA_EVENT:
        gt__cupti_sync_on_event(rec);
        break;
    default:
        break;
    }
}

void gt__cupti_buffer_completed(void *ctx, uint32_t stream, uint8_t *buf,
                                size_t size, size_t valid)
{
    (void)size;
    pthread_mutex_lock(&g_lock);
    /* A fresh pair per buffer keeps the CUPTI-domain model current. */
    gt__cupti_sync_cupti_pair();
    if (buf && valid && gt__cupti.ActivityGetNextRecord) {
        void *rec = NULL;
        for (;;) {
            int r = gt__cupti.ActivityGetNextRecord(buf, valid, &rec);
            if (r == GT__CUPTI_ERROR_MAX_LIMIT_REACHED)
                break; /* end of the valid records */
            if (gt__cupti_check(r, "cuptiActivityGetNextRecord", __FILE__,
                                __LINE__))
                break;
            convert(rec);
        }
    }
    size_t dropped = 0;
    if (gt__cupti.ActivityGetNumDroppedRecords &&
        !GT__CUPTI_CALL(gt__cupti.ActivityGetNumDroppedRecords(ctx, stream,
                                                              &dropped)))
        g_dropped += dropped;
    struct gt_r_lost lost = {
        .h = {GT_R_LOST, sizeof(lost)},
        .tid = 0,
        .what = GT_LOST_CUPTI,
        .count = g_dropped,
    };
    (void)gt__rec_out->emit(&lost, sizeof(lost));
    pthread_mutex_unlock(&g_lock);
    pool_put(buf);
}
