/*
 * daemon/server/workq.c: the conversion pool. Order per stream, streams in
 * parallel, backpressure and its release, a stream dropped while buffers
 * wait, a stream failing mid-queue, and the loop's access to one stream
 * while another one's conversion runs.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "common/alloc.h"
#include "daemon/server/workq.h"

#define NITEMS 4
#define NBUF 500

struct fake {
    struct gt__workq_item wq;      /* first: the callback casts back */
    uint32_t next;                 /* sequence number expected next */
    uint32_t converted;
    int out_of_order;
    int fail_at;                   /* fail on this sequence number (0: never) */
    int gate;                      /* block in the callback until open */
};

static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static int gate_open, in_gate;
static struct gt__workq *cur;
static pthread_mutex_t note_mu = PTHREAD_MUTEX_INITIALIZER;
static int notes;

static void on_buf(struct gt__workq_item *it, const uint8_t *data, size_t len)
{
    struct fake *f = (struct fake *)it;
    uint32_t seq;

    cr_assert_geq(len, sizeof(seq));
    memcpy(&seq, data, sizeof(seq));
    if (f->gate) {
        pthread_mutex_lock(&gate_mu);
        in_gate = 1;
        pthread_cond_broadcast(&gate_cv);
        while (!gate_open)
            pthread_cond_wait(&gate_cv, &gate_mu);
        pthread_mutex_unlock(&gate_mu);
    }
    if (seq != f->next)
        f->out_of_order = 1;
    f->next = seq + 1;
    f->converted++;
    if (f->fail_at && seq == (uint32_t)f->fail_at)
        gt__workq_item_fail(cur, it);
}

static void on_note(void *ud)
{
    (void)ud;
    pthread_mutex_lock(&note_mu);
    notes++;
    pthread_mutex_unlock(&note_mu);
}

static int note_count(void)
{
    pthread_mutex_lock(&note_mu);
    int n = notes;
    pthread_mutex_unlock(&note_mu);
    return n;
}

static int push_seq(struct gt__workq *q, struct fake *f, uint32_t seq, size_t len)
{
    struct gt__workq_buf *b = gt__workq_buf_new(len);

    cr_assert_not_null(b);
    memset(b->data, 0, len);
    memcpy(b->data, &seq, sizeof(seq));
    b->len = len;
    return gt__workq_push(q, &f->wq, b);
}

static void wait_in_gate(void)
{
    pthread_mutex_lock(&gate_mu);
    while (!in_gate)
        pthread_cond_wait(&gate_cv, &gate_mu);
    pthread_mutex_unlock(&gate_mu);
}

static void open_gate(void)
{
    pthread_mutex_lock(&gate_mu);
    gate_open = 1;
    pthread_cond_broadcast(&gate_cv);
    pthread_mutex_unlock(&gate_mu);
}

static void init_fakes(struct fake *f, int n)
{
    memset(f, 0, sizeof(*f) * (size_t)n);
    for (int i = 0; i < n; i++)
        cr_assert_eq(gt__workq_item_init(&f[i].wq), 0);
}

Test(workq, order_kept_per_stream_every_buffer_converted, .timeout = 30)
{
    struct fake f[NITEMS];
    struct gt__workq *q = gt__workq_create(3, 1 << 30, on_buf, on_note, NULL);

    cr_assert_not_null(q);
    init_fakes(f, NITEMS);
    /* Interleaved pushes: streams run in parallel on three workers. */
    for (uint32_t s = 0; s < NBUF; s++)
        for (int i = 0; i < NITEMS; i++)
            push_seq(q, &f[i], s, 64);
    for (int i = 0; i < NITEMS; i++) {
        gt__workq_wait_idle(q, &f[i].wq);
        cr_assert_eq(f[i].converted, NBUF, "stream %d lost buffers", i);
        cr_assert_not(f[i].out_of_order, "stream %d out of order", i);
        cr_assert_eq(gt__workq_pending(q, &f[i].wq), 0);
        gt__workq_item_destroy(&f[i].wq);
    }
    /* Idle is told, so the loop can close a stream that ended. */
    cr_assert_gt(note_count(), 0);
    gt__workq_free(q);
}

Test(workq, backpressure_at_high_and_released_below_half, .timeout = 30)
{
    struct fake f;
    struct gt__workq *q = gt__workq_create(1, 1000, on_buf, on_note, NULL);
    int full = 0, pushed = 0;

    cr_assert_not_null(q);
    init_fakes(&f, 1);
    f.gate = 1;
    push_seq(q, &f, 0, 100);
    wait_in_gate();               /* the worker holds buffer 0 */
    for (uint32_t s = 1; !full; s++, pushed++)
        full = push_seq(q, &f, s, 100);
    /* 100-byte buffers, high 1000: the tenth pushed byte-count says full,
     * counting the one being converted. */
    cr_assert_eq(pushed, 9);
    cr_assert_eq(gt__workq_pending(q, &f.wq), 1000);
    cr_assert_not(gt__workq_below(q, &f.wq));
    int before = note_count();
    open_gate();
    gt__workq_wait_idle(q, &f.wq);
    cr_assert(gt__workq_below(q, &f.wq));
    cr_assert_gt(note_count(), before, "no wake-up once below half");
    cr_assert_eq(f.converted, 10);
    cr_assert_not(f.out_of_order);
    gt__workq_item_destroy(&f.wq);
    gt__workq_free(q);
}

struct discard_arg {
    struct gt__workq *q;
    struct fake *f;
};

static void *discard_thread(void *p)
{
    struct discard_arg *d = p;

    gt__workq_discard(d->q, &d->f->wq);
    return NULL;
}

Test(workq, discard_drops_queued_and_waits_for_running, .timeout = 30)
{
    struct fake f;
    struct gt__workq *q = gt__workq_create(1, 1 << 20, on_buf, NULL, NULL);
    pthread_t th;

    cr_assert_not_null(q);
    init_fakes(&f, 1);
    f.gate = 1;
    for (uint32_t s = 0; s < 5; s++)
        push_seq(q, &f, s, 10);
    wait_in_gate();
    struct discard_arg d = {q, &f};
    pthread_create(&th, NULL, discard_thread, &d);
    /* The four waiting buffers go at once; the running one is waited for. */
    while (gt__workq_pending(q, &f.wq) != 10)
        sched_yield();
    open_gate();
    pthread_join(th, NULL);
    cr_assert_eq(f.converted, 1);
    cr_assert_eq(gt__workq_pending(q, &f.wq), 0);
    /* Later pushes (reads still in flight) are dropped, not converted. */
    cr_assert_eq(push_seq(q, &f, 5, 10), 0);
    gt__workq_wait_idle(q, &f.wq);
    cr_assert_eq(f.converted, 1);
    gt__workq_item_destroy(&f.wq);
    gt__workq_free(q);
}

Test(workq, failed_stream_skips_the_rest, .timeout = 30)
{
    struct fake f;
    struct gt__workq *q = gt__workq_create(2, 1 << 20, on_buf, on_note, NULL);

    cr_assert_not_null(q);
    cur = q;
    init_fakes(&f, 1);
    f.fail_at = 3;
    f.gate = 1;
    for (uint32_t s = 0; s < 10; s++)
        push_seq(q, &f, s, 10);
    open_gate();
    gt__workq_wait_idle(q, &f.wq);
    cr_assert_eq(f.converted, 4, "converted %u", f.converted);
    cr_assert_eq(gt__workq_pending(q, &f.wq), 0);
    gt__workq_item_destroy(&f.wq);
    gt__workq_free(q);
}

Test(workq, other_streams_and_status_while_one_converts, .timeout = 30)
{
    struct fake f[2];
    struct gt__workq *q = gt__workq_create(2, 1 << 20, on_buf, NULL, NULL);

    cr_assert_not_null(q);
    init_fakes(f, 2);
    f[0].gate = 1;
    push_seq(q, &f[0], 0, 10);
    wait_in_gate();               /* stream 0's conversion is running */
    /* The loop reads stream 0's queue and another stream's state, and
     * the other stream converts, all while stream 0's buffer is held. */
    cr_assert_eq(gt__workq_pending(q, &f[0].wq), 10);
    for (uint32_t s = 0; s < 100; s++)
        push_seq(q, &f[1], s, 10);
    gt__workq_wait_idle(q, &f[1].wq);
    pthread_mutex_lock(&f[1].wq.lock);
    cr_assert_eq(f[1].converted, 100);
    pthread_mutex_unlock(&f[1].wq.lock);
    cr_assert_eq(f[0].converted, 0);
    open_gate();
    gt__workq_wait_idle(q, &f[0].wq);
    cr_assert_eq(f[0].converted, 1);
    for (int i = 0; i < 2; i++)
        gt__workq_item_destroy(&f[i].wq);
    gt__workq_free(q);
}

Test(workq, threads_for_host)
{
    cr_assert_eq(gt__workq_threads_for(1), 1);
    cr_assert_eq(gt__workq_threads_for(2), 2);
    cr_assert_eq(gt__workq_threads_for(4), 3);
    cr_assert_eq(gt__workq_threads_for(64), 8);
    cr_assert_eq(gt__workq_threads_for(-1), 1);
}

Test(workq, no_memory_for_a_pool)
{
    gt__alloc_fail_after(0);
    cr_assert_null(gt__workq_create(2, 100, on_buf, NULL, NULL));
    gt__alloc_fail_after(-1);
}
