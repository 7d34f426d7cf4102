/*
 * The conversion pool (workq.h): one mutex and condition variable for the
 * run queue and every item's pool fields, one lock per item for the
 * stream's own state. A worker takes the first item on the run queue and
 * its first buffer, and converts it under the item's lock; an item with
 * more buffers goes back to the run queue's tail, so a busy stream cannot
 * starve the others and never runs on two workers at once, and what
 * waits is always in the item's list (counted, droppable).
 */
#include "daemon/server/workq.h"

#include <errno.h>
#include <stdlib.h>

#include "common/alloc.h"

#define WORKERS_MAX 8

struct gt__workq {
    pthread_mutex_t mu;
    pthread_cond_t work;          /* run queue not empty, or stopping */
    pthread_cond_t idle;          /* some item went idle */
    struct gt__workq_item *run_head, *run_tail;
    int stopping;
    size_t high;
    gt__workq_fn fn;
    gt__workq_notify_fn notify;
    void *ud;
    unsigned nthreads;
    pthread_t threads[WORKERS_MAX];
};

unsigned gt__workq_threads_for(long ncpu)
{
    if (ncpu <= 2)
        return 1u + (ncpu == 2);
    return ncpu - 1 > WORKERS_MAX ? WORKERS_MAX : (unsigned)(ncpu - 1);
}

static void free_list(struct gt__workq_buf *b)
{
    while (b) {
        struct gt__workq_buf *next = b->next;

        gt__free(b);
        b = next;
    }
}

/* Puts it on the run queue's tail; pool mutex held. */
static void enqueue_locked(struct gt__workq *q, struct gt__workq_item *it)
{
    it->queued = 1;
    it->run_next = NULL;
    if (q->run_tail)
        q->run_tail->run_next = it;
    else
        q->run_head = it;
    q->run_tail = it;
    pthread_cond_signal(&q->work);
}

static struct gt__workq_item *take_locked(struct gt__workq *q)
{
    struct gt__workq_item *it = q->run_head;

    q->run_head = it->run_next;
    if (!q->run_head)
        q->run_tail = NULL;
    it->queued = 0;
    it->running = 1;
    return it;
}

static void *worker(void *arg)
{
    struct gt__workq *q = arg;

    pthread_mutex_lock(&q->mu);
    for (;;) {
        while (!q->run_head && !q->stopping)
            pthread_cond_wait(&q->work, &q->mu);
        if (!q->run_head)
            break;
        struct gt__workq_item *it = take_locked(q);
        struct gt__workq_buf *b = it->head;
        int tell;

        it->head = b->next;
        if (!it->head)
            it->tail = NULL;
        pthread_mutex_unlock(&q->mu);
        pthread_mutex_lock(&it->lock);
        q->fn(it, b->data, b->len);
        pthread_mutex_unlock(&it->lock);
        pthread_mutex_lock(&q->mu);
        it->bytes -= b->len;
        it->running = 0;
        tell = !it->head;               /* idle now */
        if (it->above && it->bytes < q->high / 2) {
            it->above = 0;
            tell = 1;                   /* reading may resume */
        }
        if (it->head)
            enqueue_locked(q, it);
        else
            pthread_cond_broadcast(&q->idle);
        if (tell && q->notify)
            q->notify(q->ud);
        pthread_mutex_unlock(&q->mu);
        gt__free(b);
        pthread_mutex_lock(&q->mu);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

struct gt__workq *gt__workq_create(unsigned nthreads, size_t high,
                                   gt__workq_fn fn, gt__workq_notify_fn notify,
                                   void *ud)
{
    struct gt__workq *q = gt__calloc(1, sizeof(*q));

    if (!q)
        return NULL;
    if (pthread_mutex_init(&q->mu, NULL) != 0)
        goto out_free;
    if (pthread_cond_init(&q->work, NULL) != 0)
        goto out_mutex;
    if (pthread_cond_init(&q->idle, NULL) != 0)
        goto out_work;
    q->high = high ? high : 1;
    q->fn = fn;
    q->notify = notify;
    q->ud = ud;
    nthreads = nthreads < 1 ? 1 : nthreads > WORKERS_MAX ? WORKERS_MAX : nthreads;
    for (; q->nthreads < nthreads; q->nthreads++)
        if (pthread_create(&q->threads[q->nthreads], NULL, worker, q) != 0)
            break;
    if (q->nthreads > 0)
        return q;
    pthread_cond_destroy(&q->idle);
out_work:
    pthread_cond_destroy(&q->work);
out_mutex:
    pthread_mutex_destroy(&q->mu);
out_free:
    gt__free(q);
    return NULL;
}

void gt__workq_free(struct gt__workq *q)
{
    if (!q)
        return;
    pthread_mutex_lock(&q->mu);
    q->stopping = 1;
    pthread_cond_broadcast(&q->work);
    pthread_mutex_unlock(&q->mu);
    for (unsigned i = 0; i < q->nthreads; i++)
        pthread_join(q->threads[i], NULL);
    pthread_cond_destroy(&q->idle);
    pthread_cond_destroy(&q->work);
    pthread_mutex_destroy(&q->mu);
    gt__free(q);
}

int gt__workq_item_init(struct gt__workq_item *it)
{
    int rc = pthread_mutex_init(&it->lock, NULL);

    it->run_next = NULL;
    it->head = it->tail = NULL;
    it->bytes = 0;
    it->queued = it->running = it->above = it->discard = 0;
    return rc ? -rc : 0;
}

void gt__workq_item_destroy(struct gt__workq_item *it)
{
    free_list(it->head);
    it->head = it->tail = NULL;
    pthread_mutex_destroy(&it->lock);
}

struct gt__workq_buf *gt__workq_buf_new(size_t cap)
{
    struct gt__workq_buf *b = gt__malloc(sizeof(*b) + cap);

    if (b) {
        b->next = NULL;
        b->len = 0;
        b->cap = cap;
    }
    return b;
}

int gt__workq_push(struct gt__workq *q, struct gt__workq_item *it,
                   struct gt__workq_buf *b)
{
    int full;

    b->next = NULL;
    pthread_mutex_lock(&q->mu);
    if (it->discard) {
        pthread_mutex_unlock(&q->mu);
        gt__free(b);
        return 0;
    }
    if (it->tail)
        it->tail->next = b;
    else
        it->head = b;
    it->tail = b;
    it->bytes += b->len;
    if (!it->queued && !it->running)
        enqueue_locked(q, it);
    full = it->bytes >= q->high;
    if (full)
        it->above = 1;
    pthread_mutex_unlock(&q->mu);
    return full;
}

size_t gt__workq_pending(struct gt__workq *q, struct gt__workq_item *it)
{
    size_t n;

    pthread_mutex_lock(&q->mu);
    n = it->bytes;
    pthread_mutex_unlock(&q->mu);
    return n;
}

int gt__workq_below(struct gt__workq *q, struct gt__workq_item *it)
{
    return gt__workq_pending(q, it) < q->high / 2;
}

void gt__workq_wait_idle(struct gt__workq *q, struct gt__workq_item *it)
{
    pthread_mutex_lock(&q->mu);
    while (it->queued || it->running)
        pthread_cond_wait(&q->idle, &q->mu);
    pthread_mutex_unlock(&q->mu);
}

/* Unlinks it from the run queue; pool mutex held. */
static void unqueue_locked(struct gt__workq *q, struct gt__workq_item *it)
{
    struct gt__workq_item **pp = &q->run_head, *prev = NULL;

    while (*pp && *pp != it) {
        prev = *pp;
        pp = &(*pp)->run_next;
    }
    if (!*pp)
        return;
    *pp = it->run_next;
    if (q->run_tail == it)
        q->run_tail = prev;
    it->queued = 0;
}

void gt__workq_discard(struct gt__workq *q, struct gt__workq_item *it)
{
    struct gt__workq_buf *drop;

    pthread_mutex_lock(&q->mu);
    it->discard = 1;
    if (it->queued)
        unqueue_locked(q, it);
    drop = it->head;
    for (struct gt__workq_buf *b = drop; b; b = b->next)
        it->bytes -= b->len;
    it->head = it->tail = NULL;
    while (it->running)
        pthread_cond_wait(&q->idle, &q->mu);
    pthread_mutex_unlock(&q->mu);
    free_list(drop);
}

void gt__workq_item_fail(struct gt__workq *q, struct gt__workq_item *it)
{
    struct gt__workq_buf *drop;

    pthread_mutex_lock(&q->mu);
    it->discard = 1;
    drop = it->head;
    for (struct gt__workq_buf *b = drop; b; b = b->next)
        it->bytes -= b->len;
    it->head = it->tail = NULL;
    pthread_mutex_unlock(&q->mu);
    free_list(drop);
}
