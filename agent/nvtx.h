/*
 * NVTX injection (agent/nvtx.c): the NVTX ABI pieces the agent reads and
 * the functions tests and agent/cupti.c call. The layout of
 * nvtxEventAttributes_v2 is checked against the real nvtx3 header in
 * tests/unit/test_nvtx.c.
 */
#ifndef GRADTRACE_AGENT_NVTX_H
#define GRADTRACE_AGENT_NVTX_H

#include <stddef.h>
#include <stdint.h>
#include <wchar.h>

#include "gradtrace/gradtrace.h"

enum {
    GT__NVTX_MESSAGE_ASCII = 1,
    GT__NVTX_MESSAGE_UNICODE = 2,
    GT__NVTX_MESSAGE_REGISTERED = 3,
};

/* nvtxEventAttributes_v2 (NVTX_VERSION 2 and 3). */
struct gt__nvtx_attr {
    uint16_t version;
    uint16_t size;          /* sizeof the caller's struct */
    uint32_t category;
    int32_t color_type;
    uint32_t color;
    int32_t payload_type;
    int32_t reserved0;
    uint64_t payload;
    int32_t message_type;
    union {
        const char *ascii;
        const wchar_t *unicode;
        const void *registered; /* nvtxStringHandle_t */
    } message;
};

/*
 * Finds PyTorch's "seq = N" in an NVTX range name (also as "stashed seq =
 * N"). @return 1 with *seq set, or 0.
 */
int gt__nvtx_parse_seq(const char *s, uint64_t *seq);

/*
 * Installs the agent's NVTX handlers through NVTX's export-table getter
 * (what InitializeInjectionNvtx2 receives). @return 1 on success, 0 when
 * the table is unusable (NVTX then stays a no-op).
 */
int gt__nvtx_install(const void *(*get_export_table)(uint32_t));

/* Sets NVTX_INJECTION64_PATH to self unless set or GRADTRACE_NVTX=0. */
void gt__nvtx_env(const char *self);

/*
 * NVTX injection entry point (exported): NVTX calls it at the first NVTX
 * call when NVTX_INJECTION64_PATH names this library. @return 1 when the
 * handlers are installed, 0 otherwise (GRADTRACE_NVTX=0, unusable table).
 */
GT_API int InitializeInjectionNvtx2(const void *(*get_export_table)(uint32_t));

#endif
