/*
 * The emitter interface: what the converter's record handlers say
 * happened, in a trace's terms, and the outputs that turn it into bytes
 * or numbers.
 *
 * Design (Perfetto's trace processor: importers -> storage -> exporters):
 * the record handlers (records.c, nodes.c, layers.c, gpu.c, meta.c) are
 * the importer. They match begins with ends, place spans on tracks that
 * nest, join creations with backward nodes and launches with kernels,
 * and say the result through this interface: process and track metadata,
 * complete slices, instants, counters and flows, each with typed args.
 * They know no output format. An emitter (struct gt__emit with its ops)
 * is one output: the Chrome JSON emitter (emit_chrome.c, with its files
 * in files.c) writes trace files, the aggregation emitter (agg_emit.c)
 * turns the same calls into the per-layer table of `gradtrace report`,
 * and another format is another emitter, with no handler copied.
 *
 * What an event carries (struct gt__ev): its track (a number the writer
 * declared with the track op), its category (enum gt__cat), its times as
 * the stream has them (monotonic ns, not clamped: each output maps them
 * onto its own time axis and counts what it had to clamp), its name as up
 * to GT__EV_NAMES parts (string ids of the stream's table or text, read
 * as one name) and up to GT__EV_ARGS typed args in order. An event and
 * everything it points to live only for the call: an emitter copies what
 * it keeps.
 *
 * Strings: a string id names a string of the stream (struct gt__cstream);
 * id 0 and an id the stream never defined both read "(unknown string)"
 * (the writer counts undefined ids it passes: gt__str_known). Text is raw
 * bytes, any content: each output escapes or cleans it as its format
 * needs. Arg keys are plain ASCII literals.
 *
 * The ops also carry an output's life cycle (files opened, rotated,
 * flushed, marked, cut by a full disk, closed); an output that writes no
 * files leaves those NULL, and the inline wrappers below take NULL as
 * "nothing to do".
 *
 * Not thread-safe: one writer drives its emitter from one thread.
 */
#ifndef GRADTRACE_DAEMON_CONV_EMIT_H
#define GRADTRACE_DAEMON_CONV_EMIT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/codec.h"

/* ------------------------------------------------------------ categories */

/* Every category an event may have, with the name traces give it. */
#define GT__CATS(X)                                                       \
    X(CPU_OP, "cpu_op")                 /* an aten operator (Kineto's) */ \
    X(USER, "user")                     /* a C API scope */               \
    X(MODULE, "module")                 /* a module scope on its thread */\
    X(NVTX, "nvtx")                     /* an NVTX range */               \
    X(COMM, "comm")                     /* communication (DDP, c10d) */   \
    X(SCOPE, "scope")                   /* a scope of another kind */     \
    X(LAYER_FORWARD, "layer_forward")   /* a layer's forward span */      \
    X(LAYER_RECOMPUTE, "layer_recompute") /* its checkpoint recompute */  \
    X(LAYER_BACKWARD, "layer_backward") /* its backward span */           \
    X(BACKWARD, "backward")             /* one backward node */           \
    X(NODE_CREATED, "node_created")     /* a node's creation slice */     \
    X(BACKWARD_PASS, "backward_pass")   /* a backward pass */             \
    X(BACKWARD_TOTALS, "backward_totals") /* a pass group's totals */     \
    X(ITERATION, "user_annotation")     /* ProfilerStep#N, Kineto's */    \
    X(WINDOW, "window")                 /* a capture window */            \
    X(KERNEL, "kernel")                 /* GPU kernel */                  \
    X(MEMCPY, "gpu_memcpy")             /* GPU copy */                    \
    X(MEMSET, "gpu_memset")             /* GPU memset */                  \
    X(CUDA_RUNTIME, "cuda_runtime")     /* a CUDA API call */             \
    X(INSTANT, "instant")               /* a C API instant */             \
    X(WARNING, "warning")               /* the agent's warnings */        \
    X(LOST, "lost")                     /* lost counts (a counter) */     \
    X(FWDBWD, "fwdbwd")                 /* creation -> backward node */   \
    X(AC2G, "ac2g")                     /* CUDA launch -> GPU activity */ \
    X(COMPILED, "compiled")             /* a compiled graph's run */      \
    X(COMPILED_TOTALS, "compiled_totals") /* a compiled run's attribution */\
    X(COMPILE, "compile")               /* dynamo compiling a frame */

enum gt__cat {
#define GT__CAT_ENUM(id, name) GT__CAT_##id,
    GT__CATS(GT__CAT_ENUM)
#undef GT__CAT_ENUM
    GT__CAT_COUNT
};

/* The categories' names as traces write them ("cpu_op"), by enum gt__cat
 * (emit.c). */
extern const struct gt__cat_name {
    const char *name;
    size_t len;
} gt__cat_names[GT__CAT_COUNT];

/* The category's name (a placeholder for a number out of range). */
static inline const char *gt__cat_name(enum gt__cat cat)
{
    return (unsigned)cat < GT__CAT_COUNT ? gt__cat_names[cat].name
                                         : "unknown";
}

/* Its length. */
static inline size_t gt__cat_len(enum gt__cat cat)
{
    return (unsigned)cat < GT__CAT_COUNT ? gt__cat_names[cat].len : 7;
}

/* ------------------------------------------------------------ events */

enum gt__arg_type {
    GT__ARG_U64,    /* unsigned integer */
    GT__ARG_I64,    /* signed integer */
    GT__ARG_F64,    /* double (a non-finite one reads as null) */
    GT__ARG_BOOL,
    GT__ARG_NULL,   /* the value is known to be absent */
    GT__ARG_TEXT,   /* raw text */
    GT__ARG_SID,    /* a string of the stream's table */
    GT__ARG_NS,     /* a duration in ns (Chrome: microseconds) */
    GT__ARG_U32X3,  /* three unsigned integers (CUDA grid, block) */
};

/* A part of a name, or a text value: string id sid when s is NULL, else
 * len bytes at s, with sid GT__TEXT_PLAIN when they are a literal of the
 * program (printable ASCII without '"' or '\\': no format escapes it). */
struct gt__text {
    const char *s;
    uint32_t len;
    uint32_t sid;
};
#define GT__TEXT_PLAIN 1u

struct gt__arg {
    const char *key;      /* plain ASCII literal, GT__EV_KEY_MAX at most */
    uint16_t klen;
    uint8_t type;         /* enum gt__arg_type */
    union {
        uint64_t u;
        int64_t i;
        double f;
        int b;
        struct gt__text t;  /* GT__ARG_TEXT, GT__ARG_SID */
        uint32_t u3[3];
    } v;
};

/* Instants: what the instant marks. */
enum gt__scope {
    GT__SCOPE_THREAD = 0, /* its track */
    GT__SCOPE_PROCESS,    /* its track's process */
};

#define GT__EV_NAMES 5
#define GT__EV_ARGS 16

/*
 * One event: a slice [ts, end], an instant or a counter sample at ts
 * (counters: each arg a series, its value the sample), on track.
 */
struct gt__ev {
    uint32_t track;
    uint8_t cat;          /* enum gt__cat */
    uint8_t scope;        /* instants: enum gt__scope */
    uint8_t nname;
    uint8_t nargs;
    uint64_t ts, end;
    struct gt__text name[GT__EV_NAMES];
    struct gt__arg args[GT__EV_ARGS];
};

/* A flow (an arrow) from a point of one track to a point of another. */
struct gt__flow {
    uint8_t cat;          /* enum gt__cat */
    uint32_t from_track, to_track;
    uint64_t from_ts, to_ts;
};

/* An event of category cat on track over [ts, end] (end = ts for an
 * instant or a counter), no name or args yet. */
static inline void gt__ev_init(struct gt__ev *ev, enum gt__cat cat,
                               uint32_t track, uint64_t ts, uint64_t end)
{
    ev->track = track;
    ev->cat = (uint8_t)cat;
    ev->scope = GT__SCOPE_THREAD;
    ev->nname = ev->nargs = 0;
    ev->ts = ts;
    ev->end = end;
}

/* Appends a name part: string id sid, text s (len bytes), or a literal.
 * Parts beyond GT__EV_NAMES are dropped (callers never pass that many). */
static inline void gt__ev_name_sid(struct gt__ev *ev, uint32_t sid)
{
    if (ev->nname < GT__EV_NAMES)
        ev->name[ev->nname++] = (struct gt__text){NULL, 0, sid};
}

static inline void gt__ev_name_text(struct gt__ev *ev, const char *s,
                                    size_t len)
{
    if (ev->nname < GT__EV_NAMES)
        ev->name[ev->nname++] = (struct gt__text){s, (uint32_t)len, 0};
}

/* A literal part (plain, see struct gt__text). */
static inline void gt__ev_name(struct gt__ev *ev, const char *lit)
{
    if (ev->nname < GT__EV_NAMES)
        ev->name[ev->nname++] =
            (struct gt__text){lit, (uint32_t)strlen(lit), GT__TEXT_PLAIN};
}

/* Longest arg key: keys are short literals (longer ones are cut). */
#define GT__EV_KEY_MAX 32u

/* The next arg of ev keyed key (a literal), or NULL past GT__EV_ARGS. */
static inline struct gt__arg *gt__ev_arg(struct gt__ev *ev, const char *key,
                                         enum gt__arg_type type)
{
    struct gt__arg *a;
    size_t kl = strlen(key);
    if (ev->nargs >= GT__EV_ARGS)
        return NULL;
    a = &ev->args[ev->nargs++];
    a->key = key;
    a->klen = (uint16_t)(kl < GT__EV_KEY_MAX ? kl : GT__EV_KEY_MAX);
    a->type = (uint8_t)type;
    return a;
}

static inline void gt__ev_u64(struct gt__ev *ev, const char *key, uint64_t v)
{
    struct gt__arg *a = gt__ev_arg(ev, key, GT__ARG_U64);
    if (a)
        a->v.u = v;
}

static inline void gt__ev_i64(struct gt__ev *ev, const char *key, int64_t v)
{
    struct gt__arg *a = gt__ev_arg(ev, key, GT__ARG_I64);
    if (a)
        a->v.i = v;
}

static inline void gt__ev_f64(struct gt__ev *ev, const char *key, double v)
{
    struct gt__arg *a = gt__ev_arg(ev, key, GT__ARG_F64);
    if (a)
        a->v.f = v;
}

static inline void gt__ev_bool(struct gt__ev *ev, const char *key, int v)
{
    struct gt__arg *a = gt__ev_arg(ev, key, GT__ARG_BOOL);
    if (a)
        a->v.b = v != 0;
}

static inline void gt__ev_null(struct gt__ev *ev, const char *key)
{
    (void)gt__ev_arg(ev, key, GT__ARG_NULL);
}

static inline void gt__ev_text(struct gt__ev *ev, const char *key,
                               const char *s, size_t len)
{
    struct gt__arg *a = gt__ev_arg(ev, key, GT__ARG_TEXT);
    if (a)
        a->v.t = (struct gt__text){s, (uint32_t)len, 0};
}

/* A literal text value (plain, see struct gt__text). */
static inline void gt__ev_lit(struct gt__ev *ev, const char *key,
                              const char *lit)
{
    struct gt__arg *a = gt__ev_arg(ev, key, GT__ARG_TEXT);
    if (a)
        a->v.t = (struct gt__text){lit, (uint32_t)strlen(lit), GT__TEXT_PLAIN};
}

static inline void gt__ev_sid(struct gt__ev *ev, const char *key, uint32_t sid)
{
    struct gt__arg *a = gt__ev_arg(ev, key, GT__ARG_SID);
    if (a)
        a->v.t = (struct gt__text){NULL, 0, sid};
}

static inline void gt__ev_ns(struct gt__ev *ev, const char *key, uint64_t ns)
{
    struct gt__arg *a = gt__ev_arg(ev, key, GT__ARG_NS);
    if (a)
        a->v.u = ns;
}

static inline void gt__ev_u32x3(struct gt__ev *ev, const char *key,
                                uint32_t x, uint32_t y, uint32_t z)
{
    struct gt__arg *a = gt__ev_arg(ev, key, GT__ARG_U32X3);
    if (a) {
        a->v.u3[0] = x;
        a->v.u3[1] = y;
        a->v.u3[2] = z;
    }
}

/* The arg of ev keyed key, or NULL (a consumer reading an event back). */
const struct gt__arg *gt__ev_find(const struct gt__ev *ev, const char *key);

/* ------------------------------------------------------------ emitters */

struct gt__emit;

/* How much an output wrote (its files, all of them). */
struct gt__emit_stats {
    uint64_t events;      /* events written, metadata events included */
    uint64_t bytes;       /* bytes, the open file's so far included */
    uint64_t files;       /* files created */
};

/*
 * What an emitter does. Metadata and event ops are required; every life
 * cycle op may be NULL. Errors of an output go to the int its creator
 * gave it (the writer's sticky error), where noted they are returned too.
 */
struct gt__emit_ops {
    /* Process proc (dense from 0) is pid, sorted by sort, named name
     * (raw text); called again when it is renamed. */
    void (*process)(struct gt__emit *e, uint32_t proc, uint32_t pid,
                    uint32_t sort, const char *name);
    /* Track t (dense from 1) is thread tid of process proc, sorted by
     * sort, named name (raw); called again when it is renamed. */
    void (*track)(struct gt__emit *e, uint32_t t, uint32_t proc,
                  uint32_t tid, uint32_t sort, const char *name);
    /* A complete slice [ev->ts, ev->end] on ev->track. */
    void (*slice)(struct gt__emit *e, const struct gt__ev *ev);
    /* An instant at ev->ts (ev->scope says of what). */
    void (*instant)(struct gt__emit *e, const struct gt__ev *ev);
    /* A counter sample at ev->ts: each arg a series. */
    void (*counter)(struct gt__emit *e, const struct gt__ev *ev);
    /* A flow: its start and its end, written together. */
    void (*flow)(struct gt__emit *e, const struct gt__flow *f);

    /* The part (file) events go to now, counted from 0: an arrow may
     * start on a slice only in the part that holds the slice. */
    uint32_t (*part)(const struct gt__emit *e);
    /* Whether the output has begun (its first part exists). */
    int (*begun)(const struct gt__emit *e);

    /* Begins the output now (the first event would otherwise).
     * @return 0 or the sticky error. */
    int (*open)(struct gt__emit *e);
    /* Between two records: the output may move to its next part.
     * @return 0, or nonzero when that failed. */
    int (*between)(struct gt__emit *e);
    /* End of an input chunk: a write error found since is reported. */
    void (*chunk_end)(struct gt__emit *e);
    /* Writes out what is buffered. @return 0 or the sticky error. */
    int (*flush)(struct gt__emit *e);
    /* Writes an acknowledgement mark (what is before it is complete) and
     * flushes. @return 0 or the sticky error. */
    int (*mark)(struct gt__emit *e);
    /* A full disk: the open part is left as it is, kept to be finished
     * when space is back; the next event starts the next part. */
    void (*cut)(struct gt__emit *e);
    /* Writes the last part, complete. @return 0 or the sticky error. */
    int (*close)(struct gt__emit *e);
    void (*stats)(const struct gt__emit *e, struct gt__emit_stats *st);
    /* Paths that start with `from` (a directory and the old stem) start
     * with `to` now, and the stem sfrom is sto (gt__conv_restem). */
    void (*restem)(struct gt__emit *e, const char *from, const char *to,
                   const char *sfrom, const char *sto);
    void (*free)(struct gt__emit *e);
};

/* Implementations put this first in their own struct. */
struct gt__emit {
    const struct gt__emit_ops *ops;
};

static inline void gt__emit_process(struct gt__emit *e, uint32_t proc,
                                    uint32_t pid, uint32_t sort,
                                    const char *name)
{
    e->ops->process(e, proc, pid, sort, name);
}

static inline void gt__emit_track(struct gt__emit *e, uint32_t t,
                                  uint32_t proc, uint32_t tid, uint32_t sort,
                                  const char *name)
{
    e->ops->track(e, t, proc, tid, sort, name);
}

static inline void gt__emit_slice(struct gt__emit *e, const struct gt__ev *ev)
{
    e->ops->slice(e, ev);
}

static inline void gt__emit_instant(struct gt__emit *e,
                                    const struct gt__ev *ev)
{
    e->ops->instant(e, ev);
}

static inline void gt__emit_counter(struct gt__emit *e,
                                    const struct gt__ev *ev)
{
    e->ops->counter(e, ev);
}

/* A flow of category cat from (from_track, from_ts) to (to_track, to_ts). */
static inline void gt__emit_flow(struct gt__emit *e, enum gt__cat cat,
                                 uint32_t from_track, uint64_t from_ts,
                                 uint32_t to_track, uint64_t to_ts)
{
    struct gt__flow f = {(uint8_t)cat, from_track, to_track, from_ts, to_ts};
    e->ops->flow(e, &f);
}

static inline uint32_t gt__emit_part(const struct gt__emit *e)
{
    return e->ops->part ? e->ops->part(e) : 0;
}

static inline int gt__emit_begun(const struct gt__emit *e)
{
    return e->ops->begun ? e->ops->begun(e) : 0;
}

static inline int gt__emit_open(struct gt__emit *e)
{
    return e->ops->open ? e->ops->open(e) : 0;
}

static inline int gt__emit_between(struct gt__emit *e)
{
    return e->ops->between ? e->ops->between(e) : 0;
}

static inline void gt__emit_chunk_end(struct gt__emit *e)
{
    if (e->ops->chunk_end)
        e->ops->chunk_end(e);
}

static inline int gt__emit_flush(struct gt__emit *e)
{
    return e->ops->flush ? e->ops->flush(e) : 0;
}

static inline int gt__emit_mark(struct gt__emit *e)
{
    return e->ops->mark ? e->ops->mark(e) : 0;
}

static inline void gt__emit_cut(struct gt__emit *e)
{
    if (e->ops->cut)
        e->ops->cut(e);
}

static inline int gt__emit_close(struct gt__emit *e)
{
    return e->ops->close ? e->ops->close(e) : 0;
}

/* Zeroes st, then fills what the output counted. */
static inline void gt__emit_stats(const struct gt__emit *e,
                                  struct gt__emit_stats *st)
{
    memset(st, 0, sizeof(*st));
    if (e->ops->stats)
        e->ops->stats(e, st);
}

static inline void gt__emit_restem(struct gt__emit *e, const char *from,
                                   const char *to, const char *sfrom,
                                   const char *sto)
{
    if (e->ops->restem)
        e->ops->restem(e, from, to, sfrom, sto);
}

/* Frees e (NULL ok). */
static inline void gt__emit_free(struct gt__emit *e)
{
    if (e)
        e->ops->free(e);
}

/* ------------------------------------------------------------ creation */

struct gt__cstream;
struct gt__writer;
struct gt__anomalies;

/*
 * What an emitter is made for: one writer of stream s (a capture window's
 * when window is set), which it reads (w: its counts, for each part's
 * metadata) and never calls; it writes only *an (what it had to clamp)
 * and *err (its first error, the writer's sticky one). stem or out_path
 * name its files, when it writes any.
 */
struct gt__emit_src {
    struct gt__cstream *s;
    const struct gt__writer *w;
    struct gt__anomalies *an;
    int *err;
    int window;
    uint32_t win_id;
    const char *stem, *out_path;
};

/* How a converter makes the emitter of each writer it creates (its main
 * output and each capture window's). create copies what it keeps of src
 * and @return the emitter, or NULL (out of memory). */
struct gt__emit_kind {
    struct gt__emit *(*create)(const struct gt__emit_kind *k,
                               const struct gt__emit_src *src);
    void *ud;
};

/* The Chrome JSON emitter (emit_chrome.c): trace files. */
extern const struct gt__emit_kind gt__chrome_kind;

#endif /* GRADTRACE_DAEMON_CONV_EMIT_H */
