/*
 * NVTX for the layer test programs (capi_layers.c, torch_layers.cpp):
 * the toolkit's nvtx3 headers when they are installed, otherwise a
 * minimal NVTX client of our own with nvtxRangePushA and nvtxRangePop
 * only, so that the tests of NVTX layers run on machines without the CUDA
 * toolkit too.
 *
 * The minimal client speaks NVTX's injection protocol as agent/nvtx.c
 * implements it: at the first call it loads the library named by
 * NVTX_INJECTION64_PATH (the agent sets it to itself), calls its
 * InitializeInjectionNvtx2 with an export-table getter, and the tool fills
 * in the CORE module's function slots it is given; until then, or without
 * a tool, the calls do nothing. Single-threaded use only (the programs
 * are).
 */
#ifndef GRADTRACE_TESTS_NVTX_CLIENT_H
#define GRADTRACE_TESTS_NVTX_CLIENT_H

#if __has_include(<nvtx3/nvToolsExt.h>)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wcast-align"
#pragma GCC diagnostic ignored "-Wshadow"
#ifndef __cplusplus
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#endif
#include <nvtx3/nvToolsExt.h>
#pragma GCC diagnostic pop
#define GT_TEST_NVTX "nvtx3"
#else
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#define GT_TEST_NVTX "minimal client"

typedef void (*gt_test_nvtx_fn)(void);

/* The slots the tool fills: CORE callback ids 9 (RangePushA), 11 (RangePop). */
static int (*gt_test_push_a)(const char *);
static int (*gt_test_pop)(void);
static gt_test_nvtx_fn *gt_test_core[12];

static int gt_test_module_table(int module, gt_test_nvtx_fn ***table,
                                unsigned *size)
{
    if (module != 1) /* NVTX_CB_MODULE_CORE */
        return 0;
    gt_test_core[9] = (gt_test_nvtx_fn *)(void *)&gt_test_push_a;
    gt_test_core[11] = (gt_test_nvtx_fn *)(void *)&gt_test_pop;
    *table = gt_test_core;
    *size = 12;
    return 1;
}

struct gt_test_nvtx_callbacks {
    size_t struct_size;
    int (*get_module_function_table)(int, gt_test_nvtx_fn ***, unsigned *);
};

static const void *gt_test_export_table(uint32_t id)
{
    static const struct gt_test_nvtx_callbacks cb = {
        sizeof(struct gt_test_nvtx_callbacks), gt_test_module_table,
    };
    return id == 1 ? &cb : NULL; /* NVTX_ETID_CALLBACKS */
}

static void gt_test_nvtx_init(void)
{
    static int done;
    const char *path = getenv("NVTX_INJECTION64_PATH");
    void *h;
    int (*init)(const void *(*)(uint32_t));

    if (done)
        return;
    done = 1;
    h = path && *path ? dlopen(path, RTLD_NOW) : NULL;
    *(void **)&init = h ? dlsym(h, "InitializeInjectionNvtx2") : NULL;
    if (init)
        (void)init(gt_test_export_table);
}

static inline int nvtxRangePushA(const char *message)
{
    gt_test_nvtx_init();
    return gt_test_push_a ? gt_test_push_a(message) : -1;
}

static inline int nvtxRangePop(void)
{
    gt_test_nvtx_init();
    return gt_test_pop ? gt_test_pop() : -1;
}
#endif

#endif
