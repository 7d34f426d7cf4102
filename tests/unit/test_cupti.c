/*
 * CUPTI record decoding through the real libcupti (no GPU needed): activity
 * buffers are built with the real cupti.h structs, handed to the agent's
 * buffer-completed path, which walks them with the real
 * cuptiActivityGetNextRecord; the wire records that come out are checked,
 * including the correlations that attribute kernels to layers and phases
 * and the start-event clock pairs.
 *
 * Needs the CUDA toolkit's headers and libcupti (CUDA_HOME, default
 * /usr/local/cuda); without them every test is skipped, never passed.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent/cuda.h"
#include "agent/cupti_internal.h"
#include "agent/internal.h"
#include "agent/rec_out.h"
#include "common/codec.h"
#include "tests/unit/rec_out_fixture.h"

#if __has_include(<cupti.h>)
#include <cupti.h>
#include <cupti_activity_deprecated.h>
#define HAVE_CUPTI_HEADERS 1
#else
#define HAVE_CUPTI_HEADERS 0
#endif


/* ------------------------------------------------------------ test output */

static char g_warning[512];
static uint32_t g_warn_code;
static int g_warnings;

static uint64_t test_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * CUPTI's clock at setup (the real library's: CLOCK_REALTIME without a
 * timestamp callback) and the host monotonic time it corresponds to,
 * measured independently of the agent. Records are stamped g_base + x.
 */
static uint64_t g_base, g_base_mono, g_base_half;

static void test_warn(uint32_t code, const char *msg)
{
    g_warn_code = code;
    snprintf(g_warning, sizeof(g_warning), "%s", msg);
    g_warnings++;
}

static const struct gt__rec_out test_out = {
    .emit = test_emit,
    .intern = test_intern,
    .now = test_now,
    .warn = test_warn,
};

/* Records of one type from the output, copied into out[]; @return count. */
static int collect(uint16_t want, void *out, size_t rec_size, int max)
{
    struct gt__rec_iter it;
    gt__rec_iter_init(&it, g_out.data, g_out.len);
    uint16_t type, size;
    const uint8_t *rec;
    int n = 0, r;
    while ((r = gt__rec_next(&it, &type, &size, &rec)) == 1) {
        if (type != want)
            continue;
        cr_assert_eq(size, rec_size, "record %u has size %u", type, size);
        if (n < max)
            memcpy((uint8_t *)out + (size_t)n * rec_size, rec, rec_size);
        n++;
    }
    cr_assert_eq(r, 0, "records decode");
    return n;
}

#if HAVE_CUPTI_HEADERS

static void setup(void)
{
    memset(&g_out, 0, sizeof(g_out));
    g_nstrings = 0;
    g_warnings = 0;
    g_warning[0] = '\0';
    gt__rec_out_set(&test_out);
    gt__cupti_records_reset();
    gt__cupti_sync_reset();
    char path[4096];
    const char *home = getenv("CUDA_HOME");
    snprintf(path, sizeof(path), "%s/lib64/libcupti.so",
             home && *home ? home : "/usr/local/cuda");
    int r = gt__cupti_load(path);
    if (r == -ENOENT)
        cr_skip_test("libcupti not found at %s", path);
    cr_assert_eq(r, 0, "libcupti loads (%d)", r);
    /* The tightest of a few reads: the machine may be busy. */
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 200 && best > 20000; i++) {
        uint64_t ts = 0, lo = test_now();
        cr_assert_eq(gt__cupti.GetTimestamp(&ts), 0);
        uint64_t hi = test_now();
        if (hi - lo < best) {
            best = hi - lo;
            g_base = ts;
            g_base_mono = lo + (hi - lo) / 2;
        }
    }
    g_base_half = best / 2;
    cr_assert(g_base > 0, "CUPTI has a clock without a driver");
    /* What the agent does at start: one pair for the CUPTI-domain model. */
    gt__cupti_sync_cupti_pair();
}

/* x ns after g_base on CUPTI's clock, as the agent must write it. */
static uint64_t at(uint64_t x)
{
    return g_base_mono + x;
}

/*
 * Mapped times are within this of the independent measurement: its own
 * half-width plus the agent's (one pair, taken on a busy machine).
 */
#define MAP_TOL (g_base_half + 1000000u)

static void assert_time(uint64_t got, uint64_t x, const char *what)
{
    uint64_t want = at(x);
    uint64_t d = got > want ? got - want : want - got;
    cr_assert(d <= MAP_TOL, "%s: %lu is %lu ns from host time %lu", what,
              (unsigned long)got, (unsigned long)d, (unsigned long)want);
}

static void teardown(void)
{
    gt__recbuf_free(&g_out);
    gt__rec_out_set(NULL);
    gt__cupti_test_set_running(0);
}

/* An activity buffer being filled with records, CUPTI-aligned. */
struct abuf {
    uint8_t *data;
    size_t len;
};

static void *abuf_add(struct abuf *b, size_t size)
{
    if (!b->data) {
        b->data = aligned_alloc(8, 64 << 10);
        cr_assert(b->data);
        memset(b->data, 0, 64 << 10);
    }
    size_t at = (b->len + 7) & ~(size_t)7;
    cr_assert(at + size <= (64 << 10));
    b->len = at + size;
    return b->data + at;
}

static void abuf_feed(struct abuf *b)
{
    gt__cupti_buffer_completed(NULL, 0, b->data, 64 << 10, b->len);
    free(b->data);
    b->data = NULL;
    b->len = 0;
}

static CUpti_ActivityKernel10 *add_kernel(struct abuf *b, const char *name,
                                          uint32_t corr, uint64_t start,
                                          uint64_t end)
{
    CUpti_ActivityKernel10 *k = abuf_add(b, sizeof(*k));
    k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k->name = name;
    k->correlationId = corr;
    k->start = start;
    k->end = end;
    k->deviceId = 2;
    k->streamId = 13;
    k->gridX = 64; k->gridY = 2; k->gridZ = 1;
    k->blockX = 256; k->blockY = 1; k->blockZ = 1;
    k->staticSharedMemory = 1024;
    k->dynamicSharedMemory = 4096;
    k->registersPerThread = 40;
    return k;
}

static void add_ext(struct abuf *b, CUpti_ExternalCorrelationKind kind,
                    uint64_t id, uint32_t corr)
{
    CUpti_ActivityExternalCorrelation *e = abuf_add(b, sizeof(*e));
    e->kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
    e->externalKind = kind;
    e->externalId = id;
    e->correlationId = corr;
}

static CUpti_ActivityAPI *add_api(struct abuf *b, uint32_t cbid, uint32_t corr,
                                  uint64_t start, uint64_t end)
{
    CUpti_ActivityAPI *a = abuf_add(b, sizeof(*a));
    a->kind = CUPTI_ACTIVITY_KIND_RUNTIME;
    a->cbid = cbid;
    a->correlationId = corr;
    a->start = start;
    a->end = end;
    a->processId = 100;
    a->threadId = 4242;
    return a;
}

#define OFF_EQ(mine, theirs, field_mine, field_theirs)                        \
    cr_assert_eq(offsetof(mine, field_mine), offsetof(theirs, field_theirs),  \
                 #theirs "." #field_theirs)

Test(cupti, abi_mirror_matches_headers)
{
    /* Kernel: the prefix must hold for CUDA 13's record and the oldest
     * still-documented one (Kernel4, CUDA 11's). */
    OFF_EQ(struct gt__cu_kernel, CUpti_ActivityKernel10, start, start);
    OFF_EQ(struct gt__cu_kernel, CUpti_ActivityKernel10, end, end);
    OFF_EQ(struct gt__cu_kernel, CUpti_ActivityKernel10, device_id, deviceId);
    OFF_EQ(struct gt__cu_kernel, CUpti_ActivityKernel10, stream_id, streamId);
    OFF_EQ(struct gt__cu_kernel, CUpti_ActivityKernel10, grid, gridX);
    OFF_EQ(struct gt__cu_kernel, CUpti_ActivityKernel10, block, blockX);
    OFF_EQ(struct gt__cu_kernel, CUpti_ActivityKernel10, static_shared_memory, staticSharedMemory);
    OFF_EQ(struct gt__cu_kernel, CUpti_ActivityKernel10, dynamic_shared_memory, dynamicSharedMemory);
    OFF_EQ(struct gt__cu_kernel, CUpti_ActivityKernel10, registers_per_thread, registersPerThread);
    OFF_EQ(struct gt__cu_kernel, CUpti_ActivityKernel10, correlation_id, correlationId);
    OFF_EQ(struct gt__cu_kernel, CUpti_ActivityKernel10, name, name);
    OFF_EQ(struct gt__cu_kernel, CUpti_ActivityKernel4, start, start);
    OFF_EQ(struct gt__cu_kernel, CUpti_ActivityKernel4, device_id, deviceId);
    OFF_EQ(struct gt__cu_kernel, CUpti_ActivityKernel4, stream_id, streamId);
    OFF_EQ(struct gt__cu_kernel, CUpti_ActivityKernel4, grid, gridX);
    OFF_EQ(struct gt__cu_kernel, CUpti_ActivityKernel4, correlation_id, correlationId);
    OFF_EQ(struct gt__cu_kernel, CUpti_ActivityKernel4, name, name);
    OFF_EQ(struct gt__cu_memcpy, CUpti_ActivityMemcpy6, bytes, bytes);
    OFF_EQ(struct gt__cu_memcpy, CUpti_ActivityMemcpy6, copy_kind, copyKind);
    OFF_EQ(struct gt__cu_memcpy, CUpti_ActivityMemcpy6, start, start);
    OFF_EQ(struct gt__cu_memcpy, CUpti_ActivityMemcpy6, device_id, deviceId);
    OFF_EQ(struct gt__cu_memcpy, CUpti_ActivityMemcpy6, stream_id, streamId);
    OFF_EQ(struct gt__cu_memcpy, CUpti_ActivityMemcpy6, correlation_id, correlationId);
    OFF_EQ(struct gt__cu_memset, CUpti_ActivityMemset4, value, value);
    OFF_EQ(struct gt__cu_memset, CUpti_ActivityMemset4, bytes, bytes);
    OFF_EQ(struct gt__cu_memset, CUpti_ActivityMemset4, start, start);
    OFF_EQ(struct gt__cu_memset, CUpti_ActivityMemset4, stream_id, streamId);
    OFF_EQ(struct gt__cu_memset, CUpti_ActivityMemset4, correlation_id, correlationId);
    OFF_EQ(struct gt__cu_api, CUpti_ActivityAPI, cbid, cbid);
    OFF_EQ(struct gt__cu_api, CUpti_ActivityAPI, start, start);
    OFF_EQ(struct gt__cu_api, CUpti_ActivityAPI, thread_id, threadId);
    OFF_EQ(struct gt__cu_api, CUpti_ActivityAPI, correlation_id, correlationId);
    OFF_EQ(struct gt__cu_ext_corr, CUpti_ActivityExternalCorrelation, external_kind, externalKind);
    OFF_EQ(struct gt__cu_ext_corr, CUpti_ActivityExternalCorrelation, external_id, externalId);
    OFF_EQ(struct gt__cu_ext_corr, CUpti_ActivityExternalCorrelation, correlation_id, correlationId);
    OFF_EQ(struct gt__cu_overhead, CUpti_ActivityOverhead3, overhead_kind, overheadKind);
    OFF_EQ(struct gt__cu_overhead, CUpti_ActivityOverhead3, object_kind, objectKind);
    OFF_EQ(struct gt__cu_overhead, CUpti_ActivityOverhead3, object_id, objectId);
    OFF_EQ(struct gt__cu_overhead, CUpti_ActivityOverhead3, start, start);
    OFF_EQ(struct gt__cu_cuda_event, CUpti_ActivityCudaEvent2, device_id, deviceId);
    OFF_EQ(struct gt__cu_cuda_event, CUpti_ActivityCudaEvent2, stream_id, streamId);
    OFF_EQ(struct gt__cu_cuda_event, CUpti_ActivityCudaEvent2, device_timestamp, deviceTimestamp);
    cr_assert_eq(GT__CU_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    cr_assert_eq(GT__CU_KIND_EXTERNAL_CORRELATION, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
    cr_assert_eq(GT__CU_KIND_CUDA_EVENT, CUPTI_ACTIVITY_KIND_CUDA_EVENT);
    cr_assert_eq(GT__CU_KIND_OVERHEAD, CUPTI_ACTIVITY_KIND_OVERHEAD);
    cr_assert_eq(GT__CU_EXT_CUSTOM0, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0);
    cr_assert_eq(GT__CU_EXT_CUSTOM2, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2);
    cr_assert_eq(GT__CUPTI_ERROR_MAX_LIMIT_REACHED, CUPTI_ERROR_MAX_LIMIT_REACHED);
    cr_assert_eq(GT__CU_THREAD_ID_SYSTEM, CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
    cr_assert_eq(GT__CU_FLUSH_FORCED, CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
}

Test(cupti, kernel_record_decoded, .init = setup, .fini = teardown)
{
    struct abuf b = {0};
    add_kernel(&b, "gemm_tiled_fwd", 42, g_base + 5000, g_base + 9000);
    abuf_feed(&b);

    struct gt_r_gpu_kernel k[2];
    cr_assert_eq(collect(GT_R_GPU_KERNEL, k, sizeof(k[0]), 2), 1);
    cr_assert_str_eq(str_of(k[0].name), "gemm_tiled_fwd");
    cr_assert_eq(k[0].device, 2);
    cr_assert_eq(k[0].stream, 13);
    cr_assert_eq(k[0].corr, 42);
    /* CUPTI's clock mapped onto host CLOCK_MONOTONIC, durations kept. */
    assert_time(k[0].start, 5000, "kernel start");
    cr_assert_eq(k[0].end - k[0].start, 4000);
    cr_assert_eq(k[0].grid[0], 64);
    cr_assert_eq(k[0].grid[1], 2);
    cr_assert_eq(k[0].block[0], 256);
    cr_assert_eq(k[0].shared_mem, 1024 + 4096);
    cr_assert_eq(k[0].registers, 40);

    /* The drop count is stated after every buffer, zero included. */
    struct gt_r_lost lost;
    cr_assert_eq(collect(GT_R_LOST, &lost, sizeof(lost), 1), 1);
    cr_assert_eq(lost.what, GT_LOST_CUPTI);
    cr_assert_eq(lost.tid, 0);
    cr_assert_eq(lost.count, 0);
    cr_assert_eq(g_warnings, 0, "no warning: %s", g_warning);
}

Test(cupti, kernel_names_interned_once, .init = setup, .fini = teardown)
{
    static const char name_a[] = "relu_kernel";
    char name_b[] = "relu_kernel"; /* same text, another pointer */
    struct abuf b = {0};
    for (uint32_t i = 0; i < 10; i++)
        add_kernel(&b, i % 2 ? name_a : name_b, i + 1, g_base + 100 * i + 1,
                   g_base + 100 * i + 50);
    abuf_feed(&b);
    struct gt_r_gpu_kernel k[10];
    cr_assert_eq(collect(GT_R_GPU_KERNEL, k, sizeof(k[0]), 10), 10);
    for (int i = 0; i < 10; i++) {
        cr_assert_eq(k[i].name, k[0].name);
        cr_assert_eq(k[i].corr, (uint32_t)i + 1, "order kept");
    }
    cr_assert_eq(g_nstrings, 1);
}

Test(cupti, memcpy_memset_decoded, .init = setup, .fini = teardown)
{
    struct abuf b = {0};
    CUpti_ActivityMemcpy6 *m = abuf_add(&b, sizeof(*m));
    m->kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    m->copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
    m->srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
    m->dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    m->bytes = 1 << 20;
    m->start = g_base + 700;
    m->end = g_base + 900;
    m->deviceId = 1;
    m->streamId = 7;
    m->correlationId = 11;
    CUpti_ActivityMemset4 *s = abuf_add(&b, sizeof(*s));
    s->kind = CUPTI_ACTIVITY_KIND_MEMSET;
    s->value = 0xab;
    s->bytes = 4096;
    s->start = g_base + 950;
    s->end = g_base + 960;
    s->deviceId = 1;
    s->streamId = 8;
    s->correlationId = 12;
    abuf_feed(&b);

    struct gt_r_gpu_memcpy mc;
    cr_assert_eq(collect(GT_R_GPU_MEMCPY, &mc, sizeof(mc), 1), 1);
    cr_assert_eq(mc.copy_kind, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD);
    cr_assert_eq(mc.src_kind, CUPTI_ACTIVITY_MEMORY_KIND_PINNED);
    cr_assert_eq(mc.dst_kind, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);
    cr_assert_eq(mc.bytes, 1 << 20);
    assert_time(mc.start, 700, "memcpy start");
    cr_assert_eq(mc.end - mc.start, 200);
    cr_assert_eq(mc.device, 1);
    cr_assert_eq(mc.stream, 7);
    cr_assert_eq(mc.corr, 11);
    struct gt_r_gpu_memset ms;
    cr_assert_eq(collect(GT_R_GPU_MEMSET, &ms, sizeof(ms), 1), 1);
    cr_assert_eq(ms.value, 0xab);
    cr_assert_eq(ms.bytes, 4096);
    cr_assert_eq(ms.stream, 8);
    cr_assert_eq(ms.corr, 12);
    assert_time(ms.start, 950, "memset start");
    cr_assert_eq(ms.start - mc.start, 250);
}

Test(cupti, runtime_api_and_overhead_decoded, .init = setup, .fini = teardown)
{
    struct abuf b = {0};
    add_api(&b, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 77,
            g_base + 300, g_base + 340);
    CUpti_ActivityOverhead3 *o = abuf_add(&b, sizeof(*o));
    o->kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
    o->overheadKind = CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH;
    o->objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
    o->objectId.pt.processId = 100;
    o->objectId.pt.threadId = 555;
    o->start = g_base + 400;
    o->end = g_base + 450;
    abuf_feed(&b);

    struct gt_r_cuda_api a[2];
    cr_assert_eq(collect(GT_R_CUDA_API, a, sizeof(a[0]), 2), 2);
    cr_assert_eq(a[0].tid, 4242);
    cr_assert_eq(a[0].cbid, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000);
    cr_assert_eq(a[0].corr, 77);
    assert_time(a[0].start, 300, "api start");
    cr_assert_eq(a[0].end - a[0].start, 40);
    /* cuptiGetCallbackName answers only once a driver initialised CUPTI;
     * either way the call is named. */
    const char *n = str_of(a[0].name);
    cr_assert(!strcmp(n, "cudaLaunchKernel") ||
                  !strcmp(n, "CUDA runtime API #211"),
              "api name %s", n);
    cr_assert_eq(a[1].tid, 555);
    cr_assert_str_eq(str_of(a[1].name), "CUPTI overhead: buffer flush");
    cr_assert_eq(a[1].start - a[0].start, 100);
}

/* Triton launches through the driver API: its kernels' correlation ids
 * are on driver records, which must come through marked as such. */
Test(cupti, driver_launch_decoded_and_marked, .init = setup, .fini = teardown)
{
    struct abuf b = {0};
    CUpti_ActivityAPI *d = add_api(&b, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, 91,
                                   g_base + 500, g_base + 520);
    d->kind = CUPTI_ACTIVITY_KIND_DRIVER;
    add_api(&b, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 92,
            g_base + 600, g_base + 630);
    abuf_feed(&b);
    struct gt_r_cuda_api a[3];
    cr_assert_eq(collect(GT_R_CUDA_API, a, sizeof(a[0]), 3), 2);
    cr_assert_eq(a[0].cbid, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx | 0x80000000u,
                 "driver bit (schema/wire.md CUDA_API.cbid)");
    cr_assert_eq(a[0].corr, 91);
    const char *n = str_of(a[0].name);
    cr_assert(!strcmp(n, "cuLaunchKernelEx") ||
                  !strcmp(n, "CUDA driver API #652"),
              "api name %s", n);
    cr_assert_eq(a[1].cbid, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000);
    cr_assert_eq(a[1].corr, 92);
}

static uint32_t g_enabled[64];
static int g_nenabled;
static int fake_enable(uint32_t kind)
{
    if (g_nenabled < 64)
        g_enabled[g_nenabled++] = kind;
    return 0;
}

/* What capture turns on: kernels, copies and both API domains (a kernel a
 * Triton launcher starts has no runtime record). */
Test(cupti, capture_enables_driver_and_runtime_records, .init = setup, .fini = teardown)
{
    int (*real_enable)(uint32_t) = gt__cupti.ActivityEnable;
    int (*real_ts)(uint8_t) = gt__cupti.ActivityEnableCudaEventDeviceTimestamps;
    gt__cupti.ActivityEnable = fake_enable;
    gt__cupti.ActivityEnableCudaEventDeviceTimestamps = NULL;
    g_nenabled = 0;
    int r = gt__cupti_set_enabled(1);
    gt__cupti.ActivityEnable = real_enable;
    gt__cupti.ActivityEnableCudaEventDeviceTimestamps = real_ts;
    cr_assert_eq(r, 0);
    const uint32_t want[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                             CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER,
                             CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        int seen = 0;
        for (int k = 0; k < g_nenabled; k++)
            seen |= g_enabled[k] == want[i];
        cr_assert(seen, "activity kind %u enabled", (unsigned)want[i]);
    }
}

/*
 * The layer/phase attribution chain: module forward pushes CUSTOM0 with
 * the module path id, backward nodes CUSTOM1, NVTX seq ranges CUSTOM2;
 * CUPTI puts an external correlation record before the API record; the
 * kernel carries the API's correlation id. Joining the emitted records by
 * corr must give each kernel its layer and phase.
 */
Test(cupti, kernels_attributed_to_layer_and_phase, .init = setup, .fini = teardown)
{
    uint32_t fc1 = test_intern("blocks.0.fc1", 12);
    uint32_t fc2 = test_intern("blocks.1.fc2", 12);
    struct abuf b = {0};
    add_ext(&b, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, fc1, 101);
    add_api(&b, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 101,
            g_base + 10, g_base + 20);
    add_ext(&b, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, fc2, 102);
    add_ext(&b, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2, 9876, 102);
    add_api(&b, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 102,
            g_base + 30, g_base + 40);
    /* Another tool's ids are not ours to report. */
    add_ext(&b, CUPTI_EXTERNAL_CORRELATION_KIND_OPENACC, 5, 103);
    abuf_feed(&b);
    /* Kernels complete later, in another buffer. */
    add_kernel(&b, "gemm_fwd", 101, g_base + 25, g_base + 60);
    add_kernel(&b, "gemm_bwd_dx", 102, g_base + 61, g_base + 90);
    abuf_feed(&b);

    struct gt_r_ext_corr e[8];
    int ne = collect(GT_R_EXT_CORR, e, sizeof(e[0]), 8);
    cr_assert_eq(ne, 3);
    struct gt_r_gpu_kernel k[2];
    cr_assert_eq(collect(GT_R_GPU_KERNEL, k, sizeof(k[0]), 2), 2);
    struct gt_r_cuda_api a[2];
    cr_assert_eq(collect(GT_R_CUDA_API, a, sizeof(a[0]), 2), 2);

    for (int i = 0; i < 2; i++) {
        uint16_t phase = 0;
        uint64_t layer = 0, seq = 0;
        int launches = 0;
        for (int j = 0; j < ne; j++) {
            if (e[j].corr != k[i].corr)
                continue;
            if (e[j].kind == GT_EXT_NVTX_SEQ) {
                seq = e[j].ext;
            } else {
                phase = e[j].kind;
                layer = e[j].ext;
            }
        }
        for (int j = 0; j < 2; j++)
            launches += a[j].corr == k[i].corr && a[j].end <= k[i].start;
        cr_assert_eq(launches, 1, "kernel %d has its launch before it", i);
        if (i == 0) {
            cr_assert_str_eq(str_of(k[i].name), "gemm_fwd");
            cr_assert_eq(phase, GT_EXT_LAYER_FWD);
            cr_assert_str_eq(str_of((uint32_t)layer), "blocks.0.fc1");
            cr_assert_eq(seq, 0);
        } else {
            cr_assert_str_eq(str_of(k[i].name), "gemm_bwd_dx");
            cr_assert_eq(phase, GT_EXT_LAYER_BWD);
            cr_assert_str_eq(str_of((uint32_t)layer), "blocks.1.fc2");
            cr_assert_eq(seq, 9876);
        }
    }
}

Test(cupti, records_of_other_kinds_skipped, .init = setup, .fini = teardown)
{
    struct abuf b = {0};
    CUpti_ActivityContext3 *c = abuf_add(&b, sizeof(*c));
    c->kind = CUPTI_ACTIVITY_KIND_CONTEXT;
    c->contextId = 3;
    add_kernel(&b, "after_context", 5, g_base + 10, g_base + 20);
    abuf_feed(&b);
    struct gt_r_gpu_kernel k;
    cr_assert_eq(collect(GT_R_GPU_KERNEL, &k, sizeof(k), 1), 1);
    cr_assert_str_eq(str_of(k.name), "after_context");
    /* Only the kernel and the lost count came out. */
    cr_assert_eq(g_out.count, 2);
}

Test(cupti, start_event_gives_device_offset, .init = setup, .fini = teardown)
{
    /* Sync thread's view: three warm-ups and a start event on stream 77
     * of device 1, each bracketed by host reads. */
    uint64_t lo[4] = {1000000, 1100000, 1200000, 1300000};
    uint64_t hi[4] = {1090000, 1150000, 1230000, 1304000};
    for (int i = 0; i < 4; i++)
        cr_assert_eq(gt__cupti_sync_expect(1, 77, lo[i], hi[i], i < 3), 0);
    struct abuf b = {0};
    /* The program's own event on another stream passes by. */
    CUpti_ActivityCudaEvent2 *ev = abuf_add(&b, sizeof(*ev));
    ev->kind = CUPTI_ACTIVITY_KIND_CUDA_EVENT;
    ev->deviceId = 1;
    ev->streamId = 5;
    ev->deviceTimestamp = 123;
    for (int i = 0; i < 4; i++) {
        ev = abuf_add(&b, sizeof(*ev));
        ev->kind = CUPTI_ACTIVITY_KIND_CUDA_EVENT;
        ev->deviceId = 1;
        ev->streamId = 77;
        ev->deviceTimestamp = 50000000000ull + lo[i] + 1000;
    }
    abuf_feed(&b);

    struct gt_r_clock_sync cs[4];
    cr_assert_eq(collect(GT_R_CLOCK_SYNC, cs, sizeof(cs[0]), 4), 1,
                 "one pair: warm-ups are not used");
    cr_assert_eq(cs[0].device, 1);
    cr_assert_eq(cs[0].mono_ns, 1302000);
    cr_assert_eq(cs[0].uncertainty_ns, 2000);
    cr_assert_eq(cs[0].device_ts, 50000000000ull + 1301000);
    int64_t off;
    uint64_t unc;
    cr_assert_eq(gt__cupti_sync_model(1, &off, &unc), 0);
    cr_assert_eq(off, (int64_t)1302000 - (int64_t)(50000000000ull + 1301000));
    cr_assert_eq(unc, 2000);
    cr_assert_eq(gt__cupti_sync_model(0, &off, &unc), -ENOENT);
}

Test(cupti, call_failure_is_one_named_warning, .init = setup, .fini = teardown)
{
    /* No driver here: the real CUPTI refuses to enable activity. */
    int r = GT__CUPTI_CALL(gt__cupti.ActivityEnable(GT__CU_KIND_CONCURRENT_KERNEL));
    if (r == 0) {
        (void)gt__cupti.ActivityDisable(GT__CU_KIND_CONCURRENT_KERNEL);
        cr_skip_test("CUPTI works here (a GPU is present)");
    }
    cr_assert_eq(r, -EIO);
    cr_assert_eq(g_warnings, 1);
    cr_assert_neq(g_warn_code, 0);
    cr_assert(strstr(g_warning, "gt__cupti.ActivityEnable(GT__CU_KIND_CONCURRENT_KERNEL)"),
              "call text in %s", g_warning);
    cr_assert(strstr(g_warning, "test_cupti.c:"), "file in %s", g_warning);
}

static uint32_t g_push_kind, g_pop_kind;
static uint64_t g_push_id;
static int g_pushes, g_pops;

static int fake_push(uint32_t kind, uint64_t id)
{
    g_push_kind = kind;
    g_push_id = id;
    g_pushes++;
    return 0;
}

static int fake_pop(uint32_t kind, uint64_t *id)
{
    g_pop_kind = kind;
    *id = g_push_id;
    g_pops++;
    return 0;
}

Test(cupti, ext_push_maps_kinds_only_when_running, .init = setup, .fini = teardown)
{
    gt__cupti.ActivityPushExternalCorrelationId = fake_push;
    gt__cupti.ActivityPopExternalCorrelationId = fake_pop;
    g_pushes = g_pops = 0;
    gt__cuda_ext_push(GT_EXT_LAYER_FWD, 5);
    gt__cuda_ext_pop(GT_EXT_LAYER_FWD);
    cr_assert_eq(g_pushes + g_pops, 0, "no CUPTI call while CUPTI is not running");

    gt__cupti_test_set_running(1);
    gt__cuda_ext_push(GT_EXT_LAYER_FWD, 5);
    cr_assert_eq(g_push_kind, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0);
    cr_assert_eq(g_push_id, 5);
    gt__cuda_ext_pop(GT_EXT_LAYER_FWD);
    cr_assert_eq(g_pop_kind, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0);
    gt__cuda_ext_push(GT_EXT_LAYER_BWD, 6);
    cr_assert_eq(g_push_kind, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1);
    gt__cuda_ext_push(GT_EXT_NVTX_SEQ, 7);
    cr_assert_eq(g_push_kind, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2);
    gt__cuda_ext_push(99, 8); /* unknown kind: ignored */
    cr_assert_eq(g_pushes, 3);
}


Test(cupti, scope_end_pops_only_what_was_pushed, .init = setup, .fini = teardown)
{
    gt__cupti.ActivityPushExternalCorrelationId = fake_push;
    gt__cupti.ActivityPopExternalCorrelationId = fake_pop;
    g_pushes = g_pops = 0;
    /* A module entered before CUPTI started (CUPTI starts at cuInit,
     * usually inside the first forward that uses the GPU)... */
    gt__cuda_ext_push(GT_EXT_LAYER_FWD, 1);
    gt__cupti_test_set_running(1);
    /* ...its child entered after, then both end. */
    gt__cuda_ext_push(GT_EXT_LAYER_FWD, 2);
    gt__cuda_ext_pop(GT_EXT_LAYER_FWD);
    gt__cuda_ext_pop(GT_EXT_LAYER_FWD);
    cr_assert_eq(g_pushes, 1);
    cr_assert_eq(g_pops, 1, "the outer end must not pop CUPTI's empty stack");
}

Test(cupti, backward_node_carries_creation_layer, .init = setup, .fini = teardown)
{
    gt__cupti.ActivityPushExternalCorrelationId = fake_push;
    gt__cupti.ActivityPopExternalCorrelationId = fake_pop;
    g_pushes = g_pops = 0;
    gt__cupti_test_set_running(1);
    /* Created in the forward of layer id 77 on torch thread 3. */
    gt__cuda_node_created(1234, 3, 77);
    gt__cuda_node_created(1235, 3, 78);
    cr_assert_eq(gt__cuda_node_layer(1234, 3), 77);
    cr_assert_eq(gt__cuda_node_layer(1234, 4), 0, "keyed by thread too");
    /* Runs backward on another thread. */
    gt__cuda_bwd_begin(1234, 3);
    cr_assert_eq(g_push_kind, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1);
    cr_assert_eq(g_push_id, 77);
    gt__cuda_bwd_end();
    cr_assert_eq(g_pop_kind, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1);
    /* A node of unknown layer pushes nothing, and its end pops nothing. */
    gt__cuda_bwd_begin(999, 3);
    gt__cuda_bwd_end();
    cr_assert_eq(g_pushes, 1);
    cr_assert_eq(g_pops, 1);
}


/* ------------------------------------------------ start events, fake driver */


/* Two devices; device 1's context is not active (the program never used
 * it), device 0's clock runs 7 s ahead of the host. */
static int fk_records, fk_syncs, fk_retains, fk_streams;
static uint64_t fk_dev_ts[8];
static int fk_count(int *n) { *n = 2; return 0; }
static int fk_get(int *dev, int i) { *dev = i; return 0; }
static int fk_state(int dev, unsigned *flags, int *active)
{
    *flags = 0;
    *active = dev == 0;
    return 0;
}
static int fk_retain(void **ctx, int dev) { *ctx = (void *)(uintptr_t)(0x100 + dev); fk_retains++; return 0; }
static int fk_release(int dev) { (void)dev; return 0; }
static int fk_push(void *ctx) { (void)ctx; return 0; }
static int fk_pop(void **ctx) { *ctx = NULL; return 0; }
static int fk_stream(void **s, unsigned flags)
{
    cr_assert_eq(flags, GT__CU_STREAM_NON_BLOCKING, "own non-blocking stream");
    *s = (void *)0x5000;
    fk_streams++;
    return 0;
}
static int fk_destroy(void *p) { (void)p; return 0; }
static int fk_event(void **e, unsigned flags) { (void)flags; *e = (void *)0x6000; return 0; }
static int fk_record(void *e, void *s)
{
    (void)e;
    cr_assert_eq(s, (void *)0x5000);
    cr_assert(fk_records < 8);
    /* The device stamps the event while the host is inside the bracket. */
    fk_dev_ts[fk_records++] = test_now() + 7000000000ull;
    return 0;
}
static int fk_sync(void *e) { (void)e; fk_syncs++; return 0; }
static int fk_cupti_stream(void *ctx, void *stream, uint32_t *id)
{
    cr_assert_eq(ctx, (void *)0x100);
    cr_assert_eq(stream, (void *)0x5000);
    *id = 31;
    return 0;
}
static int fk_timestamps(uint8_t on) { (void)on; return 0; }

Test(cupti, start_events_on_used_devices_give_offsets, .init = setup, .fini = teardown)
{
    struct gt__cu_driver fake = {
        fk_count, fk_get, fk_state, fk_retain, fk_release, fk_push, fk_pop,
        fk_stream, fk_destroy, fk_event, fk_record, fk_sync, fk_destroy,
    };
    gt__cupti.GetStreamId = fk_cupti_stream;
    gt__cupti.ActivityEnableCudaEventDeviceTimestamps = fk_timestamps;
    fk_records = fk_syncs = fk_retains = fk_streams = 0;
    cr_assert_eq(gt__cupti_sync_test_round(&fake, 1), 1, "device 0 only");
    cr_assert_eq(fk_retains, 1, "no context created on the unused device");
    cr_assert_eq(fk_records, 4, "three warm-ups and the start event");
    cr_assert_eq(fk_syncs, 4, "each waited for");
    /* Only devices not synced yet between periods: nothing to do now. */
    cr_assert_eq(gt__cupti_sync_test_round(&fake, 0), 0);
    cr_assert_eq(fk_records, 4);

    /* CUPTI's records of those events come back in a buffer. */
    struct abuf b = {0};
    for (int i = 0; i < 4; i++) {
        CUpti_ActivityCudaEvent2 *ev = abuf_add(&b, sizeof(*ev));
        ev->kind = CUPTI_ACTIVITY_KIND_CUDA_EVENT;
        ev->deviceId = 0;
        ev->streamId = 31;
        ev->deviceTimestamp = fk_dev_ts[i];
    }
    abuf_feed(&b);
    struct gt_r_clock_sync cs[2];
    cr_assert_eq(collect(GT_R_CLOCK_SYNC, cs, sizeof(cs[0]), 2), 1);
    cr_assert_eq(cs[0].device, 0);
    cr_assert_eq(cs[0].device_ts, fk_dev_ts[3], "the start event, not a warm-up");
    /* The stamp was taken inside [mono - u, mono + u]. */
    uint64_t host_at_stamp = fk_dev_ts[3] - 7000000000ull;
    cr_assert(host_at_stamp + cs[0].uncertainty_ns >= cs[0].mono_ns &&
                  host_at_stamp <= cs[0].mono_ns + cs[0].uncertainty_ns,
              "stamp at %lu, pair %lu +- %lu", (unsigned long)host_at_stamp,
              (unsigned long)cs[0].mono_ns, (unsigned long)cs[0].uncertainty_ns);
    int64_t off;
    uint64_t unc;
    cr_assert_eq(gt__cupti_sync_model(0, &off, &unc), 0);
    cr_assert(llabs(off + 7000000000ll) <= (long long)unc + 1,
              "offset %lld +- %lu", (long long)off, (unsigned long)unc);
    cr_assert_eq(gt__cupti_sync_model(1, &off, &unc), -ENOENT);
    cr_assert_eq(g_warnings, 0, "%s", g_warning);
}

#else

Test(cupti, needs_cuda_headers)
{
    (void)collect;
    (void)str_of;
    (void)test_out;
    cr_skip_test("CUDA toolkit headers (cupti.h) not found");
}

#endif
