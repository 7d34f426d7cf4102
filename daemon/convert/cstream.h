/*
 * The converter's per-stream state (struct gt__cstream, stream.c): what
 * every output of one stream shares; and the converter's limits and
 * anomaly counters, which stream and writers alike use.
 * Only stream.c and the stream parts of the record table (records.c)
 * write it; writers (internal.h) read it. Internal to the converter.
 *
 * Memory model: everything is bounded by a cap: strings, thread names,
 * lost counts, clocks, warnings, the window history. Exceeding a cap
 * drops the newest item and counts it in an anomaly counter that lands in
 * the trace's metadata.
 */
#ifndef GRADTRACE_DAEMON_CONV_CSTREAM_H
#define GRADTRACE_DAEMON_CONV_CSTREAM_H

#include <stddef.h>
#include <stdint.h>

#include "common/codec.h"
#include "daemon/convert/convert.h"
#include "daemon/convert/index.h"

#define GT__CONV_DEFAULT_MAX_BYTES (200ull << 20)
#define GT__CONV_DEFAULT_MAX_EVENTS 4000000ull
#define GT__CONV_MIN_MAX_BYTES 4096ull

#define GT__STR_MAX_IDS (1u << 18)    /* string ids accepted: 1 .. this-1 */
#define GT__STR_MAX_BYTES (24u << 20) /* raw + escaped bytes kept */
#define GT__MAX_THREADS 65536u
#define GT__MAX_TRACKS (1u << 18)
#define GT__STACK_MAX 256u            /* open spans per thread stack */
#define GT__LANE_DEPTH 32u            /* nesting depth checked per lane */
#define GT__MAX_OVERFLOW 8u           /* overlap tracks per track */
#define GT__NODE_MAP_DEFAULT (1u << 18)
#define GT__CORR_MAP_CAP (1u << 15)
#define GT__MAX_LAYERS (1u << 17)
#define GT__MAX_DEVICES 64u
#define GT__MAX_STREAMS 4096u         /* table has twice the slots */
#define GT__MAX_LOST 4096u
#define GT__MAX_WINDOWS 256u
#define GT__REL_MAX (1ull << 52)      /* latest ts after the base */
#define GT__MAX_OPEN_WINDOWS 16u
#define GT__MAX_WARNINGS 64u
#define GT__MAX_COLLECTIVES 256u       /* the newest kept per stream */
#define GT__MAX_NCCL_NAMES 32u         /* NCCL kernel names counted */
#define GT__WAIT_CAP 4096u            /* nodes waiting for their creation */
#define GT__MAX_WIN_OPEN 4u           /* window writers alive at once */
#define GT__WIN_CORR_CAP (1u << 14)   /* CUDA corr ids launched in windows */
#define GT__MAX_CGRAPHS 65536u        /* compiled graphs' maps per stream */
#define GT__MAX_CCALLS (1u << 20)     /* their calls, all maps together */

/* Synthetic tids (tracks that are not OS threads) start here, above any
 * Linux tid (pid_max <= 2^22). */
#define GT__SYNTH_TID_BASE (1u << 28)
/* GPU device d is written as pid GT__GPU_PID_BASE + d. */
#define GT__GPU_PID_BASE 0x40000000u

/* Counters of untrusted-input anomalies, written in metadata by name. */
#define GT__ANOMALIES(X)                                                   \
    X(bad_records)          /* record size does not match its type */     \
    X(unknown_records)      /* record type this converter does not know */\
    X(unknown_strings)      /* string id used but never defined */        \
    X(bad_string_ids)       /* string id 0 defined, or id beyond the cap */\
    X(strings_dropped)      /* string table full */                       \
    X(no_thread)            /* thread-scoped record before any THREAD */  \
    X(threads_dropped)      /* thread table full */                       \
    X(time_backwards)       /* a thread's time went back: clamped */      \
    X(before_base)          /* timestamp before the trace base: at 0 */   \
    X(beyond_horizon)       /* timestamp over 2^52 ns after the base:     \
                             * clamped there (JSON doubles stay exact) */ \
    X(negative_durations)   /* end before start: zero duration */         \
    X(end_without_begin)    /* end matching nothing open: ignored */      \
    X(closed_implicitly)    /* closed because an outer span ended */      \
    X(closed_at_finish)     /* still open at the end of input */          \
    X(depth_dropped)        /* begin beyond GT__STACK_MAX: dropped */     \
    X(overlap_moved)        /* span placed on an overlap track */         \
    X(overlap_dropped)      /* no overlap track could take the span */    \
    X(node_map_evicted)     /* node creations evicted before backward */  \
    X(nodes_without_creation) /* backward node whose creation is unknown */\
    X(node_layer_unmatched) /* BWD_NODE_LAYER with no node open, or no layer */\
    X(ac2g_unmatched)       /* GPU activity whose launch never came */    \
    X(pass_unbalanced)      /* backward pass begin/end out of pairs */    \
    X(steps_out_of_order)   /* iteration boundary earlier than the last */\
    X(layers_dropped)       /* layer table full */                        \
    X(windows_unmatched)    /* window end without begin, or never ended */\
    X(windows_refused)      /* windows beyond the per-stream cap         \
                             * (convert.h): records kept in main */      \
    X(pid_mismatch)         /* process info for another pid */            \
    X(warnings_dropped)     /* warnings beyond GT__MAX_WARNINGS */        \
    X(compiled_dropped)     /* compiled-graph map records out of bounds,  \
                             * beyond the caps, or of an unknown map */   \
    X(compiled_unmatched)   /* an operator run directly by a compiled     \
                             * region that no call of its map names, or  \
                             * a region of a map never described */

struct gt__anomalies {
#define GT__ANOM_FIELD(n) uint64_t n;
    GT__ANOMALIES(GT__ANOM_FIELD)
#undef GT__ANOM_FIELD
};

/* ------------------------------------------------------------ strings */

/* One string of the stream's table (stream.c). ver counts (re)definitions,
 * so a writer's per-string cache (struct gt__strcache) sees a redefinition
 * without being told. */
struct gt__str {
    char *raw;        /* raw bytes, NUL-terminated copy */
    char *esc;        /* JSON-escaped, without quotes, NUL-terminated */
    uint32_t raw_len;
    uint32_t esc_len;
    uint32_t ver;     /* 0: undefined */
};

/* What one writer remembers about a string: valid while ver matches. */
struct gt__strcache {
    uint32_t ver;
    int32_t layer;    /* layer index, -1: not yet looked up */
    uint32_t cls;     /* module class string id seen with this path */
};

/* One call of a compiled graph's map (GT_R_COMPILED_CALL): string ids;
 * phase 0 while the record has not come. */
struct gt__ccall {
    uint32_t kernel, scope, owner, fused;
    uint16_t phase, flags;
};

/* A compiled graph's map (GT_R_COMPILED_GRAPH); phase 0: none. */
struct gt__cgraph {
    uint32_t graph_id, compile_id, code;
    uint32_t ncalls;
    uint32_t gpu_calls;   /* calls flagged GT_CCALL_GPU */
    uint16_t phase, flags;
    struct gt__ccall *calls;
};

/* A module's class by its layer name (GT_R_LAYER_INFO): string ids. */
struct gt__lclass {
    uint32_t layer, cls;
    uint32_t flags;       /* GT_LAYER_F_* of its latest LAYER_INFO */
};

struct gt__lost {
    uint32_t tid;
    uint32_t what;
    uint64_t count;
};

/* Records of one thread (disk-full accounting, convert.c). */
struct gt__tcount {
    uint32_t tid;
    uint64_t n;
};
#define GT__MAX_TCOUNT 1024u /* threads counted; past it, under tid 0 */

/* A file a full disk cut: its fd, kept until space is back (files.c). */
struct gt__cut {
    int fd;
    char *entry;            /* its unfinished-index entry, or NULL */
};
#define GT__MAX_CUT 64u

struct gt__dev_clock {
    int32_t device;
    uint32_t count;
    uint64_t mono_ns, device_ts, uncertainty_ns;
};

struct gt__warning {
    uint32_t code, text;
    uint64_t ts;
};

/* A collective call (GT_R_COLLECTIVE): what `gradtrace merge` aligns by. */
struct gt__coll {
    uint32_t op, group, ranks;
    uint64_t seq, begin_ns, end_ns;
};

/* Hash of an OS tid for the thread tables (stream's names, writers'). */
static inline uint32_t gt__tid_hash(uint32_t tid)
{
    return (tid * 2654435761u) >> 7;
}

/* A thread's name, by OS tid (open addressing, never deleted). */
struct gt__tname {
    uint32_t tid;
    uint32_t name;        /* string id */
    uint32_t used;
};

/* What the last metadata record changed, for the writers' part of it. */
enum {
    GT__NOTE_CHANGED = 1, /* lost count, thread name or rank changed */
    GT__NOTE_ADDED = 2,   /* a warning was kept */
};

/*
 * Everything per stream (stream.c): the options, the identity from the
 * hello and PROCESS_INFO, the time base, the string table, thread names
 * and context, clock pairs, lost counts, warnings, the capture windows'
 * history and the list of every file written. One instance, owned by the
 * struct gt__conv; every writer holds a pointer to it and reads it when it
 * writes. Only stream.c and the record table's stream handlers write it.
 */
struct gt__cstream {
    /* options */
    char *out_dir, *stem, *out_path;
    uint64_t max_bytes, max_events;
    uint32_t node_map_cap;
    int keep_empty_main;
    int ack_marks;          /* files carry acknowledgement marks */
    char *index_dir;        /* the unfinished-file index (repair.h), or NULL */

    /* identity */
    int have_hello;
    uint32_t pid, ppid;
    int32_t rank, local_rank, world_size;
    uint32_t hello_flags;         /* GT_HELLO_* of the stream's hello */
    char *hostname, *cmdline; /* raw, NUL-terminated */
    uint64_t start_mono, start_real;
    uint64_t base_ns;      /* monotonic ns of ts 0 */
    int have_base;

    /* thread context (GT_R_THREAD) of the chunk being read */
    uint32_t cur_tid;
    int have_cur;

    /* strings and thread names */
    struct gt__str *strs;
    uint32_t nstrs;        /* allocated entries (ids 0..nstrs-1) */
    uint64_t str_bytes;
    struct gt__tname *tnames; /* 2 * GT__MAX_THREADS slots, lazily */
    uint32_t ntnames;

    /* metadata */
    struct gt__lost lost[GT__MAX_LOST];
    uint32_t nlost;
    uint64_t lost_sum[5];   /* by enum gt_lost_kind */
    uint64_t host_pairs;
    uint64_t host_first_mono, host_first_real, host_last_mono, host_last_real;
    struct gt__dev_clock devclk[GT__MAX_DEVICES];
    uint32_t ndevclk;
    struct gt__warning warnings[GT__MAX_WARNINGS];
    uint32_t nwarnings;
    /* collectives: a ring of the newest GT__MAX_COLLECTIVES, oldest at
     * colls[ncoll_total % GT__MAX_COLLECTIVES] once it is full */
    struct gt__coll colls[GT__MAX_COLLECTIVES];
    uint64_t ncoll_total;
    /* NCCL kernels taken as collectives: per kernel name (its group), how
     * many were seen (their seq) */
    struct { uint32_t group; uint64_t count; } nccl[GT__MAX_NCCL_NAMES];
    uint32_t nnccl;

    /* torch.compile'd graphs (compiled.c): maps by number - 1, their
     * calls counted against GT__MAX_CCALLS; the bare root's layer name
     * (GT_R_LAYER_INFO), 0 unknown; module classes by layer name text,
     * GT__MAX_LAYERS at most */
    struct gt__cgraph *cg;
    uint32_t ncg, cg_cap;
    uint64_t ccalls;
    uint32_t bare_root;
    struct gt__lclass *lcls;
    uint32_t nlcls, lcls_cap;
    struct gt__index lcls_ix;

    /* capture windows: history, GT__MAX_WINDOWS at most (window.c) */
    struct gt__conv_window *winfo;
    uint32_t nwinfo;
    uint32_t win_max_id;    /* largest window id given a file so far */
    uint64_t win_created;   /* window writers created in this stream */

    /* every file, main and windows, NULL-ended */
    char **all_paths;
    size_t nall;

    /* from gt__conv_finish */
    int truncated;
    int goodbye;            /* GT_R_GOODBYE seen: the agent ended the stream */
    int job_route;          /* the last GT_R_JOB_ROUTE's up (the daemon's
                             * job triggers; nothing in the trace) */
    uint64_t lost_disk_full; /* records a full disk cost: sum of dfull */
    /* Disk full (convert.c): per thread, the records converted since the
     * last acknowledgement mark (a cut file loses them), and the records
     * a full disk cost. */
    struct gt__tcount pend[GT__MAX_TCOUNT], dfull[GT__MAX_TCOUNT];
    uint32_t npend, ndfull;
    uint64_t files_done;    /* files finished, written out (files.c) */
    uint64_t marked_done;   /* files_done at the last mark (convert.c) */
    /* Files a full disk cut, finished when space is back (files.c). */
    struct gt__cut cut[GT__MAX_CUT];
    uint32_t ncut;
    struct gt__framer_stats stats;
    int have_stats;

    /* Results of the last metadata record: GT__NOTE_* bits, and the
     * anomalies it caused, which are charged to every writer alive (each
     * file's metadata describes the stream as its own output saw it). */
    uint32_t note;
    struct gt__anomalies an;
};

/* The latest time a trace shows: GT__REL_MAX (2^52 ns, 52 days) after
 * its base, so that every ts and ts + dur, written in microseconds with
 * nanosecond fractions, is exact in a JSON reader's double. */
static inline uint64_t gt__cstream_horizon(const struct gt__cstream *s)
{
    uint64_t b = s->base_ns;
    return b > UINT64_MAX - GT__REL_MAX ? UINT64_MAX : b + GT__REL_MAX;
}

/* A monotonic time on the trace's axis: ns after the base, clamped to
 * [0, GT__REL_MAX]. */
static inline uint64_t gt__cstream_rel(const struct gt__cstream *s,
                                       uint64_t ts)
{
    if (ts < s->base_ns)
        return 0;
    if (ts > gt__cstream_horizon(s))
        ts = gt__cstream_horizon(s);
    return ts - s->base_ns;
}

/* ------------------------------------------------ stream.c */

/* Sets options from opts (defaults applied). @return 0 or -ENOMEM; call
 * gt__cstream_close either way. */
GT__WUR int gt__cstream_init(struct gt__cstream *s,
                             const struct gt__conv_opts *opts);
void gt__cstream_close(struct gt__cstream *s);
GT__WUR int gt__cstream_hello(struct gt__cstream *s,
                              const struct gt__hello_info *hello);
/* Time base (without a hello) and thread context for a new chunk. */
void gt__cstream_chunk_begin(struct gt__cstream *s,
                             const struct gt_chunk_header *h);
/* Defines (or redefines) string id. */
void gt__str_define(struct gt__cstream *s, uint32_t id, const char *text,
                    size_t len);
/* The raw text of string id, NUL-terminated; "(unknown string)" for an
 * id never defined (not counted: the writers count what they name). */
const char *gt__cstream_raw(const struct gt__cstream *s, uint32_t id,
                            uint32_t *len);
/* The name (string id) of OS thread tid, 0 unknown. */
uint32_t gt__cstream_tname(const struct gt__cstream *s, uint32_t tid);
/* Names thread tid. @return 1 when its name changed. */
int gt__cstream_tname_set(struct gt__cstream *s, uint32_t tid, uint32_t name);
/* A writer created a file: added to the stream's list (and, for a
 * window's first file, to its history entry). */
void gt__cstream_file_opened(struct gt__cstream *s, const char *path,
                             int window, uint32_t win_id);
/* Window history: the newest entry for id, or NULL; a new entry (the
 * oldest dropped beyond GT__MAX_WINDOWS), or NULL; an entry's strings. */
struct gt__conv_window *gt__winfo_find(struct gt__cstream *s, uint32_t id);
struct gt__conv_window *gt__winfo_add(struct gt__cstream *s);
void gt__winfo_release(struct gt__conv_window *w);
/* The stream's part of the metadata records (the record table's). */
void gt__cs_on_string(struct gt__cstream *s, const uint8_t *rec, uint16_t size);
void gt__cs_on_process(struct gt__cstream *s, const uint8_t *rec,
                       uint16_t size);
void gt__cs_on_thread_info(struct gt__cstream *s, const uint8_t *rec,
                           uint16_t size);
void gt__cs_on_thread(struct gt__cstream *s, const uint8_t *rec, uint16_t size);
void gt__cs_on_clock(struct gt__cstream *s, const uint8_t *rec, uint16_t size);
void gt__cs_on_lost(struct gt__cstream *s, const uint8_t *rec, uint16_t size);
void gt__cs_on_goodbye(struct gt__cstream *s, const uint8_t *rec,
                       uint16_t size);
void gt__cs_on_job_route(struct gt__cstream *s, const uint8_t *rec,
                         uint16_t size);
void gt__cs_on_warning(struct gt__cstream *s, const uint8_t *rec,
                       uint16_t size);
void gt__cs_on_collective(struct gt__cstream *s, const uint8_t *rec,
                          uint16_t size);
/* Compiled graphs (cmaps.c): maps, module names; freed by
 * gt__cs_compiled_free. */
void gt__cs_on_cgraph(struct gt__cstream *s, const uint8_t *rec, uint16_t size);
void gt__cs_on_ccall(struct gt__cstream *s, const uint8_t *rec, uint16_t size);
void gt__cs_on_layer_info(struct gt__cstream *s, const uint8_t *rec,
                          uint16_t size);
void gt__cs_compiled_free(struct gt__cstream *s);
/* Map graph's call idx, or NULL (unknown, or never described). */
const struct gt__ccall *gt__cs_ccall(const struct gt__cstream *s,
                                     uint32_t graph, uint32_t idx);
/* Map graph, or NULL. */
const struct gt__cgraph *gt__cs_cgraph(const struct gt__cstream *s,
                                       uint32_t graph);
/* Raw text of string id and its length, or NULL when undefined. */
const char *gt__cs_text(const struct gt__cstream *s, uint32_t id,
                        uint32_t *len);
/* The class (string id) GT_R_LAYER_INFO gave layer name path, or 0. */
uint32_t gt__cs_layer_class(const struct gt__cstream *s, const char *path,
                            size_t len);
/* Its GT_LAYER_F_* flags, or 0. */
uint32_t gt__cs_layer_flags(const struct gt__cstream *s, const char *path,
                            size_t len);
/* A GPU kernel's stream part: an NCCL kernel is also a collective. */
void gt__cs_on_kernel(struct gt__cstream *s, const uint8_t *rec, uint16_t size);

#endif /* GRADTRACE_DAEMON_CONV_CSTREAM_H */
