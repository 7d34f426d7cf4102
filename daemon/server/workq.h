/*
 * Conversion off the loop thread: a small pool of worker threads and one
 * bounded, ordered queue of byte buffers per stream (an agent).
 *
 *   loop thread:  read a socket -> gt__workq_push(buffer)   (never waits)
 *   worker:       take a stream -> for each buffer: lock it, convert, unlock
 *
 * A stream is run by at most one worker at a time, its buffers in push
 * order, so per-stream order is kept while streams convert in parallel.
 * The stream's lock (item->lock) is held by the worker only while one
 * buffer converts; the loop takes it to read the stream's state (status,
 * flush, ack), so control requests wait at most one buffer.
 *
 * Backpressure: gt__workq_push says when a stream holds `high` bytes or
 * more; the caller then stops reading that socket (the agent's sends
 * fail, the agent drops and counts, as with a slow daemon before), and
 * the pool calls notify(ud) from the worker once the stream is below
 * half of it, so the loop resumes reading. notify is also called when a
 * stream becomes idle (nothing queued, nothing running) and when a
 * buffer's callback asked for it (gt__workq_item_kick), so the loop can
 * finish closed or failed streams. notify must be thread-safe
 * (uv_async_send).
 */
#ifndef GRADTRACE_DAEMON_SERVER_WORKQ_H
#define GRADTRACE_DAEMON_SERVER_WORKQ_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "common/codec.h"

/* One buffer of stream bytes; allocated by gt__workq_buf_new. */
struct gt__workq_buf {
    struct gt__workq_buf *next;
    size_t len;
    size_t cap;
    uint8_t data[];
};

struct gt__workq_item;

/* Converts one buffer of item's stream; runs on a worker with item->lock
 * held. */
typedef void (*gt__workq_fn)(struct gt__workq_item *item, const uint8_t *data,
                             size_t len);
/* Any thread; must not block (uv_async_send). */
typedef void (*gt__workq_notify_fn)(void *ud);

/* One stream's queue; embed it, gt__workq_item_init before use. Fields
 * after `lock` belong to the pool (its mutex). */
struct gt__workq_item {
    pthread_mutex_t lock;         /* the stream's conversion state */
    struct gt__workq_item *run_next;
    struct gt__workq_buf *head, *tail;
    size_t bytes;                 /* queued + running */
    int queued;                   /* on the run queue */
    int running;                  /* a worker holds its buffers */
    int above;                    /* reached `high` since last below half */
    int discard;                  /* drop what is queued (stream failed) */
};

struct gt__workq;

/*
 * Starts nthreads workers (at least 1). high: bytes per stream at which
 * push reports backpressure.
 * @return the pool, or NULL (out of memory, no thread).
 */
struct gt__workq *gt__workq_create(unsigned nthreads, size_t high,
                                   gt__workq_fn fn, gt__workq_notify_fn notify,
                                   void *ud);
/* Stops and joins the workers after what is queued is done; NULL is ok.
 * Every item must be idle or discarded by then. */
void gt__workq_free(struct gt__workq *q);
/* Workers a host of ncpu cores gets: ncpu - 1 (the loop keeps a core),
 * between 1 and 8. */
unsigned gt__workq_threads_for(long ncpu);

/* @return 0 or -errno (mutex). */
int gt__workq_item_init(struct gt__workq_item *it) GT__WUR;
/* The item must be idle (gt__workq_wait_idle). */
void gt__workq_item_destroy(struct gt__workq_item *it);

/* @return a buffer of cap bytes (len 0), or NULL. Free with gt__free. */
struct gt__workq_buf *gt__workq_buf_new(size_t cap);

/*
 * Queues b (ownership passes to the pool) behind everything pushed
 * before for it. Any thread, normally the loop.
 * @return 1 when the item now holds `high` bytes or more (stop reading
 *         until notify says it is below half), else 0.
 */
int gt__workq_push(struct gt__workq *q, struct gt__workq_item *it,
                   struct gt__workq_buf *b);
/* Bytes queued or being converted for it. */
size_t gt__workq_pending(struct gt__workq *q, struct gt__workq_item *it);
/* Whether it is below half of `high` again (reading may resume). */
int gt__workq_below(struct gt__workq *q, struct gt__workq_item *it);
/* Blocks until nothing is queued or running for it. Not from a worker. */
void gt__workq_wait_idle(struct gt__workq *q, struct gt__workq_item *it);
/* Drops what is queued for it and waits for a running buffer to end.
 * Not from a worker. */
void gt__workq_discard(struct gt__workq *q, struct gt__workq_item *it);
/* From the callback: later buffers of it are dropped unconverted, and
 * notify runs once the item is idle. */
void gt__workq_item_fail(struct gt__workq *q, struct gt__workq_item *it);

#endif /* GRADTRACE_DAEMON_SERVER_WORKQ_H */
