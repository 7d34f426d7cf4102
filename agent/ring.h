/*
 * Per-thread event buffers (agent/ring.c).
 *
 * Each recording thread owns a struct gt__thread with `nblocks` fixed-size
 * blocks used as a ring of blocks. The thread (producer) writes whole
 * records into the current block: reserve returns cur + pos, commit
 * advances pos and publishes it with a release store to the block's `used`
 * counter. A record never straddles blocks; when it does not fit, the
 * producer seals the block (its `used` is final) and moves on to the next
 * block if one is free, else drops the record and counts it.
 *
 * Indexes are monotonic 64-bit counters: `wr` (producer) is the block being
 * written, `rd` (consumer) the oldest block not yet fully consumed, with
 * `rd_off` bytes of it already taken. Blocks rd..wr are in use, so a new
 * block is free while wr + 2 - rd <= nblocks. The consumer (the streamer,
 * or a crash/exit flush holding the stream lock) may take the committed
 * part of the *current* block while the thread keeps writing it: it reads
 * wr, then used (both acquire), takes [rd_off, used) and remembers rd_off;
 * the producer never reuses block rd before rd moves, and only appends past
 * `used`, so the taken bytes are stable. That makes periodic flushes of
 * partially filled blocks safe without any lock.
 *
 * Thread states live in a lock-free list (push at head, never unlinked) and
 * are recycled after their thread exits and the streamer drained them, so
 * readers (the streamer, a signal handler) never see freed memory.
 */
#ifndef GRADTRACE_AGENT_RING_H
#define GRADTRACE_AGENT_RING_H

#include <stdatomic.h>
#include <stdint.h>

#include "agent/internal.h"

#define GT__SCOPE_STACK_MAX 256u

enum gt__thread_status {
    GT__THR_FREE = 0,    /* reusable by a new thread */
    GT__THR_INIT = 1,    /* being (re)initialised by its new thread */
    GT__THR_ACTIVE = 2,  /* its thread is alive */
    GT__THR_EXITED = 3,  /* thread gone; streamer drains, then frees */
};

struct gt__block {
    _Atomic uint32_t used; /* committed bytes (release by the producer) */
    uint32_t reserved;
    uint8_t *data;
};

struct gt__layer {
    uint32_t id;    /* module path id */
    uint32_t epoch; /* capture epoch its begin was recorded in, 0 = not */
    uint16_t flags; /* GT_SCOPE_F_* of its begin, repeated on its end */
};

struct gt__thread {
    /* Producer side: written only by the owning thread. */
    uint8_t *cur;                 /* data of block wr */
    _Atomic uint32_t *cur_used;   /* &blocks[wr % nblocks].used */
    uint32_t pos;                 /* bytes committed in cur */
    uint32_t cap;                 /* block_size, or 0 to force the slow path */
    _Atomic uint64_t wr;
    _Atomic uint64_t lost;        /* records dropped, cumulative */
    uint32_t layer_depth;         /* may exceed GT__SCOPE_STACK_MAX (not stored) */
    uint32_t scope_depth;
    uint32_t scope_epoch;         /* epoch of the entries in scopes[] */
    struct gt__layer layers[GT__SCOPE_STACK_MAX];
    uint32_t scopes[GT__SCOPE_STACK_MAX];

    /* Consumer side: the stream lock holder only. */
    _Atomic uint64_t rd __attribute__((aligned(64)));
    uint32_t rd_off;
    uint32_t info_stream;         /* stream id its THREAD_INFO went out in */
    uint32_t lost_stream;         /* stream id lost_sent belongs to */
    uint64_t lost_sent;           /* last count sent in that stream */
    uint64_t lost_base;           /* `lost` when that stream began */

    /* Registry. */
    struct gt__thread *next;
    _Atomic int status;           /* enum gt__thread_status */
    uint32_t tid;                 /* OS thread id */
    _Atomic uint32_t name_id;     /* interned thread name, 0 if unknown */
    char name[16];                /* name at registration (prctl), NUL-ended */
    uint32_t nblocks;
    uint32_t block_size;
    struct gt__block *_Atomic blocks; /* NULL until the first record */
    uint8_t *mem;                 /* blocks' data, nblocks * block_size */
};

/* Head of the registry (newest first). */
extern _Atomic(struct gt__thread *) gt__threads;
/* This thread's state: NULL before its first event, &gt__thread_dead once
 * it is exiting. initial-exec: one %fs-relative load, no __tls_get_addr. */
extern __thread struct gt__thread *gt__tls
    __attribute__((tls_model("initial-exec")));
extern struct gt__thread gt__thread_dead;
/* Records dropped by threads without a state (exiting, out of memory). */
extern _Atomic uint64_t gt__lost_orphan;
/* Threads registered so far (diagnostics: states are fewer when reused). */
extern _Atomic uint64_t gt__thread_registrations;

/*
 * Block geometry for threads registered from now on (block_kb KiB,
 * nblocks >= 2). Set once at start; tests may call it before any thread
 * registers.
 */
void gt__ring_configure(uint32_t block_kb, uint32_t nblocks);

/*
 * Called by the producer's slow path when a block was sealed, when it
 * dropped, and after a fork re-arm (the streamer's wake-up; may start it
 * lazily). NULL: nothing (unit tests drive the consumer themselves).
 */
extern void (*gt__ring_notify)(void);

/*
 * Called by the slow path when a thread records for the first time (or
 * first since a fork): lets a fork child start its streamer lazily. NULL:
 * nothing. Unlike gt__ring_notify it does not wake a running streamer, so
 * a thread's first record costs no syscall.
 */
extern void (*gt__ring_armed)(void);

/*
 * @return this thread's state, registering it on first use (cold path);
 *         NULL when it cannot be registered or the thread is exiting.
 */
struct gt__thread *gt__thread_register(void);

static inline struct gt__thread *gt__thread_self(void)
{
    struct gt__thread *t = gt__tls;

    if (GT__LIKELY(t != NULL))
        return t == &gt__thread_dead ? NULL : t;
    return gt__thread_register();
}

/* Reserve slow path: register, allocate, switch blocks or drop. */
void *gt__reserve_slow(size_t size) __attribute__((cold, noinline));

/* The hot path, inlined into api.c; gt__reserve is its out-of-line copy. */
static inline void *gt__reserve_inline(size_t size)
{
    struct gt__thread *t = gt__tls;

    if (GT__LIKELY(t != NULL) && GT__LIKELY(t->pos + size <= t->cap))
        return t->cur + t->pos;
    return gt__reserve_slow(size);
}

/* Only valid right after a successful reserve on the same thread. */
static inline void gt__commit_inline(size_t size)
{
    struct gt__thread *t = gt__tls;

    t->pos += (uint32_t)size;
    atomic_store_explicit(t->cur_used, t->pos, memory_order_release);
}

/*
 * Consumer: the committed, not yet consumed bytes of t's oldest block.
 * Releases fully consumed sealed blocks on the way. Whole records only.
 * @return the byte count at *p, 0 when t has nothing committed.
 */
uint32_t gt__ring_peek(struct gt__thread *t, const uint8_t **p);

/* Consumer: marks n bytes returned by gt__ring_peek as taken. */
static inline void gt__ring_consume(struct gt__thread *t, uint32_t n)
{
    t->rd_off += n;
}

/* Consumer: marks an exited, drained thread's state reusable. */
void gt__ring_release_exited(struct gt__thread *t);

/*
 * In a fork child (one thread left): forget every buffered record (they
 * belong to the parent's stream), free the states of threads that do not
 * exist here, give the calling thread its new tid and re-arm its slow path
 * so its next record pokes the (lazily started) streamer.
 */
void gt__ring_after_fork_child(void);

/* Writes one record of struct T and type rtype through variable r: fill
 * sets its fields (the header is set here); nothing when the buffer is
 * full (the ring counts the drop). */
#define GT__RECORD(T, rtype, r, fill)                                         \
    do {                                                                      \
        struct T *r = gt__reserve_inline(sizeof(struct T));                   \
        if (GT__LIKELY(r != NULL)) {                                           \
            r->h.type = (rtype);                                              \
            r->h.size = sizeof(struct T);                                     \
            fill;                                                             \
            gt__commit_inline(sizeof(struct T));                              \
        }                                                                     \
    } while (0)

/* Bytes of a record header at p (the producer only writes whole records). */
static inline uint16_t gt__rec_size_at(const uint8_t *p)
{
    uint16_t s;
    memcpy(&s, p + 2, 2);
    return s;
}

#endif /* GRADTRACE_AGENT_RING_H */
