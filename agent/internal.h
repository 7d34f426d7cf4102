/*
 * Interfaces shared by the files of the agent (libgradtrace.so): the base
 * role's (each header declares only what its own role defines).
 *
 * Roles, bottom up; a file includes headers of its own role or lower only,
 * and calls go the same way (scripts/check-layers.py, AGENT_ROLES):
 *   base    internal.h capture.[ch] clock.[ch] timebase.c config.c diag.c
 *           warn.c ring.[ch] strings.[ch] rec_out.[ch]: process-wide
 *           state, capture state, clocks, configuration, diagnostics and
 *           warnings, buffers, strings, the hooks' record output;
 *   trigger trigger.[ch] trigger_nodes.[ch]: the trigger engine (capture
 *           windows) and its node table;
 *   stream  bottom up: undelivered.[ch] stream.[ch] control.[ch]
 *           sink.[ch] crash.[ch] streamer.[ch] exit.c core.[ch]: the
 *           stream's state, the daemon's control messages and
 *           acknowledgements, the sink, the crash flush, the streamer
 *           thread, and the life cycle (start, exit flush, fork);
 *   hooks   events.[ch] api.c hooks.h torch.[ch] torch_layout.c
 *           torch_params.c recordfn.c ops.c cuda.h cupti.c cupti_api.c
 *           cupti_internal.h cupti_abi.h cupti_records.c cupti_sync.c
 *           nvtx.[ch] nvtx_ranges.c nvtx_rules.c: the event core every
 *           source feeds (events.c, which calls only base and trigger),
 *           and the event sources (public C API, PyTorch, libtorch
 *           RecordFunction, CUDA, NVTX);
 *   entry   ctor.c: the constructor and destructor.
 * No two files call each other. Lower roles never call into the hooks: a
 * hook that needs to be told something registers a callback
 * (gt__capture_set_flush, gt__ring_notify, gt__events_set_tags).
 *
 * The agent is split by responsibility:
 *   ctor.c    the only constructor/destructor: reads the environment once,
 *             starts the core, then the optional hooks (agent/hooks.h);
 *   config.c  the environment: one table read once (GRADTRACE_*, ranks),
 *             the configuration it gives, the injection variables;
 *   capture.c the capture state (on, triggers armed, epoch): its one writer;
 *   ring.c    per-thread buffers: reserve/commit, block hand-off, drops;
 *   strings.c string interning and the definitions the streamer sends first;
 *   trigger.c capture windows opened and closed at the hooks;
 *   stream.c  the stream's state: lock, hello, once-per-stream records;
 *   streamer.c the streamer thread: gathers blocks, builds chunks;
 *   sink.c    where chunks go: daemon socket (reconnecting) or .gtr file;
 *   control.c control messages from the daemon (capture, triggers, ACKs);
 *   crash.c   fatal-signal flush (async-signal-safe, raw chunks);
 *   core.c    start, exit flush, fork handling;
 *   events.c  the event core: layer and scope stacks, nodes, passes, steps;
 *   api.c     the public C API (include/gradtrace/gradtrace.h), forwards;
 *   diag.c    GT__DIAG (below everything: the time base uses it too);
 *   warn.c    gt__warn_once (warnings recorded into the trace).
 *
 * Rules for hooks: test the capture state first (agent/capture.h: one load
 * and a branch when off); record with gt__reserve/gt__commit (or gt__emit)
 * and gt__now(); never malloc, lock or make a syscall per event; intern
 * strings once per call site (GT__INTERN_STATIC) or once per name, never
 * per event.
 */
#ifndef GRADTRACE_AGENT_INTERNAL_H
#define GRADTRACE_AGENT_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "common/codec.h"
#include "common/util.h"
#include "gradtrace/gradtrace.h"
#include "gradtrace/wire.h"

#define GT__LIKELY(x) __builtin_expect(!!(x), 1)
#define GT__UNLIKELY(x) __builtin_expect(!!(x), 0)

/*
 * Time base (agent/timebase.c). Event timestamps are CLOCK_MONOTONIC
 * nanoseconds. Reading the vDSO clock costs ~16 ns here, most of a
 * captured event's budget, so once the streamer has calibrated the TSC
 * against CLOCK_MONOTONIC (an invariant TSC that the kernel itself uses as
 * its clocksource; first calibration ~50 ms after start), gt__now maps
 * rdtsc through a linear map that the streamer re-fits every second,
 * continuously (each new map starts where the old one was at its switch
 * point, and its slope absorbs the measured error over the next second),
 * so timestamps stay monotonic per thread and within a few microseconds of
 * CLOCK_MONOTONIC. Without a usable TSC (or with GRADTRACE_CLOCK=mono)
 * the map stays NULL and gt__now is clock_gettime.
 */
struct gt__tsc_map {
    uint64_t tsc_base;  /* rdtsc at the map's start */
    uint64_t mono_base; /* CLOCK_MONOTONIC ns it maps to */
    uint64_t mult;      /* ns per tick, << GT__TSC_SHIFT */
};
#define GT__TSC_SHIFT 32

/* The current map, or NULL (use clock_gettime). Written by the streamer. */
extern const struct gt__tsc_map *_Atomic gt__tsc_map;

/* CLOCK_MONOTONIC in nanoseconds (TSC-mapped when calibrated). Any thread,
 * async-signal-safe. */
static inline uint64_t gt__now(void)
{
#if defined(__x86_64__)
    const struct gt__tsc_map *m =
        atomic_load_explicit(&gt__tsc_map, memory_order_acquire);

    if (GT__LIKELY(m != NULL)) {
        /* Signed: rdtsc is not ordered after the load and may read a few
         * ticks before a brand-new map's base. */
        int64_t d = (int64_t)(__builtin_ia32_rdtsc() - m->tsc_base);
        return m->mono_base +
               (uint64_t)(int64_t)(((__int128)d * (__int128)m->mult) >> GT__TSC_SHIFT);
    }
#endif
    return gt__mono_ns(); /* common/util.h: clock_gettime through the vDSO */
}

/*
 * Streamer only: (re)fits the TSC map; a no-op until 50 ms after
 * gt__timebase_init and then at most once a second. enabled = 0 (or no
 * invariant TSC, or the kernel not using the TSC) keeps clock_gettime.
 * @return 0, or -ERANGE the one time the TSC disagreed with
 * CLOCK_MONOTONIC by more than 5 ms and was turned off for good (the
 * caller says so in the trace: this file sits below the warnings).
 */
void gt__timebase_init(int enabled);
GT__WUR int gt__timebase_update(void);

/* ------------------------------------------------------------ strings */

/*
 * Interns len bytes at s (copied; cut to GT_STRING_MAX). Cold path: takes a
 * mutex, may allocate; any thread. The GT_R_STRING definition is in the
 * string list before the id is returned, and the streamer writes the list's
 * new entries at the front of every chunk, after gathering that chunk's
 * records: any record using the id reaches the stream after its definition.
 * @return the id (>= 1, stable for the process's life), 0 on failure.
 */
uint32_t gt__intern(const char *s, size_t len);

/* Interns a string literal once per call site; later calls are one load. */
#define GT__INTERN_STATIC(lit)                                                 \
    __extension__({                                                           \
        static _Atomic uint32_t gt__site_id_;                                 \
        uint32_t gt__id_ = atomic_load_explicit(&gt__site_id_,                \
                                                memory_order_relaxed);        \
        if (GT__UNLIKELY(!gt__id_)) {                                          \
            gt__id_ = gt__intern((lit), sizeof(lit) - 1);                     \
            atomic_store_explicit(&gt__site_id_, gt__id_,                     \
                                  memory_order_relaxed);                      \
        }                                                                     \
        gt__id_;                                                              \
    })

/* ------------------------------------------------------------ recording */

/*
 * Reserves size bytes (a whole record, h.size == size) in the calling
 * thread's buffer. The first call on a thread registers it (cold path:
 * mmap of its blocks). Never blocks.
 * @return where to write the record, or NULL when the buffer is full (the
 *         drop is already counted for this thread), size exceeds a block,
 *         or the thread is exiting.
 */
void *gt__reserve(size_t size);

/* Publishes the record gt__reserve returned (same size). */
void gt__commit(void *rec, size_t size);

/*
 * gt__reserve + memcpy + gt__commit. Ignoring the result is fine: a failure
 * is already counted as a lost event.
 * @return 0 or -ENOSPC.
 */
int gt__emit(const void *rec, size_t size);

/*
 * Records one GT_R_WARNING (code, msg) per distinct msg for the process's
 * life, from any thread (cold path: interns msg; agent/warn.c). Also
 * written to stderr when GRADTRACE_LOG is set.
 */
/* Warning codes of the agent core (the hooks have their own ranges). */
#define GT__WARN_CONFIG 0x0101u /* a GRADTRACE_* value was ignored */

void gt__warn_once(uint32_t code, const char *msg);

/* ------------------------------------------------------------ diagnostics */

/*
 * The agent's diagnostics (agent/diag.c): one GT__DIAG family, its own
 * names (the daemon's log is gt__log, another function in another
 * program), silent unless GRADTRACE_LOG asks.
 */

/* GRADTRACE_LOG: set once at agent start, read by GT__DIAG. */
extern int gt__diag_on;

/*
 * Formats into a stack buffer and write(2)s one line to stderr, prefixed
 * "gradtrace[pid]: ". Async-signal-safe (own formatter: %s %c %d %i %u %x
 * %p with l/ll/z modifiers), errno preserved. Use GT__DIAG unless the line
 * must go out whatever GRADTRACE_LOG says (a fatal error).
 */
void gt__diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Diagnostics to stderr, only when GRADTRACE_LOG is set. */
#define GT__DIAG(...)                                                          \
    do {                                                                      \
        if (GT__UNLIKELY(gt__diag_on))                                         \
            gt__diag(__VA_ARGS__);                                            \
    } while (0)

/* ------------------------------------------------------------ configuration */

#define GT__PATH_MAX 4096

/*
 * GRADTRACE_LAYERS: which sources open and close layers (the per-thread
 * layer stack and its module scopes). Comma-separated:
 *   capi (alias python)   gt_module_begin/end (the Python package, C API)
 *   nvtx[:DOMAIN[:GLOB]]  NVTX ranges of DOMAIN (empty or "*": any domain,
 *                         "-": the default domain only) whose name
 *                         matches GLOB (fnmatch; empty: any name)
 *   recordfunction[:GLOB] libtorch's RecordFunction user scopes
 *                         (RECORD_USER_SCOPE) whose name matches GLOB
 * Default: capi. Ranges in PyTorch's "seq = N" form are never layers.
 */
#define GT__LAYERS_CAPI 1u
#define GT__LAYERS_NVTX 2u
#define GT__LAYERS_RECORDFN 4u

struct gt__layer_config {
    unsigned sources;          /* GT__LAYERS_* */
    char nvtx_domain[64];      /* "" any domain, "-" the default domain */
    char nvtx_glob[128];       /* "" any name */
    char rf_glob[128];         /* RecordFunction: "" any name */
};

/*
 * Parses a GRADTRACE_LAYERS value into *l (set to the default first).
 * @return 0, or -EINVAL with *why set to a one-line reason (then *l holds
 * the default). Any thread; no allocation.
 */
GT__WUR int gt__config_layers(struct gt__layer_config *l, const char *v,
                              const char **why);

#define GT__CONFIG_TRIGGER_MAX 4096
#define GT__CONFIG_BAD_MAX 24 /* at least one per variable read */

/*
 * Everything the agent takes from the environment, read once by the
 * constructor (agent/ctor.c) before any thread of ours exists, through
 * agent/config.c's one table: nothing in the agent reads the environment
 * after that, since the application's setenv or putenv (a Python
 * assignment to an environment variable) may be reallocating it on
 * another thread at any moment. Readers use gt__agent_config().
 */
struct gt__config {
    char socket_path[108];     /* sun_path of the daemon's agent socket */
    char file_path[GT__PATH_MAX]; /* GRADTRACE_FILE template ("" = socket) */
    int capture;               /* capture on at start */
    uint32_t block_kb;         /* per-thread block size, KiB */
    uint32_t blocks;           /* blocks per thread */
    int log;                   /* GRADTRACE_LOG */
    int tsc;                   /* GRADTRACE_CLOCK: 1 tsc (default), 0 mono */
    struct gt__layer_config layers; /* GRADTRACE_LAYERS */
    /* The process's identity as the launcher set it (RANK, LOCAL_RANK,
     * WORLD_SIZE; -1 unset). A fork child reads them again, alone in its
     * process; later changes reach the agent only through gt_set_rank. */
    int32_t rank, local_rank, world_size;
    /* Hook switches, 1 or 0: GRADTRACE_TORCH, GRADTRACE_CUDA and
     * GRADTRACE_NVTX are on unless they say off (0, off, false, no);
     * GRADTRACE_OPS (every capture records aten operators) is off unless
     * it says on (1, on, true, yes). */
    int torch, ops, cuda, nvtx;
    char trigger[GT__CONFIG_TRIGGER_MAX]; /* GRADTRACE_TRIGGER ("" none) */
    char cupti_path[GT__PATH_MAX];        /* GRADTRACE_CUPTI ("" search) */
    char cuda_home[GT__PATH_MAX];         /* CUDA_HOME ("" unset) */
    /* The bad values, one line each, for the trace's warnings. */
    char bad[GT__CONFIG_BAD_MAX][160];
    int nbad;
};

#define GT__CONFIG_BLOCK_KB_DEFAULT 256u
#define GT__CONFIG_BLOCK_KB_MIN 4u
#define GT__CONFIG_BLOCK_KB_MAX 8192u
#define GT__CONFIG_BLOCKS_DEFAULT 8u
#define GT__CONFIG_BLOCKS_MIN 2u
#define GT__CONFIG_BLOCKS_MAX 4096u

/*
 * A process identity number from the environment (RANK, LOCAL_RANK,
 * WORLD_SIZE) as strtol reads a whole string: optional leading white
 * space and one sign, then decimal digits, in [0, INT32_MAX].
 * @return the number, or -1 when v is NULL, empty or anything else.
 */
int32_t gt__config_id(const char *v);

/* Lookup function for gt__config_parse (the process's environment in
 * production, a table in tests). */
typedef const char *(*gt__config_lookup_fn)(const char *name);

/*
 * Fills c from the environment through get, one row of agent/config.c's
 * table at a time (the empty value is no value). A bad value leaves that
 * setting at its default, is kept in c->bad for the trace's warnings and,
 * when GRADTRACE_LOG is on, written to stderr as one line naming the
 * variable.
 * @return the number of bad values (0 when all were valid or unset).
 */
int gt__config_parse(struct gt__config *c, gt__config_lookup_fn get);

/*
 * gt__config_parse from the process's environment. The constructor only,
 * before any thread of ours exists.
 * @return the number of bad values.
 */
int gt__config_read(struct gt__config *c);

/* The name of the table's row i (what the agent reads, in order), NULL
 * past its end. For the test that holds README.md to the table. */
const char *gt__config_var(size_t i);

/* The configuration the agent runs with: c copied (gt__agent_start), read
 * by everyone through gt__agent_config. Before any set, the defaults the
 * hooks need (hooks on, ranks unknown). */
void gt__config_set(const struct gt__config *c);
const struct gt__config *gt__agent_config(void);

/*
 * A fork child, alone in its process (so reading the environment is safe
 * there): reads the identity rows (RANK, LOCAL_RANK, WORLD_SIZE) again
 * into the agent's configuration, -1 where unset or bad, since a launcher
 * that forks its workers may have set them for each.
 */
void gt__config_reread_identity(void);

/*
 * Points CUDA_INJECTION64_PATH and, unless GRADTRACE_NVTX=0,
 * NVTX_INJECTION64_PATH at this library's own file (its real path), each
 * only when unset: the CUDA driver and NVTX then load the copy already
 * here. The constructor only (gt__cuda_init), before any thread of ours
 * reads anything; setenv is not thread-safe either.
 * @return 0, or a negative errno (the library's path not found).
 */
GT__WUR int gt__config_inject_self(void);

/*
 * Expands GRADTRACE_FILE's template for process pid: every "%p" becomes
 * the pid, "%%" a '%'. When child is set and the template has no %p,
 * ".<pid>" is appended so a forked child never writes its parent's file.
 * @return 0, or -ENAMETOOLONG.
 */
GT__WUR int gt__config_file_path(const char *tmpl, int pid, int child,
                                char *out, size_t cap);

#endif /* GRADTRACE_AGENT_INTERNAL_H */
