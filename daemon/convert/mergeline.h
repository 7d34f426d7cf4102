/*
 * One event line of a gradtrace trace rewritten for `gradtrace merge`:
 * its process put into the rank's process group, its time moved onto the
 * merged trace's clock, its flow id made unique across inputs, and the
 * rank and host put in front of its process's name. The converter writes
 * one event per line (schema/trace-output.md), so a merge streams its
 * inputs line by line through this, in memory bounded by one line.
 * Internal to the converter library; pure text processing, no I/O.
 */
#ifndef GRADTRACE_DAEMON_CONV_MERGELINE_H
#define GRADTRACE_DAEMON_CONV_MERGELINE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Room a rewritten line may need beyond the input and the prefix. */
#define GT__MLINE_SLACK 128u

struct gt__mline {
    int64_t delta_ns;    /* added to every top-level "ts" (clamped at 0) */
    uint32_t pid;        /* the process's pid in the merged trace; GPU d
                          * (pid 0x40000000 + d) becomes pid + 1 + d,
                          * d < 999 */
    uint64_t id_base;    /* added to every top-level flow "id" */
    const char *prefix;  /* put before a process_name's name (JSON-escaped
                          * text, e.g. "rank 1 host a: "), may be NULL */
    size_t prefix_len;
};

/*
 * Rewrites the event object at the start of in[0..n) (leading blanks and
 * whatever follows the object, such as its ",", are left out) into out:
 * top-level "pid", "ts" and "id" values as m says; a process_sort_index
 * event's sort_index becomes the new pid, so processes sort by rank.
 * Keys are recognised only at the event's top level (a key inside args or
 * a string is never touched).
 * @return bytes written (not NUL-terminated); -EINVAL when in holds no
 * whole JSON object or a rewritten value is not a number (or would
 * overflow); -ENOSPC when cap < n + prefix_len + GT__MLINE_SLACK, or when
 * repeated keys (never in a converter's line) would need more than cap.
 */
ssize_t gt__mline_rewrite(const struct gt__mline *m, const char *in, size_t n,
                          char *out, size_t cap);

#endif /* GRADTRACE_DAEMON_CONV_MERGELINE_H */
