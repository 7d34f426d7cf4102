/*
 * Per-thread buffers: registration, the reserve slow path, the consumer
 * side and recycling. The design (ring of blocks, commit counters, why a
 * concurrent partial read is safe) is described in agent/ring.h.
 *
 * Memory comes from mmap, not malloc: registration can happen on a
 * thread's first event in any context (inside an allocator, in a CUPTI
 * callback), and pages of untouched blocks cost nothing.
 */
#include "agent/ring.h"

#include <errno.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

_Atomic(struct gt__thread *) gt__threads;
__thread struct gt__thread *gt__tls __attribute__((tls_model("initial-exec")));
struct gt__thread gt__thread_dead;
_Atomic uint64_t gt__lost_orphan;
_Atomic uint64_t gt__thread_registrations;
void (*gt__ring_notify)(void);
void (*gt__ring_armed)(void);

static uint32_t ring_block_size = GT__CONFIG_BLOCK_KB_DEFAULT * 1024u;
static uint32_t ring_nblocks = GT__CONFIG_BLOCKS_DEFAULT;
static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;
static int exit_key_ok;

void gt__ring_configure(uint32_t block_kb, uint32_t nblocks)
{
    ring_block_size = block_kb * 1024u;
    ring_nblocks = nblocks < 2 ? 2 : nblocks;
}

/*
 * Thread exit (pthread key destructor): later events of this thread (from
 * other TLS destructors) must not touch a state another thread may
 * reclaim, so point the thread at the dead sentinel first.
 */
static void thread_exit(void *arg)
{
    struct gt__thread *t = arg;

    gt__tls = &gt__thread_dead;
    atomic_store_explicit(&t->status, GT__THR_EXITED, memory_order_release);
    if (gt__ring_notify)
        gt__ring_notify();
}

static void exit_key_create(void)
{
    exit_key_ok = pthread_key_create(&exit_key, thread_exit) == 0;
}

static void ring_reset(struct gt__thread *t)
{
    struct gt__block *b = atomic_load(&t->blocks);

    atomic_store_explicit(&t->wr, 0, memory_order_relaxed);
    atomic_store_explicit(&t->rd, 0, memory_order_relaxed);
    t->rd_off = 0;
    t->pos = 0;
    t->cap = 0;
    if (b) {
        for (uint32_t i = 0; i < t->nblocks; i++)
            atomic_store_explicit(&b[i].used, 0, memory_order_relaxed);
        t->cur = b[0].data;
        t->cur_used = &b[0].used;
    }
}

/* The name is only copied here; the streamer interns it (registration
 * takes no lock and allocates nothing but the state's own mapping). */
static void thread_name_read(struct gt__thread *t)
{
    char name[17] = {0};

    if (prctl(PR_GET_NAME, name, 0, 0, 0) < 0)
        name[0] = '\0';
    memcpy(t->name, name, sizeof(t->name) - 1);
    t->name[sizeof(t->name) - 1] = '\0';
}

/* A state from the free list, or a fresh mapping pushed on the registry. */
static struct gt__thread *thread_state_acquire(void)
{
    struct gt__thread *t;

    for (t = atomic_load(&gt__threads); t; t = t->next) {
        int expect = GT__THR_FREE;
        if (t->block_size == ring_block_size && t->nblocks == ring_nblocks &&
            atomic_compare_exchange_strong(&t->status, &expect, GT__THR_INIT))
            return t;
    }
    t = mmap(NULL, sizeof(*t), PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (t == MAP_FAILED)
        return NULL;
    t->block_size = ring_block_size;
    t->nblocks = ring_nblocks;
    atomic_store(&t->status, GT__THR_INIT);
    t->next = atomic_load(&gt__threads);
    while (!atomic_compare_exchange_weak(&gt__threads, &t->next, t))
        ;
    return t;
}

struct gt__thread *gt__thread_register(void)
{
    struct gt__thread *t;

    pthread_once(&exit_key_once, exit_key_create);
    t = thread_state_acquire();
    if (!t)
        return NULL;
    atomic_fetch_add_explicit(&gt__thread_registrations, 1, memory_order_relaxed);
    ring_reset(t);
    atomic_store(&t->lost, 0);
    t->layer_depth = 0;
    t->scope_depth = 0;
    t->scope_epoch = 0;
    t->info_stream = 0;
    t->lost_stream = 0;
    t->lost_sent = 0;
    t->lost_base = 0;
    t->tid = (uint32_t)gettid();
    atomic_store(&t->name_id, 0);
    thread_name_read(t);
    /* Without the key the state is never recycled; it still works. */
    if (exit_key_ok)
        (void)pthread_setspecific(exit_key, t);
    gt__tls = t;
    atomic_store_explicit(&t->status, GT__THR_ACTIVE, memory_order_release);
    return t;
}

static int blocks_alloc(struct gt__thread *t)
{
    size_t meta = (size_t)t->nblocks * sizeof(struct gt__block);
    size_t data = (size_t)t->nblocks * t->block_size;
    uint8_t *m;

    meta = (meta + 63) & ~(size_t)63;
    m = mmap(NULL, meta + data, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED)
        return -ENOMEM;
    t->mem = m + meta;
    for (uint32_t i = 0; i < t->nblocks; i++)
        ((struct gt__block *)m)[i].data = t->mem + (size_t)i * t->block_size;
    /* Published last: the streamer only reads blocks once it sees them. */
    atomic_store_explicit(&t->blocks, (struct gt__block *)m,
                          memory_order_release);
    ring_reset(t);
    return 0;
}

static void *drop(struct gt__thread *t)
{
    atomic_store_explicit(&t->lost,
                          atomic_load_explicit(&t->lost, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    if (gt__ring_notify)
        gt__ring_notify();
    return NULL;
}

void *gt__reserve_slow(size_t size)
{
    struct gt__thread *t = gt__thread_self();
    uint64_t wr, rd;
    struct gt__block *next;

    if (!t) {
        atomic_fetch_add_explicit(&gt__lost_orphan, 1, memory_order_relaxed);
        return NULL;
    }
    if (!t->blocks && blocks_alloc(t) < 0)
        return drop(t);
    if (size > t->block_size)
        return drop(t);
    if (t->cap == 0) {
        /* First record, or first after a fork: the streamer may need to
         * be started. */
        t->cap = t->block_size;
        if (gt__ring_armed)
            gt__ring_armed();
    }
    if (t->pos + size <= t->cap)
        return t->cur + t->pos;

    wr = atomic_load_explicit(&t->wr, memory_order_relaxed);
    rd = atomic_load_explicit(&t->rd, memory_order_acquire);
    if (wr + 2 - rd > t->nblocks)
        return drop(t);
    next = &atomic_load_explicit(&t->blocks, memory_order_relaxed)
                [(wr + 1) % t->nblocks];
    atomic_store_explicit(&next->used, 0, memory_order_relaxed);
    /* Seals block wr: its last `used` store happened before this one. */
    atomic_store_explicit(&t->wr, wr + 1, memory_order_release);
    t->cur = next->data;
    t->cur_used = &next->used;
    t->pos = 0;
    if (gt__ring_notify)
        gt__ring_notify();
    return t->cur;
}

void *gt__reserve(size_t size)
{
    return gt__reserve_inline(size);
}

void gt__commit(void *rec, size_t size)
{
    (void)rec;
    gt__commit_inline(size);
}

int gt__emit(const void *rec, size_t size)
{
    void *p = gt__reserve_inline(size);

    if (!p)
        return -ENOSPC;
    memcpy(p, rec, size);
    gt__commit_inline(size);
    return 0;
}

uint32_t gt__ring_peek(struct gt__thread *t, const uint8_t **p)
{
    struct gt__block *blocks =
        atomic_load_explicit(&t->blocks, memory_order_acquire);

    if (!blocks)
        return 0;
    for (;;) {
        uint64_t rd = atomic_load_explicit(&t->rd, memory_order_relaxed);
        uint64_t wr = atomic_load_explicit(&t->wr, memory_order_acquire);
        struct gt__block *b = &blocks[rd % t->nblocks];
        uint32_t used = atomic_load_explicit(&b->used, memory_order_acquire);

        if (t->rd_off < used) {
            *p = b->data + t->rd_off;
            return used - t->rd_off;
        }
        if (rd == wr)
            return 0;
        /* Sealed (wr moved past it) and fully taken: give it back. */
        t->rd_off = 0;
        atomic_store_explicit(&t->rd, rd + 1, memory_order_release);
    }
}

void gt__ring_release_exited(struct gt__thread *t)
{
    atomic_store_explicit(&t->status, GT__THR_FREE, memory_order_release);
}

void gt__ring_after_fork_child(void)
{
    struct gt__thread *self = gt__tls;

    for (struct gt__thread *t = atomic_load(&gt__threads); t; t = t->next) {
        ring_reset(t);
        atomic_store(&t->lost, 0);
        t->info_stream = 0;
        t->lost_stream = 0;
        t->lost_sent = 0;
        t->lost_base = 0;
        if (t != self) {
            atomic_store(&t->status, GT__THR_FREE);
            continue;
        }
        t->tid = (uint32_t)gettid();
        /* Scopes begun in the parent are not in the child's stream: their
         * ends must not be recorded. The layer stack stays (the child still
         * runs inside those modules). */
        t->scope_depth = 0;
        for (uint32_t i = 0; i < t->layer_depth && i < GT__SCOPE_STACK_MAX; i++)
            t->layers[i].epoch = 0;
    }
    atomic_store(&gt__lost_orphan, 0);
}
