/*
 * Shared by the CUDA/NVTX unit tests (test_cupti.c, test_nvtx.c): a record
 * output (agent/rec_out.h) standing in for the agent's buffers (records
 * appended to g_out) and
 * a tiny string table (ids from 1), so tests read back exactly what the
 * code under test emitted.
 */
#ifndef GRADTRACE_TESTS_REC_OUT_FIXTURE_H
#define GRADTRACE_TESTS_REC_OUT_FIXTURE_H

#include <criterion/criterion.h>
#include <string.h>

#include "common/codec.h"

static struct gt__recbuf g_out;
static char g_strings[64][256];
static uint32_t g_nstrings;

static inline int test_emit(const void *rec, size_t size)
{
    cr_assert_eq(gt__recbuf_append(&g_out, rec, size), 0);
    return 0;
}

static inline uint32_t test_intern(const char *s, size_t len)
{
    for (uint32_t i = 0; i < g_nstrings; i++)
        if (strlen(g_strings[i]) == len && !memcmp(g_strings[i], s, len))
            return i + 1;
    cr_assert(g_nstrings < 64 && len < 256);
    memcpy(g_strings[g_nstrings], s, len);
    g_strings[g_nstrings][len] = '\0';
    return ++g_nstrings;
}

static inline const char *str_of(uint32_t id)
{
    return id && id <= g_nstrings ? g_strings[id - 1] : "";
}

#endif
