/*
 * Agent per-thread buffers (agent/ring.c): reserve/commit round trips,
 * wrapping around the ring of blocks many times, exact drop counts when
 * full, a consumer taking partial blocks while the producer writes, and
 * recycling of exited threads' states. Each Criterion test runs in its own
 * process, so each configures the ring geometry it needs.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>

#include "agent/ring.h"

/* A 24-byte test record carrying a sequence number. */
struct seqrec {
    struct gt_rec h;
    uint32_t pad;
    uint64_t seq;
    uint64_t ts;
};

static int put(uint64_t seq)
{
    struct seqrec *r = gt__reserve(sizeof(*r));

    if (!r)
        return 0;
    r->h.type = GT_R_INSTANT;
    r->h.size = sizeof(*r);
    r->pad = 0;
    r->seq = seq;
    r->ts = seq;
    gt__commit(r, sizeof(*r));
    return 1;
}

/* Takes everything committed; checks sequence numbers increase. */
static uint64_t take_all(struct gt__thread *t, uint64_t *next_min)
{
    const uint8_t *p;
    uint32_t n;
    uint64_t count = 0;

    while ((n = gt__ring_peek(t, &p)) > 0) {
        cr_assert_eq(n % sizeof(struct seqrec), 0, "partial record in a segment");
        for (uint32_t off = 0; off < n; off += sizeof(struct seqrec)) {
            struct seqrec r;
            memcpy(&r, p + off, sizeof(r));
            cr_assert_eq(r.h.size, sizeof(r));
            cr_assert_geq(r.seq, *next_min, "record %llu after %llu: reordered or repeated",
                          (unsigned long long)r.seq, (unsigned long long)*next_min);
            *next_min = r.seq + 1;
            count++;
        }
        gt__ring_consume(t, n);
    }
    return count;
}

Test(agent_ring, reserve_commit_round_trip)
{
    struct gt__thread *t;
    uint64_t next = 0;

    gt__ring_configure(4, 4);
    for (uint64_t i = 0; i < 100; i++)
        cr_assert(put(i));
    t = gt__thread_self();
    cr_assert_not_null(t);
    cr_assert_eq(take_all(t, &next), 100);
    cr_assert_eq(next, 100, "every record, in order, exactly once");
    cr_assert_eq(take_all(t, &next), 0, "nothing is returned twice");
    cr_assert_eq(atomic_load(&t->lost), 0);
}

Test(agent_ring, wraps_many_times)
{
    struct gt__thread *t;
    uint64_t next = 0, got = 0, total = 0;

    /* 4 blocks of 4 KiB hold ~680 records: write 100x that, draining as we
     * go, so the ring wraps ~100 times without a drop. */
    gt__ring_configure(4, 4);
    t = gt__thread_self();
    for (int round = 0; round < 1000; round++) {
        for (int i = 0; i < 70; i++)
            cr_assert(put(total++), "record %llu dropped", (unsigned long long)total);
        got += take_all(t, &next);
    }
    cr_assert_eq(got, total);
    cr_assert_eq(next, total);
    cr_assert_gt(atomic_load(&t->wr), 90, "the ring wrapped (%llu blocks used)",
                 (unsigned long long)atomic_load(&t->wr));
}

Test(agent_ring, drops_are_counted_exactly)
{
    struct gt__thread *t;
    uint64_t next = 0, written = 0;
    const uint64_t per_block = 4096 / sizeof(struct seqrec);

    gt__ring_configure(4, 2);
    for (uint64_t i = 0; i < 10000; i++)
        written += (uint64_t)put(i);
    t = gt__thread_self();
    /* Two blocks, nothing consumed: both fill, everything else drops. */
    cr_assert_eq(written, 2 * per_block);
    cr_assert_eq(atomic_load(&t->lost), 10000 - 2 * per_block);
    cr_assert_eq(take_all(t, &next), written);
    /* Space again: recording resumes, the count stays cumulative. */
    cr_assert(put(20000));
    cr_assert_eq(atomic_load(&t->lost), 10000 - 2 * per_block);
    cr_assert_eq(gt__emit(&(struct seqrec){{GT_R_INSTANT, 24}, 0, 20001, 0}, 24), 0);
    cr_assert_eq(take_all(t, &next), 2);
}

Test(agent_ring, oversized_record_is_dropped)
{
    struct gt__thread *t;

    gt__ring_configure(4, 2);
    cr_assert_null(gt__reserve(8192));
    t = gt__thread_self();
    cr_assert_eq(atomic_load(&t->lost), 1);
}

struct producer {
    uint64_t n;
    struct gt__thread *_Atomic t;
    _Atomic int done;
};

static void *produce(void *arg)
{
    struct producer *pr = arg;

    atomic_store(&pr->t, gt__thread_self());
    for (uint64_t i = 0; i < pr->n; i++)
        (void)put(i);
    atomic_store(&pr->done, 1);
    return NULL;
}

/* The streamer reads the committed part of the block the producer is still
 * writing: nothing may be torn, repeated or reordered, and recorded + lost
 * must equal what was written. */
Test(agent_ring, concurrent_partial_reads, .timeout = 30)
{
    struct producer pr = {.n = 2000000};
    pthread_t th;
    uint64_t next = 0, got = 0;
    struct gt__thread *t;

    gt__ring_configure(4, 4);
    cr_assert_eq(pthread_create(&th, NULL, produce, &pr), 0);
    while (!(t = atomic_load(&pr.t)))
        ;
    while (!atomic_load(&pr.done))
        got += take_all(t, &next);
    pthread_join(th, NULL);
    got += take_all(t, &next);
    cr_assert_eq(got + atomic_load(&t->lost), pr.n, "recorded %llu + lost %llu",
                 (unsigned long long)got, (unsigned long long)atomic_load(&t->lost));
    cr_assert_gt(got, 0);
}

static void *register_and_exit(void *arg)
{
    struct gt__thread **out = arg;

    (void)put(1);
    *out = gt__thread_self();
    return NULL;
}

Test(agent_ring, exited_thread_state_is_recycled)
{
    struct gt__thread *a, *b;
    pthread_t th;
    uint64_t next = 0;

    gt__ring_configure(4, 2);
    pthread_create(&th, NULL, register_and_exit, &a);
    pthread_join(th, NULL);
    cr_assert_eq(atomic_load(&a->status), GT__THR_EXITED);
    /* The consumer drains it, then frees it for reuse. */
    cr_assert_eq(take_all(a, &next), 1);
    gt__ring_release_exited(a);
    pthread_create(&th, NULL, register_and_exit, &b);
    pthread_join(th, NULL);
    cr_assert_eq(a, b, "the second thread reuses the first one's state");
    next = 0;
    cr_assert_eq(take_all(b, &next), 1, "only the new thread's record");
    cr_assert_eq(atomic_load(&b->lost), 0, "counts start again");
}
