/*
 * Converter internals. Nothing here is part of the daemon's contract
 * (convert.h is).
 *
 * Design: one stream feeds several outputs, so the state is in three
 * kinds of struct with one owner each:
 *
 *   - struct gt__cstream (cstream.h, stream.c): everything per stream,
 *     once: options, identity from the hello, time base, string table,
 *     thread names and context, clock pairs, lost counts, warnings,
 *     window history, the list of every file written. Metadata records
 *     change it once.
 *   - struct gt__writer (writer.c, records.c, nodes.c, layers.c, gpu.c,
 *     meta.c, threads.c, tracks.c): one output's model (the main one, or
 *     a capture window's), holding a pointer to the stream and only its
 *     own state: tracks, thread stacks, correlation maps, layers,
 *     per-string caches, anomaly counts. Its record handlers say what
 *     happened through its emitter; it never calls into window.c.
 *   - the writer's emitter (emit.h): what turns that into an output, the
 *     Chrome JSON files (chrome.h: emit_chrome.c, files.c) or the
 *     per-layer table (agg_emit.c), made by the converter's emitter kind.
 *     It reads the stream and its writer's counts, never calls them.
 *
 * struct gt__conv (convert.c) owns one stream, the main writer and the
 * window writers; window.c routes records among them by records.c's
 * table of {type, size, route, stream part, writer part}. Dependencies
 * point one way: convert.c -> window.c -> writer files -> emitter ->
 * stream.c.
 *
 * Memory model: everything below is bounded by a cap: strings, threads,
 * tracks, layers, open spans per track, the node-creation and correlation
 * maps. Exceeding a cap drops the newest item (or evicts the oldest, for
 * the maps) and counts it in an anomaly counter that lands in the trace's
 * metadata. Nothing grows with the number of events converted.
 */
#ifndef GRADTRACE_DAEMON_CONV_INTERNAL_H
#define GRADTRACE_DAEMON_CONV_INTERNAL_H

#include <stdint.h>

#include "daemon/convert/convert.h"
#include "daemon/convert/cstream.h"
#include "daemon/convert/emit.h"
#include "daemon/convert/index.h"
#include "daemon/convert/jsonw.h"
#include "common/version.h"

/* ------------------------------------------------------------ bounded map */

/*
 * A bounded map from a (a, b) key to a small value: two-way set-associative,
 * so memory is fixed at creation and an insert into a full bucket evicts
 * the older entry (map.c explains why this suits counting keys).
 */
struct gt__bmap_val {
    uint64_t x;
    uint64_t y;
    uint32_t p;
    uint32_t q;
};

struct gt__bmap_ent {
    uint64_t a, b;
    struct gt__bmap_val v;
    uint64_t stamp;   /* insertion order, 0 = empty */
};

struct gt__bmap {
    struct gt__bmap_ent *e; /* 2 entries per bucket */
    uint32_t bmask;   /* buckets - 1 */
    uint64_t stamp;
};

GT__WUR int gt__bmap_init(struct gt__bmap *m, uint32_t cap);
void gt__bmap_free(struct gt__bmap *m);
/* Inserts or replaces. @return 1 if another live entry was evicted. */
int gt__bmap_put(struct gt__bmap *m, uint64_t a, uint64_t b,
                 const struct gt__bmap_val *v);
/* As gt__bmap_put; when another live entry is evicted and old is not NULL,
 * *old receives its value. */
int gt__bmap_put_old(struct gt__bmap *m, uint64_t a, uint64_t b,
                     const struct gt__bmap_val *v, struct gt__bmap_val *old);
/* The value, writable in place, or NULL. Valid until the next put/take. */
struct gt__bmap_val *gt__bmap_find(struct gt__bmap *m, uint64_t a, uint64_t b);
/* @return the value, or NULL. Valid until the next put/take. */
const struct gt__bmap_val *gt__bmap_get(const struct gt__bmap *m, uint64_t a,
                                        uint64_t b);
/* Removes the entry. @return 1 and *out filled when found, else 0. */
int gt__bmap_take(struct gt__bmap *m, uint64_t a, uint64_t b,
                  struct gt__bmap_val *out);

/* ------------------------------------------------------------ tracks */

/* Open addressing, never deleted, at most half full: never loses a stream
 * (a second track for one (pid, tid) could break its nesting). */
struct gt__stream_slot {
    uint32_t device, stream, track, used;
};

struct gt__proc {
    uint32_t pid;
    uint32_t sort;
    uint32_t next_synth; /* next synthetic tid */
};

struct gt__track {
    uint32_t proc;       /* index into procs */
    uint32_t tid;
    uint32_t sort;
    uint32_t overflow;   /* track index of the next overlap track, 0 none */
    uint32_t level;      /* 0 for a primary track, k for overlap track k */
    char *name;          /* raw (its overlap tracks are named after it) */
    /* In-order placement of complete events (gt__place). */
    uint64_t last_start;
    uint32_t depth;
    uint64_t ends[GT__LANE_DEPTH];
};

/* ------------------------------------------------------------ threads */

/* gt__open.flags */
enum {
    GT__OPEN_RECOMPUTE = 1, /* module scope: a checkpoint's recompute */
    GT__OPEN_LAYER_SET = 2, /* node: layer given by GT_R_BWD_NODE_LAYER */
    GT__OPEN_BACKWARD = 4,  /* module scope: a layer's backward range */
    GT__OPEN_BARE = 8,      /* region (and its joined operators): its
                             * layer is the bare root, whose modules'
                             * names are the map's paths as they are */
    GT__OPEN_IN_REGION = 16, /* operator run directly by a region */
};

struct gt__open {
    uint64_t ts;
    uint64_t seq;         /* backward nodes */
    uint64_t fwd_tid;
    uint64_t created_ts;
    uint64_t nested_ns;   /* nodes: time of nodes run inside this one */
    uint64_t comm_ns;     /* nodes: communication scopes inside it */
    uint64_t op_id;       /* operators: the OP_BEGIN id */
    uint32_t name;
    uint32_t cls;         /* module class (scopes) */
    uint32_t layer;       /* backward nodes: layer string id, 0 unknown */
    uint32_t created_tid; /* OS tid of the creating thread, 0 unknown */
    uint32_t param;       /* nodes: parameter name string id, 0 none */
    uint32_t ord;         /* open order on its thread (innermost item) */
    uint16_t kind;        /* scope kind */
    uint16_t has_creation;
    uint16_t created_in;  /* nodes: created inside a slice of its thread */
    uint32_t created_file; /* nodes: the writer's file index then */
    uint16_t order;       /* nodes: 1, or 2+ for nodes made by backward */
    uint16_t flags;       /* GT__OPEN_* */
};

/*
 * A node creation in the writer's map (struct gt__bmap_val): x creation
 * time, p creating tid, q layer, y the derivative order (low byte) and
 * GT__CREATION_USED once a backward node ran with it: a retained graph
 * runs it again, so it stays until evicted, and evicting it is normal.
 */
#define GT__CREATION_ORDER_MASK 0xffu
#define GT__CREATION_USED 0x100u
/* y also says whether the creation was inside a slice of its thread (an
 * open scope or operator, not a window's replay), and in its high half
 * the writer's file index then: an arrow may start on that slice only
 * when both are true and the file is still the same (gt__emit_node). */
#define GT__CREATION_INSIDE 0x200u
#define GT__CREATION_FILE_SHIFT 32

#define GT__ANY_TRACK UINT32_MAX

/* gt__open.kind of an operator (OP_BEGIN) on a thread's scope stack: no
 * wire scope kind (enum gt_scope_kind) is this large. */
#define GT__KIND_OP 0x100u
/* gt__open.kind of a compiled region (COMPILED_BEGIN, compiled.c): op_id
 * its map, layer the layer its map's paths hang from, seq the next call
 * to join, param where its forward kernels start in the thread's cfwd. */
#define GT__KIND_REGION 0x101u

/* Key of a GT_EXT_OP correlation in the writer's ext map. */
#define GT__EXT_OP_KEY 1u

struct gt__wait {
    struct gt__open o;
    uint64_t end;
    uint64_t chunk;       /* c->chunks when it started waiting */
    uint32_t tid;         /* executing thread */
    uint32_t live;
};

/* A closed scope held back until its same-start parent is written. */
struct gt__held {
    struct gt__open o;
    uint64_t end;
    int unclosed;
};

/* A forward or recompute kernel of a compiled region, until the region
 * ends (compiled.c): its layer index and time. */
struct gt__cfwd {
    int32_t layer;
    uint16_t phase;       /* GT_COMPILED_FORWARD or _RECOMPUTE */
    uint64_t s, e;
};

/* A closed region of a map with GPU calls, for its kernels' launches
 * (compiled.c): seq numbers them in the writer, from 1. */
#define GT__CRING 1024u
struct gt__cregion {
    uint32_t tid, graph, layer, cursor;
    uint16_t flags;
    uint64_t ts, end, seq;
};

/* Texts of a joined call's args, alive until its event is written. */
struct gt__cjoin {
    char path[2 * GT_STRING_MAX + 2];
    char fused[2 * GT_STRING_MAX + 2];
};

/* Time a thread's outermost compiled region spent, by attribution. */
struct gt__ctot {
    uint64_t ns[4];       /* one layer, fused, unowned, unjoined */
    uint64_t calls;       /* operators joined to calls */
};

struct gt__stack {
    struct gt__open *e;
    uint32_t depth;
    uint32_t cap;
    uint32_t dropped;     /* begins dropped beyond GT__STACK_MAX, still open */
};

#define GT__EQC_MAX 8

struct gt__eqc_key {
    uint64_t fwd_tid, seq;
};

struct gt__wthread {
    uint32_t os_tid;      /* its name: gt__cstream_tname */
    uint32_t track;       /* scopes */
    uint32_t bwd_track;   /* backward nodes, 0 until used */
    uint32_t fwd_track;   /* per-layer forward spans, 0 until used */
    uint32_t api_track;   /* CUDA API calls, 0 until used */
    uint32_t order;       /* creation order, for sort indexes */
    uint32_t pass_open;
    uint32_t opens;       /* scopes and nodes pushed so far (gt__open.ord) */
    uint64_t last_ts;
    uint64_t first_begin; /* start of its first scope or operator ... */
    int began;            /* ... once it had one */
    /* The last creations made inside a slice, all at time eqc_ts: if
     * every slice open around them ends at that very time, none of them
     * contains it (viewers take a slice's end as outside), and they lose
     * GT__CREATION_INSIDE (gt__scope_closed). */
    uint64_t eqc_ts;
    uint32_t eqc_n;
    struct gt__eqc_key eqc[GT__EQC_MAX];
    struct gt__stack scopes;
    struct gt__stack nodes;
    struct gt__held *held;  /* see scope_closed in convert.c */
    uint32_t nheld, held_cap;
    /* Closed backward ranges waiting until none is open on the thread,
     * to be placed in start order (gt__layer_range_closed). */
    struct gt__held *ranges;
    uint32_t nranges, ranges_cap;
    /* Compiled regions (compiled.c): open ones, the forward kernels of
     * those, and the outermost one's totals. */
    uint32_t nregions;
    struct gt__cfwd *cfwd;
    uint32_t ncfwd, cfwd_cap;
    struct gt__ctot ctot;
};

/* ------------------------------------------------------------ layers */

struct gt__wlayer {
    char *path;           /* raw */
    uint32_t path_len;
    uint32_t cls;         /* class string id, 0 unknown */
    int32_t parent;       /* layer index, -1 for a root */
    uint32_t depth;
    uint64_t gen;         /* pass group the fields below belong to */
    uint64_t first, last, nodes;
    /* Sums of node durations (each node's own time, nested nodes on its
     * thread excluded): its own nodes, and with its descendants'. */
    uint64_t self_nodes, self_ns, time_ns;
    uint64_t accg_ns;     /* AccumulateGrad time of its own nodes */
    uint64_t comm_ns;     /* communication inside its own nodes */
    uint64_t order2;      /* nodes made by backward, with descendants' */
    int node_credited;    /* a backward node was credited to it (ever) */
    /* A compiled region's forward spans (compiled.c): the region it has
     * values for, and its kernels' extent, time and count there. */
    uint64_t cgen, cfirst, clast, cns;
    uint32_t cn;
    /* Its extent in the pass group without AccumulateGrad nodes. */
    uint64_t xfirst, xlast;
    int has_x;
    int root_checked;     /* root_child (layers.c) looked at it */
    uint32_t top_name;    /* its own longest node's name id, 0: none */
    uint64_t top_ns;      /* and that node's own time */
};

/* What one backward node adds to its layer (gt__layer_credit). */
struct gt__credit {
    uint64_t s, e;        /* its span */
    uint64_t self_ns;     /* its own time, communication excluded */
    uint64_t comm_ns;     /* communication scopes run inside it */
    int accumulate;       /* an AccumulateGrad node */
    int order2;           /* created by a backward node */
    uint32_t name;        /* its name's string id */
    int kernel;           /* a compiled region's kernel, no node: its
                           * time counts, not as a node (compiled.c) */
};

/* ------------------------------------------------------------ the rest */

struct gt__window {
    uint32_t id, spec, layer, pad;
    uint64_t begin, end, iter_begin, iter_end;
};

/*
 * One output of a stream: the main one, or one capture window's. It reads
 * the stream's state through s and holds only what is its own: tracks,
 * thread stacks, correlation maps, layers, the capture windows drawn on
 * its track, its anomaly counts; and says what happened to its emitter
 * (out), which alone knows the output's format and files.
 */
struct gt__writer {
    struct gt__cstream *s;  /* shared, not owned */
    int window;             /* a capture window's writer ... */
    int shared_window;      /* ... begun while the main trace captured:
                             * main holds a copy of everything in it */
    uint32_t win_id;        /* ... for window win_id (info in s->winfo) */
    struct gt__emit *out;   /* the output its events go to (owned) */
    int err;                /* first error, its output's too; sticky */
    uint64_t total_ops;     /* operators said (cpu_op slices) */

    /* what this output saw */
    uint64_t min_ts, max_ts;
    int have_ts;
    uint64_t chunks, records;

    /* per-string cache (layer index, class), by string id */
    struct gt__strcache *scache;
    uint32_t nscache;

    /* threads and tracks */
    struct gt__wthread *threads;
    uint32_t nthreads, threads_cap;
    struct gt__index thread_ix; /* by OS tid */
    uint32_t cur;           /* current thread index + 1, 0 none */
    struct gt__proc *procs;
    uint32_t nprocs;
    struct gt__track *tracks; /* index 0 unused */
    uint32_t ntracks, tracks_cap;
    uint32_t gpu_proc[GT__MAX_DEVICES]; /* proc index + 1 */
    uint32_t layers_bwd_track, iter_track, window_track, meta_track;
    uint32_t compiled_track, compile_track; /* compiled.c, 0 until used */
    uint64_t cgen;          /* compiled regions ended (compiled.c) */
    uint32_t *ctouched;     /* layers with values in the region ending */
    uint32_t nctouched, ctouched_cap;
    struct gt__cregion *cring; /* GPU regions, GT__CRING, NULL until used */
    uint64_t ncring;
    struct gt__bmap capi;   /* corr of a launch in one -> its seq */
    int capi_ready;
    struct gt__cjoin *cjoin; /* a joined GPU kernel's arg texts */

    /* correlation */
    struct gt__bmap nodes;  /* (fwd_tid, seq) -> creation */
    struct gt__bmap ext;    /* (0, corr) -> layer/seq, (GT__EXT_OP_KEY,
                             * corr) -> operator id */
    struct gt__bmap api;    /* corr -> CUDA API call */
    struct gt__bmap kpend;  /* corr -> GPU activity waiting for its API */
    struct gt__stream_slot *streams; /* (device, stream) -> track */
    struct gt__wait *wait;  /* nodes waiting for a late creation (ring) */
    struct gt__bmap wait_idx; /* (fwd_tid, seq) -> wait index */
    uint32_t wait_head, nwait;
    uint32_t nstreams;

    /* layers, passes, iterations */
    struct gt__wlayer *layers;
    uint32_t nlayers, layers_cap;
    struct gt__index layer_ix; /* by path text, made on first use */
    uint32_t *touched;      /* layers with data in the current pass group */
    uint32_t ntouched;
    uint64_t gen;
    uint32_t passes_open;
    uint64_t group_begin, group_value;
    int group_has_pass;
    int group_ended;        /* every pass of the group has ended ... */
    uint64_t group_end;     /* ... at this time, */
    uint64_t group_end_chunk; /* while reading this chunk */
    uint64_t group_min_first; /* earliest node start in the group */
    uint64_t group_max_last;  /* latest node end in the group */
    uint64_t group_nodes, group_ns; /* every node of the group, its time */
    uint64_t group_un_nodes, group_un_ns; /* those without a layer */
    uint64_t group_un_accg;   /* AccumulateGrad nodes without a layer */
    uint64_t group_comm_ns;   /* communication inside its nodes */
    uint64_t group_order2;
    uint64_t group_kernels;   /* compiled kernels credited (compiled.c) */
    int saw_step;
    uint64_t iter_start;
    int have_iter_start;
    /* The thread track a ProfilerStep may go on (schema/trace-output.md,
     * "Iterations"): the track of the thread whose boundary opened the
     * current iteration with nothing open on it, 0 when none,
     * GT__ANY_TRACK when the iteration starts at the stream's start. */
    uint32_t iter_start_track;
    /* A slice began on that track exactly at iter_start: the step would
     * start with it but be written after it (viewers nest equal starts by
     * file order), so it goes to the Iterations track. */
    int iter_start_clash;
    int pend_iter;          /* a pass-based iteration span held back */
    uint64_t pend_start, pend_end, pend_value;
    uint32_t pend_track, pend_start_track;
    int pend_start_clash;
    uint64_t steps_written;  /* ProfilerStep spans this writer wrote */
    uint32_t win_tid;        /* window writer: the thread that opened it */
    int finished_layers;     /* window writer: writing its own step */

    /* capture windows drawn on this output's "Capture windows" track */
    struct gt__window open_win[GT__MAX_OPEN_WINDOWS];
    uint32_t nopen_win;
    struct gt__window windows[GT__MAX_WINDOWS];
    uint32_t nwindows;
    uint64_t windows_total;
    struct gt__anomalies an;

    int finished;
    int truncated;          /* its last file says truncated */
};

/* A window being written: its own writer (window.c). */
struct gt__win_out {
    struct gt__writer *sub;
    uint32_t id;
    int shared;           /* begun by WINDOW_BEGIN_SHARED: main gets a copy */
    int seg_open;         /* between WINDOW_BEGIN and WINDOW_END */
    uint64_t seg_begin, seg_end; /* last segment's times */
};

/*
 * The converter of one stream (convert.h): the stream state, the main
 * writer and the writers of the capture windows open now, between which
 * window.c routes records.
 */
struct gt__conv {
    struct gt__cstream s;
    const struct gt__emit_kind *kind; /* makes each writer's output */
    struct gt__writer *main;
    struct gt__win_out wout[GT__MAX_WIN_OPEN];
    uint32_t nwout;
    uint32_t route;         /* 1 + wout index taking records, 0 main */
    struct gt__bmap win_corr; /* CUDA corr -> window id */
    uint64_t win_events, win_bytes, win_files, win_anomalies; /* finished */
    uint64_t win_begun;     /* windows given a writer, for the cap */
    /* The last windows refused (a ring, newest at nrefused - 1): their
     * later segments and their END/DONE are neither given a writer nor
     * counted again. As many as may be open at once. */
    uint32_t refused_id[GT__MAX_WIN_OPEN];
    uint32_t nrefused;
};


/* The converter of convert.h (gt__conv_create) with another kind of
 * output for its writers (the aggregation's, agg_emit.c); opts' paths
 * name the capture windows' outputs. @return it, or NULL (errno set). */
struct gt__conv *gt__conv_create_kind(const struct gt__conv_opts *opts,
                                      const struct gt__emit_kind *kind);

/* ------------------------------------------------ route and record table */

/* How window.c routes a record type (records.c's table). */
enum {
    GT__ROUTE_SEGMENT = 0, /* the window whose segment is open, or main */
    GT__ROUTE_META,        /* the stream once, then every writer */
    GT__ROUTE_WINDOW,      /* window bookkeeping (window.c) */
    GT__ROUTE_API,         /* CUDA API: the window containing its start */
    GT__ROUTE_CORR,        /* GPU activity: its launch's window */
};

typedef void (*gt__stream_rec_fn)(struct gt__cstream *s, const uint8_t *rec,
                                  uint16_t size);
typedef void (*gt__writer_rec_fn)(struct gt__writer *c, const uint8_t *rec,
                                  uint16_t size);

/* One record type. Handlers get the record (unaligned: they memcpy it)
 * with its size already checked against size/var. */
struct gt__rec_kind {
    uint16_t type;
    uint16_t size;              /* exact size, or the minimum when var */
    uint8_t var;
    uint8_t route;              /* GT__ROUTE_* */
    uint16_t corr_off;          /* GT__ROUTE_CORR: offset of the u32 corr */
    gt__stream_rec_fn stream;   /* the stream's part, or NULL */
    gt__writer_rec_fn writer;   /* each writer's part, or NULL */
};

/* @return the record type's entry, or NULL for a type not known here. */
const struct gt__rec_kind *gt__rec_kind(uint16_t type);
/* @return whether size is valid for k. */
int gt__rec_size_ok(const struct gt__rec_kind *k, uint16_t size);

/* ------------------------------------------------ writer.c */

/*
 * A writer of stream s (which must outlive it), its output made by kind.
 * window/win_id: a capture window's writer. Its files (when its output
 * writes files) are named after stem (in s->out_dir) or out_path; both
 * are copied. @return the writer, or NULL (out of memory).
 */
struct gt__writer *gt__writer_create(struct gt__cstream *s,
                                     const struct gt__emit_kind *kind,
                                     int window, uint32_t win_id,
                                     const char *stem, const char *out_path);
/* Frees everything and its output (an open file is closed, not
 * finished). NULL ok. */
void gt__writer_free(struct gt__writer *c);
/* Chunk bookkeeping around records fed with gt__writer_record. */
void gt__writer_chunk_begin(struct gt__writer *c,
                            const struct gt_chunk_header *h);
void gt__writer_chunk_end(struct gt__writer *c);
/* One record into c (records.c); between records its output may move to
 * its next part (file). */
void gt__writer_record(struct gt__writer *c, uint16_t type, uint16_t size,
                       const uint8_t *rec);
/* Closes the spans still open at the last time seen. */
void gt__writer_close_open(struct gt__writer *c);
/* Closes open spans and the output (its last file complete).
 * @return 0 or the sticky error. */
GT__WUR int gt__writer_close(struct gt__writer *c);
/* Anomalies of all kinds counted by c. */
uint64_t gt__writer_anomalies(const struct gt__writer *c);
void gt__anomalies_add(struct gt__anomalies *dst,
                       const struct gt__anomalies *src);

/* Widens the [min_ts, max_ts] this output has seen (every handler that
 * reads a time; inline, so that the handler files need no file of theirs
 * for it, and none calls back into the record table's). */
static inline void gt__see_ts(struct gt__writer *c, uint64_t ts)
{
    if (!c->have_ts) {
        c->min_ts = c->max_ts = ts;
        c->have_ts = 1;
    } else if (ts > c->max_ts) {
        c->max_ts = ts;
    } else if (ts < c->min_ts) {
        c->min_ts = ts;
    }
}

/* String id when the stream defines it, else 0 (counted as an
 * unknown_strings anomaly): what an event names by string id. */
static inline uint32_t gt__str_known(struct gt__writer *c, uint32_t id)
{
    if (id < c->s->nstrs && c->s->strs[id].esc)
        return id;
    c->an.unknown_strings++;
    return 0;
}

/* ------------------------------------------------ files.c */

/* Finishes every cut file, cut back to its last acknowledgement mark.
 * @return 0, or -errno of the first that could not be (kept). */
int gt__files_finish_cut(struct gt__cstream *s);
/* Closes the cut files left (the index keeps them for the next start). */
void gt__files_drop_cut(struct gt__cstream *s);
/* A path of a file made before a restem (gt__conv_restem): starting with
 * `from` now `to` (gt__path_restem), as long as the file was renamed. */
void gt__file_path_restem(char **p, const char *from, const char *to);

/* ------------------------------------------------ tracks.c */

/* @return proc index of the training process (created on first use). */
uint32_t gt__main_proc(struct gt__writer *c);
/* Renames the training process after its rank changed. */
void gt__main_proc_rename(struct gt__writer *c);
/* @return proc index for GPU device, or UINT32_MAX when beyond the cap. */
uint32_t gt__gpu_proc(struct gt__writer *c, uint32_t device);
/*
 * Creates a track, declared to the output. tid UINT32_MAX asks for a
 * synthetic tid. name is raw text (copied). @return track index, 0 when
 * the table is full.
 */
uint32_t gt__track_new(struct gt__writer *c, uint32_t proc, uint32_t tid,
                       uint32_t sort, const char *name);
/* Renames a track (raw text, copied): declared to the output again. */
void gt__track_rename(struct gt__writer *c, uint32_t track, const char *name);
/*
 * Placement of a complete event [s, e] on a track fed in start order:
 * @return the track (t or one of its overlap tracks) where it nests, or 0
 * when none can take it (counted as overlap_dropped).
 */
uint32_t gt__place(struct gt__writer *c, uint32_t t, uint64_t s, uint64_t e);

/* ------------------------------------------------ convert.c */

/* A writer's part of GT_R_THREAD_INFO and GT_R_THREAD (threads.c). */
void gt__on_thread_info(struct gt__writer *c, const uint8_t *rec,
                        uint16_t size);
void gt__on_thread(struct gt__writer *c, const uint8_t *rec, uint16_t size);
/* The thread with OS tid, or NULL; find never creates, get does. */
struct gt__wthread *gt__thread_find(struct gt__writer *c, uint32_t tid);
struct gt__wthread *gt__thread_get(struct gt__writer *c, uint32_t tid);
/* A thread's synthetic track: 1 backward nodes, 2 layers forward, 3 API. */
uint32_t gt__thread_track(struct gt__writer *c, struct gt__wthread *th, int which);
void gt__window_done(struct gt__writer *c, struct gt__window *w);
/* Writes a closed scope (records.c), parents before same-start children. */
void gt__scope_closed(struct gt__writer *c, struct gt__wthread *th,
                      const struct gt__open *o, uint64_t end, int unclosed);

/* ------------------------------------------------ compiled.c */

/* Region o, just pushed on th at COMPILED_BEGIN of map graph, layer
 * (0: the running node's). */
void gt__region_begin(struct gt__writer *c, struct gt__wthread *th,
                      struct gt__open *o, uint32_t graph, uint32_t layer);
/* Operator o, just pushed directly inside region r: joined to its call. */
void gt__region_op(struct gt__writer *c, struct gt__open *r,
                   struct gt__open *o);
/* Writes operator o (flagged GT__OPEN_IN_REGION), whose slice ev is
 * ready but for its compiled args, when it joined a call, and credits
 * it. @return 1 when written, 0 when the caller writes ev as it is. */
int gt__region_op_emit(struct gt__writer *c, struct gt__wthread *th,
                       const struct gt__open *o, uint64_t end,
                       struct gt__ev *ev);
/* Writes region o, closed at end, and its layer spans and totals. */
void gt__region_closed(struct gt__writer *c, struct gt__wthread *th,
                       const struct gt__open *o, uint64_t end, int unclosed);
/* A CUDA launch (corr) at ts on OS thread tid: noted when inside a
 * closed region with GPU calls. A kernel of launch corr named name:
 * joined to that region's next GPU call of its name, its args added to
 * ev (texts in j). @return 1 when joined. */
void gt__region_launch(struct gt__writer *c, uint32_t tid, uint64_t ts,
                       uint32_t corr);
int gt__region_kernel(struct gt__writer *c, struct gt__ev *ev, uint32_t corr,
                      uint32_t name, struct gt__cjoin *j);
/* A writer's part of GT_R_COMPILE_SPAN. */
void gt__on_compile_span(struct gt__writer *c, const uint8_t *rec,
                         uint16_t size);

/* ------------------------------------------------ nodes.c */

/* Writes a backward node's X, its fwdbwd flow, and credits its layer. */
void gt__emit_node(struct gt__writer *c, struct gt__wthread *th,
                   const struct gt__open *o, uint64_t end, int unclosed);
/* A node ended: written now, or held until its creation is read. */
void gt__node_ended(struct gt__writer *c, struct gt__wthread *th,
                    const struct gt__open *o, uint64_t end, int unclosed);
/* A creation for a waiting node: written now. @return 1 if consumed. */
int gt__node_created_late(struct gt__writer *c, uint64_t fwd_tid, uint64_t seq,
                          uint64_t ts, uint32_t tid, uint32_t layer,
                          uint32_t order);
/* Writes nodes that waited a whole chunk (or all of them). */
void gt__nodes_chunk_end(struct gt__writer *c, int all);

/* ------------------------------------------------ gpu.c, meta.c */

/* Writers' parts of records (the record table's), size already checked. */
void gt__on_kernel(struct gt__writer *c, const uint8_t *rec, uint16_t size);
void gt__on_memcpy(struct gt__writer *c, const uint8_t *rec, uint16_t size);
void gt__on_memset(struct gt__writer *c, const uint8_t *rec, uint16_t size);
void gt__on_cuda_api(struct gt__writer *c, const uint8_t *rec, uint16_t size);
void gt__on_ext_corr(struct gt__writer *c, const uint8_t *rec, uint16_t size);
void gt__on_lost(struct gt__writer *c, const uint8_t *rec, uint16_t size);
void gt__on_window(struct gt__writer *c, const uint8_t *rec, uint16_t size);
void gt__on_warning(struct gt__writer *c, const uint8_t *rec, uint16_t size);
void gt__on_process(struct gt__writer *c, const uint8_t *rec, uint16_t size);

/* ------------------------------------------------ window.c (struct gt__conv) */

/* Routes one record of the stream (window writers get what falls in their
 * segments, GPU activity by correlation id; metadata reaches all). */
void gt__win_record(struct gt__conv *c, uint16_t type, uint16_t size,
                    const uint8_t *rec);
/* Chunk start/end for every window writer alive. */
void gt__win_chunk_begin(struct gt__conv *c, const struct gt_chunk_header *h);
void gt__win_chunk_end(struct gt__conv *c);
/* End of input: windows without WINDOW_DONE are closed as cut.
 * @return main's sticky error. */
GT__WUR int gt__win_finish_all(struct gt__conv *c);
void gt__win_free(struct gt__conv *c);

/* ------------------------------------------------ layers.c */

void gt__layer_set_class(struct gt__writer *c, uint32_t path_id, uint32_t cls);
/* child's top-level path ancestor gets parent (enclosing module) when it
 * has none by path. */
void gt__layer_nest(struct gt__writer *c, uint32_t child_id, uint32_t parent_id);
/* The same by layer index (-1: nothing done). */
void gt__layer_nest_at(struct gt__writer *c, int32_t ch, int32_t pa);

/* Layer index of path (len bytes; made when new), or -1; of string id
 * path_id (0: none), or -1. */
int32_t gt__layer_index(struct gt__writer *c, const char *path, size_t len);
int32_t gt__layer_of(struct gt__writer *c, uint32_t path_id);
/* gt__layer_credit to layer index l (-1: none). */
void gt__layer_credit_at(struct gt__writer *c, int32_t l,
                         const struct gt__credit *k);
/* Credits a backward node to layer path_id (0: none, counted as
 * unattributed) and its ancestors. */
void gt__layer_credit(struct gt__writer *c, uint32_t path_id,
                      const struct gt__credit *k);
void gt__pass_begin(struct gt__writer *c, struct gt__wthread *th, uint64_t ts,
                    uint64_t value);
void gt__pass_end(struct gt__writer *c, struct gt__wthread *th, uint64_t ts,
                  uint64_t value, uint32_t flags);
void gt__step(struct gt__writer *c, struct gt__wthread *th, uint64_t ts,
              uint64_t value);
/* A scope or operator begins on th at ts (what step placement needs). */
void gt__step_note_begin(struct gt__writer *c, struct gt__wthread *th,
                         uint64_t ts);
/*
 * Flushes the implicit group of nodes run outside any pass, if any, when
 * something at ts shows the next forward has begun: ts after the group's
 * last node (UINT64_MAX: unconditionally). A creation timed before the
 * group's nodes end is a replayed one (capture windows) and flushes nothing.
 */
void gt__layers_outside_pass(struct gt__writer *c, uint64_t ts);
/* Writes the current pass group's spans (its pass span ending at
 * end_ts) and starts an empty group (layers.c; iters.c's passes). */
void gt__layers_flush_group(struct gt__writer *c, uint64_t end_ts);
/* Communication of ns in a backward pass but in no node: the group's. */
void gt__layers_comm_outside(struct gt__writer *c, uint64_t ns);
/* End of a chunk: flushes a pass group that ended in an earlier chunk. */
void gt__layers_chunk_end(struct gt__writer *c);
/*
 * A backward range o (a module scope flagged GT__OPEN_BACKWARD) of th
 * closed at end, its nested ranges' time in o->nested_ns: becomes its
 * layer's backward span on `Layers backward` once no range is open on th
 * (so they are placed parent first), unless the layer has node-derived
 * spans (schema/trace-output.md, "Backward ranges").
 */
void gt__layer_range_closed(struct gt__writer *c, struct gt__wthread *th,
                            const struct gt__open *o, uint64_t end,
                            int unclosed);
/* Flushes pending layer spans and open iterations at end of input. */
void gt__layers_finish(struct gt__writer *c);
void gt__layers_free(struct gt__writer *c);

#endif /* GRADTRACE_DAEMON_CONV_INTERNAL_H */
