/*
 * CUDA support, the bottom of it: CUPTI's entry points (gt__cupti), found
 * and loaded with dlopen, every result checked (GT__CUPTI_CALL), and the
 * activity kinds switched on and off. Used by the start-up (cupti.c), the
 * record conversion (cupti_records.c) and the clock sync (cupti_sync.c),
 * and calls none of them.
 *
 * CUPTI is found preferring a copy already loaded in the process
 * (RTLD_NOLOAD), then GRADTRACE_CUPTI, CUDA_HOME, the CUDA runtime's own
 * directory (and the pip wheel layout next to it), and /usr/local/cuda.
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdio.h>
#include <string.h>

#include "agent/cupti_internal.h"
#include "agent/internal.h"
#include "agent/rec_out.h"

struct gt__cupti_api gt__cupti;

static void *g_cupti_handle;
static char g_cudart_dir[GT__PATH_MAX]; /* where the CUDA runtime was found */

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

int gt__cuda_in_process(void)
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

/* ------------------------------------------------------------ activity kinds */

/* DRIVER: code that launches through the driver API itself (Triton's
 * launchers call cuLaunchKernel/cuLaunchKernelEx) gives its kernels a
 * correlation id only a driver API record carries; without it a compiled
 * graph's Triton kernels cannot be joined to their launch, their region
 * or their layer. CUPTI reports the driver calls an application makes, not
 * those the runtime makes on its behalf (scripts/gpu-check.sh checks that
 * no kernel gets two launches), and api_name() keeps only launches, copies
 * and waits, so any other driver call costs one dropped record. */
static const uint32_t activity_kinds[] = {
    GT__CU_KIND_CONCURRENT_KERNEL, GT__CU_KIND_MEMCPY, GT__CU_KIND_MEMSET,
    GT__CU_KIND_RUNTIME, GT__CU_KIND_DRIVER, GT__CU_KIND_EXTERNAL_CORRELATION,
    GT__CU_KIND_OVERHEAD,
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
