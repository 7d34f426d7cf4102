/*
 * The converter: wire records -> Chrome Trace Event JSON files.
 *
 * One converter per stream (an agent connection in the daemon, or a .gtr
 * file in `gradtrace convert`). It is fed the hello and then each decoded
 * chunk in order (the framer in common/codec.h does the decoding), writes
 * JSON as it goes with a streaming writer, and keeps in memory only what is
 * still open: per-thread scope stacks, unmatched flow starts, the string
 * table. Output rotates to a new file at a size or event limit; each file is
 * a complete, valid trace with its own metadata.
 *
 * Not thread-safe: one thread drives one converter.
 */
#ifndef GRADTRACE_DAEMON_CONVERT_H
#define GRADTRACE_DAEMON_CONVERT_H

#include <stddef.h>
#include <stdint.h>

#include "common/codec.h"

struct gt__conv_opts {
    const char *out_dir;      /* existing directory the files go in */
    const char *stem;         /* sanitized file-name stem, e.g. "train-1234" */
    const char *out_path;     /* if set: exact path of the first file (convert -o) */
    uint64_t max_file_bytes;  /* rotate past this many bytes, 0 = default */
    uint64_t max_file_events; /* rotate past this many events, 0 = default */
    /* Node creations held until their backward node runs; the oldest is
     * evicted (and counted) beyond this. 0 = default (262144). */
    uint32_t max_pending_nodes;
    /* Write the main file even when it would hold no events (gradtrace
     * convert -o, where the user named the file). Otherwise a stream that
     * recorded nothing outside capture windows leaves no main file. */
    int keep_empty_main;
    /* The daemon: every file says where acknowledged output ends (see
     * gt__conv_ack_mark), so that a repair keeps no record the agent was
     * not told is written. */
    int ack_marks;
    /* The daemon: its unfinished-file index (repair.h, GT__UNFINISHED_DIR),
     * where every file created in out_dir is linked until it is finished,
     * or NULL. */
    const char *index_dir;
};

struct gt__conv;

/* @return a converter, or NULL when out of memory (errno set). */
struct gt__conv *gt__conv_create(const struct gt__conv_opts *opts);

/* Frees everything; closes (without finishing) any open file. NULL is ok. */
void gt__conv_free(struct gt__conv *c);

/* Feed the parsed hello. @return 0 or a negative error. */
GT__WUR int gt__conv_hello(struct gt__conv *c, const struct gt__hello_info *hello);

/*
 * Feed one decoded chunk's records. Malformed records are counted and
 * skipped; unknown record types are skipped.
 * @return 0, or a negative errno when an output file cannot be written.
 */
GT__WUR int gt__conv_chunk(struct gt__conv *c, const struct gt_chunk_header *h,
                         const uint8_t *records, size_t raw_size);

/*
 * Closes open spans at the last timestamp seen, writes the final metadata
 * (lost counts, chunks lost and corrupt from stats, truncation when
 * truncated != 0 or the stream had no GT_R_GOODBYE) and closes the current
 * file. A stream with no event still gets a main file when it reported
 * losses (lost counts, missing chunks), so that they are in a file.
 * @return 0 or a negative errno.
 */
GT__WUR int gt__conv_finish(struct gt__conv *c, const struct gt__framer_stats *stats,
                          int truncated);

/* Paths of files written so far, the main file's and the windows', in the
 * order they were created (valid until the next call that feeds c). */
size_t gt__conv_files(const struct gt__conv *c, const char *const **paths);

/*
 * A capture window of the stream (GT_R_WINDOW_* records): each one is
 * written to its own file(s) named <stem>-w<id>-<layer>-<phase>-it<N>.json.
 * A stream gets at most GT__CONV_WIN_PER_STREAM windows: a window beyond
 * it is refused (anomaly windows_refused, once per window whatever its
 * segments) and its records stay in the main file, so no agent makes
 * files or work without bound. There is no cap per second: stream time is
 * the agent's, so a hostile agent spaces its timestamps past any such cap,
 * while a fast model's real windows (one per 2 ms step) were refused.
 */
#define GT__CONV_WIN_PER_STREAM 1000u
struct gt__conv_window {
    uint32_t id;          /* the agent's window id */
    uint32_t segments;    /* WINDOW_BEGIN records seen */
    uint64_t iteration;
    const char *spec;     /* the trigger spec that opened it */
    const char *layer;    /* the spec's layer (module path or glob) */
    const char *phase;    /* "forward", "backward" or "both" */
    const char *file;     /* its first file, NULL until an event is written */
    int state;            /* GT_CONV_WIN_* */
};

enum {
    GT__CONV_WIN_OPEN = 0,   /* segments still arriving */
    GT__CONV_WIN_DONE = 1,   /* WINDOW_DONE seen: its files are complete */
    GT__CONV_WIN_CUT = 2,    /* input ended (or the open-window cap hit)
                             * before WINDOW_DONE: files closed as they were */
};

/*
 * The most recent windows (at most 256, oldest dropped first) in the order
 * they began. *out stays valid until the next gt__conv_chunk or gt__conv_free
 * (gt__conv_finish only updates states: open windows become cut).
 * @return how many.
 */
size_t gt__conv_windows(const struct gt__conv *c,
                       const struct gt__conv_window **out);

/* The stream's rank now: the hello's, or a later GT_R_PROCESS_INFO's
 * (gt_set_rank: torch.multiprocessing.spawn sets no RANK). -1 unknown. */
int32_t gt__conv_rank(const struct gt__conv *c);

/*
 * Names the stream's files after stem from now on, and renames the files
 * already written under the old stem (<dir>/<old stem>... becomes
 * <dir>/<stem>...; open files keep being written through their fds). A
 * file whose new name exists keeps its old one. Only for converters
 * created with out_dir + stem. @return 0, -EINVAL (no stem to replace) or
 * -ENOMEM (then nothing changed).
 */
GT__WUR int gt__conv_restem(struct gt__conv *c, const char *stem);

/* Events written so far, across files. */
uint64_t gt__conv_events(const struct gt__conv *c);

/* Whether aten operators were captured: unknown (no input said), off
 * (the default capture), in some windows (a trigger's ops=1), or in every
 * capture (GRADTRACE_OPS=1): the trace's gradtrace.detail.ops. Ordered,
 * so that the most a set of inputs held is their maximum. */
enum gt__ops_detail {
    GT__OPS_UNKNOWN = 0,
    GT__OPS_OFF,
    GT__OPS_WINDOWS,
    GT__OPS_ALL,
};
enum gt__ops_detail gt__conv_ops_detail(const struct gt__conv *c);

/*
 * Writes what the converter holds in its buffers to the open files, so a
 * daemon killed now loses only what arrived since (the daemon calls it
 * once a second). @return 0 or the sticky write error.
 */
GT__WUR int gt__conv_flush(struct gt__conv *c);

/*
 * With ack_marks: flushes, then marks every open file at this point (a
 * TAB between two events: JSON whitespace, which the writer never puts
 * there otherwise), so that a repair cuts the file back to its last mark.
 * Call it between chunks, just before acknowledging them: what precedes
 * the mark is then every event those chunks made so far. The file opens
 * with a mark (nothing acknowledged yet). @return 0 or the sticky write
 * error (then acknowledge nothing).
 */
GT__WUR int gt__conv_ack_mark(struct gt__conv *c);

/*
 * Disk full (ENOSPC/EDQUOT). gt__conv_disk_full: whether a writer of c
 * stopped on it. gt__conv_disk_pause: every open file is left as it is,
 * to be cut back to its last acknowledgement mark, and the records of the
 * chunks since that mark are counted per thread as lost to the full disk
 * (none of it was acknowledged; the agent is told it is written once the
 * trace counts it). gt__conv_skip: a chunk arriving meanwhile, counted
 * per thread the same way, not converted. gt__conv_resume, once space is
 * back: the cut files are finished (repair.h, marked truncated), and
 * writing resumes in a new main file at once, whose lost.disk_full_records
 * and lost.threads[].disk_full say what the full disk cost.
 * @return gt__conv_disk_full: 1 or 0. gt__conv_resume: 0, or -errno
 *         (still full: call it again later).
 */
int gt__conv_disk_full(const struct gt__conv *c);
void gt__conv_disk_pause(struct gt__conv *c);
void gt__conv_skip(struct gt__conv *c, const uint8_t *records, size_t raw_size);
GT__WUR int gt__conv_resume(struct gt__conv *c);

/* Whether the stream's GT_R_GOODBYE arrived: the agent ended it itself.
 * A stream finished without one is to be finished as truncated. */
int gt__conv_goodbye(const struct gt__conv *c);

/* Whether the stream's last GT_R_JOB_ROUTE said its job-wide trigger
 * route is up (the daemon hands job triggers only to such an agent); 0
 * before any. */
int gt__conv_job_route(const struct gt__conv *c);

/* Totals for a one-line summary (gradtrace convert, daemon logs). */
struct gt__conv_summary {
    uint64_t events;          /* trace events written, all files */
    uint64_t files;           /* files written */
    uint64_t bytes;           /* JSON bytes written, all files */
    uint64_t chunks;          /* chunks converted */
    uint64_t records;         /* records converted */
    uint64_t lost_events;     /* GT_LOST_EVENTS, summed over threads */
    uint64_t lost_cupti;      /* GT_LOST_CUPTI */
    uint64_t lost_chunks;     /* GT_LOST_CHUNKS (agent side) */
    uint64_t anomalies;       /* untrusted-input anomalies, all kinds */
};

/* Fills *out. Any time, any number of calls. The lost counts are the
 * stream's (its newest cumulative GT_R_LOST per thread and kind), also
 * those of chunks skipped or cut short by a full disk: the daemon's
 * status reports them as they are, with no walk of its own. */
void gt__conv_summary(const struct gt__conv *c, struct gt__conv_summary *out);

#endif /* GRADTRACE_DAEMON_CONVERT_H */
