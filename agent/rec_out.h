/*
 * The record output of the hooks that write through a table rather than
 * straight into the buffers (the CUDA files and NVTX): emit a record,
 * intern a string, read the clock, record a warning. The agent's own
 * functions unless a test put its own table in, so that tests catch
 * exactly what those hooks write, without the agent's buffers or string
 * table (tests/unit/rec_out_fixture.h).
 */
#ifndef GRADTRACE_AGENT_REC_OUT_H
#define GRADTRACE_AGENT_REC_OUT_H

#include <stddef.h>
#include <stdint.h>

struct gt__rec_out {
    /* gt__emit: @return 0 or -ENOSPC (the drop is counted). */
    int (*emit)(const void *rec, size_t size);
    /* gt__intern: @return the id, 0 on failure. */
    uint32_t (*intern)(const char *s, size_t len);
    /* gt__now: CLOCK_MONOTONIC nanoseconds. */
    uint64_t (*now)(void);
    /* gt__warn_once. */
    void (*warn)(uint32_t code, const char *msg);
};

/* The table in use: the agent's functions unless a test replaced it. Any
 * thread reads it; only gt__rec_out_set writes it. */
extern const struct gt__rec_out *gt__rec_out;

/* Replaces the table (NULL restores the agent's). Tests only, before the
 * hooks run. */
void gt__rec_out_set(const struct gt__rec_out *out);

#endif /* GRADTRACE_AGENT_REC_OUT_H */
