/*
 * `gradtrace merge` (merge.c), internal to the CLI: its inputs'
 * metadata (merge_in.c).
 */
#ifndef GRADTRACE_DAEMON_CLI_MERGE_H
#define GRADTRACE_DAEMON_CLI_MERGE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/codec.h" /* GT__WUR */

/* Largest metadata tail read (the converter's is far smaller: every list
 * in it is capped). */
#define GT__MERGE_TAIL_MAX (8 << 20)

struct gt__merge_coll {
    char op[48];
    uint32_t group, ranks;
    uint64_t seq;
    int64_t begin_mono, end_mono; /* the process's CLOCK_MONOTONIC */
};

/* One input file, as its metadata tail describes it. */
struct gt__merge_file {
    const char *path;            /* argv's */
    off_t events_end;            /* offset of the "]," ending traceEvents */
    int64_t base_mono, base_real; /* ts 0: CLOCK_MONOTONIC, and mapped to
                                  * CLOCK_REALTIME by the process's pair */
    uint32_t pid;
    int32_t rank, world;
    char host[256];
    uint64_t lost_events, lost_cupti, lost_chunks; /* its "lost" counts */
    int truncated;               /* its "stream" says truncated */
    struct gt__merge_coll *colls;
    size_t ncolls;
    size_t proc;                 /* its process group in the merge */
};

/*
 * Reads path's metadata into f (f->path = path, kept). @return 0; -errno
 * (why NULL: strerror) or -EINVAL with a one-line reason in *why.
 * gt__merge_file_close frees what it holds, either way.
 */
GT__WUR int gt__merge_file_open(struct gt__merge_file *f, const char *path,
                                const char **why);
void gt__merge_file_close(struct gt__merge_file *f);

#endif /* GRADTRACE_DAEMON_CLI_MERGE_H */
