/*
 * CUDA support, part 3: clocks.
 *
 * Two kinds of clock model (agent/clock.c), all under one mutex:
 *   - the CUPTI domain: the timestamps in activity records. CUPTI takes
 *     them with our timestamp callback (host CLOCK_MONOTONIC) when it
 *     offers one, else CLOCK_REALTIME; pairs of (host, cuptiGetTimestamp,
 *     host) taken at start and with every buffer map them either way.
 *   - one per device: the device's own clock, from start events. For each
 *     device with an active primary context (we never create a context on
 *     a device the program does not use), the sync thread records a few
 *     warm-up events on its own non-blocking stream, then the start event,
 *     each bracketed by host clock reads before cuEventRecord and after
 *     cuEventSynchronize. CUPTI's CUDA_EVENT record for the start event
 *     carries the device timestamp; matched to its bracket (by device and
 *     our stream, in order) it is one sync pair: offset and uncertainty
 *     per device, emitted as GT_R_CLOCK_SYNC (device >= 0) for the trace's
 *     metadata. The record and our bracket's end can come in either order;
 *     whichever completes the pair emits it.
 *
 * The sync thread (only when CUPTI runs) also follows capture on/off by
 * polling gt__capture_on() every GT__SYNC_POLL_MS: on -> enable the activity
 * kinds and sync every device; off -> disable them and force a flush so
 * everything recorded in the window comes out. While capturing it syncs
 * again every GT__CUDA_SYNC_PERIOD_MS. It calls the driver API (libcuda is
 * always dynamic, unlike a statically linked cudart), resolved from the
 * copy already loaded.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "agent/capture.h"
#include "agent/clock.h"
#include "agent/cupti_internal.h"
#include "agent/internal.h"
#include "agent/rec_out.h"
#include "common/util.h"

#define GT__SYNC_POLL_MS 50u
#define GT__SYNC_WARMUPS 3
#define PENDING 8u /* start-event brackets in flight per device */

struct pending {
    uint32_t stream;
    int used;
    int warm;
    uint64_t lo, hi;       /* hi == 0: bracket not closed yet */
    uint64_t real;         /* CLOCK_REALTIME next to lo */
    uint64_t dev_ts;       /* 0: record not seen yet */
    int matched;           /* the CUDA_EVENT record arrived */
};

struct device_sync {
    struct pending q[PENDING]; /* FIFO in issue order */
    unsigned head, count;
    struct gt__clock model;
    /* Sync thread only: */
    void *ctx, *stream, *event;
    uint32_t cupti_stream;
    int broken;            /* a driver call failed: skip this device */
    int synced;            /* a start event was recorded at least once */
};

static pthread_mutex_t g_clock_lock = PTHREAD_MUTEX_INITIALIZER;
static struct gt__clock g_cupti_clock;
static struct device_sync g_dev[GT__CUDA_MAX_DEVICES];
static int g_models_ready;

static void models_init_locked(void)
{
    if (g_models_ready)
        return;
    gt__clock_init(&g_cupti_clock);
    for (unsigned i = 0; i < GT__CUDA_MAX_DEVICES; i++)
        gt__clock_init(&g_dev[i].model);
    g_models_ready = 1;
}

void gt__cupti_sync_reset(void)
{
    pthread_mutex_lock(&g_clock_lock);
    memset(g_dev, 0, sizeof(g_dev));
    g_models_ready = 0;
    models_init_locked();
    pthread_mutex_unlock(&g_clock_lock);
}

uint64_t gt__cupti_map_ts(uint64_t ts)
{
    pthread_mutex_lock(&g_clock_lock);
    models_init_locked();
    uint64_t h = gt__clock_map(&g_cupti_clock, ts);
    pthread_mutex_unlock(&g_clock_lock);
    return h;
}

void gt__cupti_sync_cupti_pair(void)
{
    if (!gt__cupti.GetTimestamp)
        return;
    uint64_t ts = 0;
    uint64_t lo = gt__rec_out->now();
    int r = gt__cupti.GetTimestamp(&ts);
    uint64_t hi = gt__rec_out->now();
    if (gt__cupti_check(r, "cuptiGetTimestamp(&ts)", __FILE__, __LINE__) || !ts)
        return; /* no clock: records keep their values */
    pthread_mutex_lock(&g_clock_lock);
    models_init_locked();
    if (gt__clock_add_pair(&g_cupti_clock, lo, hi, ts))
        GT__DIAG("cupti: clock pair rejected");
    pthread_mutex_unlock(&g_clock_lock);
}

/* Emits and models a complete pair. Under g_clock_lock. */
static void pair_done_locked(uint32_t device, const struct pending *p)
{
    struct device_sync *d = &g_dev[device];
    if (gt__clock_add_pair(&d->model, p->lo, p->hi, p->dev_ts))
        return;
    struct gt_r_clock_sync r = {
        .h = {GT_R_CLOCK_SYNC, sizeof(r)},
        .device = (int32_t)device,
        .mono_ns = p->lo + (p->hi - p->lo) / 2,
        .real_ns = p->real + (p->hi - p->lo) / 2,
        .device_ts = p->dev_ts,
        .uncertainty_ns = (p->hi - p->lo + 1) / 2,
    };
    (void)gt__rec_out->emit(&r, sizeof(r));
}

/* Drops completed entries from the front of the FIFO. Under the lock. */
static void pending_trim_locked(struct device_sync *d)
{
    while (d->count) {
        struct pending *p = &d->q[d->head];
        if (!(p->matched && p->hi))
            break;
        memset(p, 0, sizeof(*p));
        d->head = (d->head + 1) % PENDING;
        d->count--;
    }
}

int gt__cupti_sync_expect(uint32_t device, uint32_t stream, uint64_t host_lo,
                          uint64_t host_hi, int warm)
{
    if (device >= GT__CUDA_MAX_DEVICES)
        return -EINVAL;
    int r = 0;
    pthread_mutex_lock(&g_clock_lock);
    models_init_locked();
    struct device_sync *d = &g_dev[device];
    if (d->count == PENDING) {
        r = -ENOSPC;
    } else {
        struct pending *p = &d->q[(d->head + d->count) % PENDING];
        *p = (struct pending){.stream = stream, .used = 1, .warm = warm,
                              .lo = host_lo, .hi = host_hi,
                              .real = gt__real_ns()};
        d->count++;
    }
    pthread_mutex_unlock(&g_clock_lock);
    return r;
}

/* Closes the newest open bracket of device (the sync thread's). */
static void sync_close(uint32_t device, uint64_t host_hi)
{
    pthread_mutex_lock(&g_clock_lock);
    struct device_sync *d = &g_dev[device];
    for (unsigned i = d->count; i-- > 0;) {
        struct pending *p = &d->q[(d->head + i) % PENDING];
        if (p->hi)
            continue;
        p->hi = host_hi;
        if (p->matched && !p->warm && p->dev_ts)
            pair_done_locked(device, p);
        break;
    }
    pending_trim_locked(d);
    pthread_mutex_unlock(&g_clock_lock);
}

void gt__cupti_sync_on_event(const struct gt__cu_cuda_event *ev)
{
    if (ev->device_id >= GT__CUDA_MAX_DEVICES)
        return;
    pthread_mutex_lock(&g_clock_lock);
    models_init_locked();
    struct device_sync *d = &g_dev[ev->device_id];
    /* The oldest unmatched bracket on this stream; events of the
     * program itself are on other streams and pass by. */
    for (unsigned i = 0; i < d->count; i++) {
        struct pending *p = &d->q[(d->head + i) % PENDING];
        if (p->matched || p->stream != ev->stream_id)
            continue;
        p->matched = 1;
        p->dev_ts = ev->device_timestamp;
        if (!p->warm && !p->dev_ts)
            gt__rec_out->warn(GT__CUDA_WARN_SYNC,
                              "CUPTI gave no device timestamp for a start "
                              "event: no per-device clock offsets");
        if (p->hi && !p->warm && p->dev_ts)
            pair_done_locked(ev->device_id, p);
        break;
    }
    pending_trim_locked(d);
    pthread_mutex_unlock(&g_clock_lock);
}

int gt__cupti_sync_model(int device, int64_t *offset, uint64_t *uncertainty)
{
    if (device < 0 || device >= GT__CUDA_MAX_DEVICES)
        return -ENOENT;
    int r = -ENOENT;
    pthread_mutex_lock(&g_clock_lock);
    models_init_locked();
    if (gt__clock_valid(&g_dev[device].model)) {
        *offset = gt__clock_offset(&g_dev[device].model);
        *uncertainty = gt__clock_uncertainty(&g_dev[device].model);
        r = 0;
    }
    pthread_mutex_unlock(&g_clock_lock);
    return r;
}

/* ------------------------------------------------------------ driver API */

static struct gt__cu_driver g_cu;

static int driver_load(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h)
        return -ENOENT;
#define DSYM(field, name) *(void **)&g_cu.field = dlsym(h, name)
    DSYM(DeviceGetCount, "cuDeviceGetCount");
    DSYM(DeviceGet, "cuDeviceGet");
    DSYM(DevicePrimaryCtxGetState, "cuDevicePrimaryCtxGetState");
    DSYM(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    DSYM(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
    DSYM(CtxPushCurrent, "cuCtxPushCurrent_v2");
    DSYM(CtxPopCurrent, "cuCtxPopCurrent_v2");
    DSYM(StreamCreate, "cuStreamCreate");
    DSYM(StreamDestroy, "cuStreamDestroy_v2");
    DSYM(EventCreate, "cuEventCreate");
    DSYM(EventRecord, "cuEventRecord");
    DSYM(EventSynchronize, "cuEventSynchronize");
    DSYM(EventDestroy, "cuEventDestroy_v2");
#undef DSYM
    /* The handle stays open: libcuda lives as long as the process. */
    if (!g_cu.DeviceGetCount || !g_cu.DeviceGet ||
        !g_cu.DevicePrimaryCtxGetState || !g_cu.DevicePrimaryCtxRetain ||
        !g_cu.CtxPushCurrent || !g_cu.CtxPopCurrent || !g_cu.StreamCreate ||
        !g_cu.EventCreate || !g_cu.EventRecord || !g_cu.EventSynchronize)
        return -ENOSYS;
    return 0;
}

/* Driver-call check: one warning per call site, like GT__CUPTI_CALL. */
static int cu_check(int r, const char *call, int line)
{
    if (GT__LIKELY(r == 0))
        return 0;
    /*
     * CUDA_ERROR_NOT_INITIALIZED (cuInit still running, or not called
     * yet: we poll again) and CUDA_ERROR_DEINITIALIZED (the process is
     * exiting) are states, not failures worth a warning.
     */
    if (r == 3 || r == 4)
        return -EIO;
    char msg[256];
    snprintf(msg, sizeof(msg),
             "CUDA %s failed at %s:%d (CUresult %d): clock sync skips a device",
             call, __FILE__, line, r);
    gt__rec_out->warn(GT__CUDA_WARN_SYNC, msg);
    return -EIO;
}
#define GT__CU_CALL(x) cu_check((x), #x, __LINE__)

/* Sets up device i's context, stream and event once. @return 0 or -errno. */
static int device_prepare(int i)
{
    struct device_sync *d = &g_dev[i];
    if (d->event)
        return 0;
    int dev;
    if (GT__CU_CALL(g_cu.DeviceGet(&dev, i)) ||
        GT__CU_CALL(g_cu.DevicePrimaryCtxRetain(&d->ctx, dev)))
        return -EIO;
    int r = -EIO;
    void *popped;
    if (GT__CU_CALL(g_cu.CtxPushCurrent(d->ctx)))
        return -EIO;
    if (GT__CU_CALL(g_cu.StreamCreate(&d->stream, GT__CU_STREAM_NON_BLOCKING)))
        goto out_pop;
    if (GT__CU_CALL(g_cu.EventCreate(&d->event, 0))) {
        d->event = NULL;
        goto out_pop;
    }
    if (!gt__cupti.GetStreamId ||
        GT__CUPTI_CALL(gt__cupti.GetStreamId(d->ctx, d->stream, &d->cupti_stream)))
        goto out_pop;
    r = 0;
out_pop:
    (void)GT__CU_CALL(g_cu.CtxPopCurrent(&popped));
    return r;
}

/* One bracketed event on device i. @return 0 or -EIO. */
static int record_one(int i, int warm)
{
    struct device_sync *d = &g_dev[i];
    uint64_t lo = gt__rec_out->now();
    if (gt__cupti_sync_expect((uint32_t)i, d->cupti_stream, lo, 0, warm)) {
        gt__rec_out->warn(GT__CUDA_WARN_SYNC,
                          "CUPTI returns no CUDA_EVENT records for start "
                          "events: no per-device clock offsets");
        return -EIO;
    }
    int r = GT__CU_CALL(g_cu.EventRecord(d->event, d->stream));
    if (!r)
        r = GT__CU_CALL(g_cu.EventSynchronize(d->event));
    /* Closed even on failure so the FIFO keeps its order. */
    sync_close((uint32_t)i, gt__rec_out->now());
    return r;
}

/*
 * Warm-ups then the start event on every device the program uses (all),
 * or only on those not synced yet. @return the number of devices synced.
 */
static int sync_round(int all)
{
    int n = 0, synced = 0;
    /* Without device timestamps in CUDA_EVENT records (CUPTI before 13)
     * start events cannot be read back: say so once, sync nothing. */
    if (!gt__cupti.ActivityEnableCudaEventDeviceTimestamps) {
        gt__rec_out->warn(GT__CUDA_WARN_SYNC,
                          "this CUPTI has no CUDA event device timestamps: "
                          "no per-device clock offsets (GPU times still "
                          "mapped through CUPTI's own clock)");
        return 1;
    }
    if (GT__CU_CALL(g_cu.DeviceGetCount(&n)))
        return 0;
    for (int i = 0; i < n && i < GT__CUDA_MAX_DEVICES; i++) {
        struct device_sync *d = &g_dev[i];
        unsigned flags;
        int active = 0, dev;
        if (d->broken || (!all && d->synced) || g_cu.DeviceGet(&dev, i) ||
            g_cu.DevicePrimaryCtxGetState(dev, &flags, &active) || !active)
            continue;
        if (device_prepare(i)) {
            d->broken = 1;
            continue;
        }
        void *popped;
        if (GT__CU_CALL(g_cu.CtxPushCurrent(d->ctx))) {
            d->broken = 1;
            continue;
        }
        int r = 0;
        for (int w = 0; w < GT__SYNC_WARMUPS && !r; w++)
            r = record_one(i, 1);
        if (!r)
            r = record_one(i, 0);
        if (r)
            d->broken = 1;
        else
            synced++, d->synced = 1;
        (void)GT__CU_CALL(g_cu.CtxPopCurrent(&popped));
    }
    return synced;
}

/* Test hook (agent/cupti_internal.h). */
int gt__cupti_sync_test_round(const struct gt__cu_driver *fake, int all)
{
    g_cu = *fake;
    return sync_round(all);
}

/* ------------------------------------------------------------ the thread */

static pthread_t g_thread;
static int g_thread_started;

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) && errno == EINTR)
        ;
}

static void *sync_main(void *arg)
{
    (void)arg;
    int enabled = gt__capture_on();
    int have_driver = 0;
    uint64_t next_sync = 0;
    for (;;) {
        sleep_ms(GT__SYNC_POLL_MS);
        int on = gt__capture_on();
        if (on != enabled) {
            if (!on) {
                (void)gt__cupti_set_enabled(0);
                (void)GT__CUPTI_CALL(gt__cupti.ActivityFlushAll(GT__CU_FLUSH_FORCED));
            } else if (gt__cupti_set_enabled(1)) {
                return NULL; /* warned; CUPTI is not usable */
            }
            enabled = on;
            next_sync = 0;
        }
        if (!on)
            continue;
        uint64_t now = gt__rec_out->now();
        int all = now >= next_sync;
        if (all) {
            next_sync = now + (uint64_t)GT__CUDA_SYNC_PERIOD_MS * 1000000u;
            gt__cupti_sync_cupti_pair();
        }
        /* libcuda appears with the first cuInit; until then, wait. */
        if (!have_driver)
            have_driver = driver_load() == 0;
        /*
         * Every period all devices; in between, at each poll, the devices
         * whose context appeared since (at the program's first allocation
         * or launch), so short programs still get their start events.
         */
        if (have_driver)
            (void)sync_round(all);
    }
    return NULL;
}

int gt__cupti_sync_start(void)
{
    if (g_thread_started)
        return 0;
    pthread_mutex_lock(&g_clock_lock);
    models_init_locked();
    pthread_mutex_unlock(&g_clock_lock);
    sigset_t all, old;
    sigfillset(&all);
    /* The thread must never take the program's signals. */
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int r = pthread_create(&g_thread, NULL, sync_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (r)
        return -r;
    pthread_detach(g_thread);
    pthread_setname_np(g_thread, "gt-cuda-sync");
    g_thread_started = 1;
    return 0;
}
