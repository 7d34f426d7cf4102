/*
 * One agent connection: bytes from an untrusted process in, in order, to
 * its stream (agent_stream.c), and the connection's life on the loop.
 *
 *   accept -> SO_PEERCRED check (peer.c) -> read -> strict framer
 *     up to the hello: fed on the loop (agent_stream.c handles the hello);
 *     after it: queued for the conversion pool, which feeds the framer;
 *     EOF, a read error or a bad stream: the stream is finished
 *            (gt__agent_finish) once its queue is converted, then the
 *            socket closes.
 *
 * A bad stream costs only its own connection: the framer is strict, its
 * first error is final, and the reason (pid, codec error text) is logged.
 * Nothing sized by agent input is allocated before the codec has checked
 * it against the limits in wire.h; the read buffer is fixed per agent.
 *
 * With --raw the bytes are kept exactly as received, including a trailing
 * partial chunk, so `gradtrace convert` sees what the daemon saw. Bytes
 * that arrive before the hello is complete are held (at most a hello's
 * worth plus one read) until the stem is known.
 *
 * Threads: the loop reads sockets; everything up to and including the
 * hello is fed to the framer on the loop (it picks the stem, answers and
 * sends triggers, which only the loop may do). Every later read goes, in
 * order, to the agent's queue in the conversion pool (workq.h), whose
 * worker decodes and converts it under the agent's wq.lock: the loop
 * keeps answering control requests meanwhile. A queue holding
 * GT__AGENT_QUEUE_BYTES stops reading that socket until the pool has
 * converted half of it; the socket then fills, the agent's non-blocking
 * sends fail and the agent drops and counts chunks: the daemon never
 * blocks a training job, and every loss is counted. EOF or a bad stream
 * found by a worker close the agent on the loop, once its queue is done
 * (the pool wakes the loop through s->wake).
 */
#include "daemon/server/server.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/util.h"
#include "daemon/convert/convert.h"

#define PRE_MAX (GT_HELLO_MAX_SIZE + GT__READ_BYTES)
/* One drain call reads at most this much, so a busy agent cannot stall a
 * shutdown or a collect forever. */
#define DRAIN_MAX (256u << 20)

static void on_closed(uv_handle_t *h)
{
    struct gt__agent *a = (struct gt__agent *)h;

    gt__workq_item_destroy(&a->wq);
    gt__free(a->rd);
    gt__framer_free(a->framer);
    gt__conv_free(a->conv);
    gt__agent_trig_free(a);
    gt__free(a->hello);
    gt__free(a->pre);
    gt__free(a);
}

static void unlink_agent(struct gt__agent *a)
{
    struct gt__agent **pp = &a->srv->agents;

    while (*pp && *pp != a)
        pp = &(*pp)->next;
    if (*pp) {
        *pp = a->next;
        a->srv->nagents--;
    }
}

static void close_agent(struct gt__agent *a, const char *reason, int failed)
{
    if (a->closing)
        return;
    a->closing = 1;
    /* Nothing of a runs on a worker after this; what is still queued is
     * converted first, unless the stream is bad. */
    if (a->framer) {
        if (failed)
            gt__workq_discard(a->srv->wq, &a->wq);
        else
            gt__workq_wait_idle(a->srv->wq, &a->wq);
        pthread_mutex_lock(&a->wq.lock);
        if (!failed && a->failed) {
            /* The socket ended before the loop heard that a worker found
             * the stream bad: it closes as bad, for that reason. */
            failed = 1;
            reason = a->fail_reason;
        }
        if (a->rank_news && !failed && a->rank_new != a->hello->h.rank) {
            /* Its last buffers said the rank: name the files by it. */
            a->rank_news = 0;
            pthread_mutex_unlock(&a->wq.lock);
            gt__agent_rank_learnt(a, a->rank_new);
            pthread_mutex_lock(&a->wq.lock);
        }
    }
    if (failed)
        a->srv->bad_streams++;
    gt__agent_finish(a, reason, failed);
    if (a->framer)
        pthread_mutex_unlock(&a->wq.lock);
    unlink_agent(a);
    gt__agent_trig_closed(a);
    uv_read_stop((uv_stream_t *)&a->pipe);
    uv_close((uv_handle_t *)&a->pipe, on_closed);
}

void gt__agent_close(struct gt__agent *a, const char *reason)
{
    close_agent(a, reason, 0);
}

/* Feeds the framer; the loop before the hello, a worker (wq.lock held)
 * after it. @return 0, or < 0 with the reason a stream error closes the
 * agent for. */
static int feed(struct gt__agent *a, const uint8_t *data, size_t n,
                char *reason, size_t cap)
{
    int rc = gt__framer_feed(a->framer, data, n);

    if (rc < 0) {
        snprintf(reason, cap, "closing: bad stream: %s", gt__strerror(rc));
        gt__log("agent pid %u: %s",
                (unsigned)(a->hello ? a->hello->h.pid : a->peer_pid), reason);
    }
    return rc;
}

void gt__agent_convert(struct gt__workq_item *it, const uint8_t *data,
                       size_t len)
{
    struct gt__agent *a = (struct gt__agent *)
        ((char *)it - offsetof(struct gt__agent, wq));

    if (!a->failed &&
        feed(a, data, len, a->fail_reason, sizeof(a->fail_reason)) < 0) {
        a->failed = 1;
        gt__workq_item_fail(a->srv->wq, it);
    }
}

/* Bytes up to the end of the hello, on the loop. */
static void process_hello(struct gt__agent *a, const uint8_t *data, size_t n)
{
    char reason[160];
    uint8_t *p = gt__realloc(a->pre, a->pre_len + n);

    /* The framer fails a hello longer than GT_HELLO_MAX_SIZE, so this
     * holds at most a hello plus one read. */
    if (!p || a->pre_len + n > PRE_MAX) {
        gt__free(p ? p : a->pre);
        a->pre = NULL;
        close_agent(a, "closing: out of memory for hello", 1);
        return;
    }
    a->pre = p;
    memcpy(a->pre + a->pre_len, data, n);
    a->pre_len += n;
    int rc = feed(a, data, n, reason, sizeof(reason));
    gt__agent_raw_write(a, a->pre, a->pre_len);
    if (a->hello_seen && a->pre) {
        gt__free(a->pre);
        a->pre = NULL;
        a->pre_len = 0;
    }
    if (rc < 0)
        close_agent(a, reason, 1);
}

/* One read of n bytes into a->rd: converted on the loop until the hello
 * is seen, queued for the pool after it. @return 1 when the queue is
 * full (stop reading), else 0. */
static int take_read(struct gt__agent *a, size_t n)
{
    struct gt__workq_buf *b = a->rd;

    a->bytes += n;
    a->srv->bytes += n;
    if (!a->hello_seen) {
        process_hello(a, b->data, n);
        return 0;
    }
    gt__agent_raw_write(a, b->data, n);
    a->rd = NULL;
    b->len = n;
    return gt__workq_push(a->srv->wq, &a->wq, b);
}

static int ensure_rd(struct gt__agent *a)
{
    if (!a->rd)
        a->rd = gt__workq_buf_new(GT__READ_BYTES);
    return a->rd ? 0 : -ENOMEM;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct gt__agent *a = (struct gt__agent *)h;

    (void)suggested;
    if (ensure_rd(a) < 0) {
        buf->base = NULL;
        buf->len = 0;               /* libuv reports UV_ENOBUFS */
        return;
    }
    buf->base = (char *)a->rd->data;
    buf->len = a->rd->cap;
}

/* EOF: the agent closes once the pool has converted what it sent. */
static void end_of_stream(struct gt__agent *a)
{
    a->eof = 1;
    uv_read_stop((uv_stream_t *)&a->pipe);
    if (gt__workq_pending(a->srv->wq, &a->wq) == 0)
        close_agent(a, "disconnected", 0);
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    struct gt__agent *a = (struct gt__agent *)st;
    char reason[128];

    (void)buf;
    if (a->closing || a->eof)
        return;
    if (nread > 0) {
        if (take_read(a, (size_t)nread) && !a->closing) {
            uv_read_stop(st);
            a->paused = 1;
        }
    } else if (nread == UV_EOF || nread == UV_ECONNRESET) {
        /* A reset only means the agent exited with our messages unread;
         * everything it sent was read before. */
        end_of_stream(a);
    } else if (nread < 0) {
        snprintf(reason, sizeof(reason), "closing: read error: %s",
                 uv_strerror((int)nread));
        close_agent(a, reason, 1);
    }
}

void gt__agent_wake(struct gt__server *s)
{
    struct gt__agent *a, *next;

    for (a = s->agents; a; a = next) {
        int failed;
        char reason[160];

        next = a->next;
        if (a->closing || !a->hello_seen)
            continue;
        int32_t rank = -1;

        pthread_mutex_lock(&a->wq.lock);
        failed = a->failed;
        memcpy(reason, a->fail_reason, sizeof(reason));
        if (a->rank_news) {
            rank = a->rank_new;
            a->rank_news = 0;
        }
        pthread_mutex_unlock(&a->wq.lock);
        if (!failed && rank >= 0 && rank != a->hello->h.rank)
            gt__agent_rank_learnt(a, rank);
        if (failed)
            close_agent(a, reason, 1);
        else if (a->eof && gt__workq_pending(s->wq, &a->wq) == 0)
            close_agent(a, "disconnected", 0);
        else if (a->paused && !a->eof && gt__workq_below(s->wq, &a->wq)) {
            a->paused = 0;
            uv_read_start((uv_stream_t *)&a->pipe, on_alloc, on_read);
        }
    }
}

/* Closes a when the pool found its stream bad. @return 1 closed. */
static int close_if_failed(struct gt__agent *a)
{
    char reason[160];
    int failed;

    pthread_mutex_lock(&a->wq.lock);
    failed = a->failed;
    memcpy(reason, a->fail_reason, sizeof(reason));
    pthread_mutex_unlock(&a->wq.lock);
    if (failed)
        close_agent(a, reason, 1);
    return failed;
}

/* Reads what the socket holds into the queue; a full queue is waited
 * for here (shutdown and collect want everything converted). @return
 * 1 at EOF, 0 when the socket is empty, < 0 on a read error. */
static int drain_socket(struct gt__agent *a, int fd)
{
    size_t total = 0;

    while (total < DRAIN_MAX && !a->closing) {
        if (ensure_rd(a) < 0)
            return -ENOMEM;
        ssize_t n = read(fd, a->rd->data, a->rd->cap);

        if (n > 0) {
            total += (size_t)n;
            if (take_read(a, (size_t)n))
                gt__workq_wait_idle(a->srv->wq, &a->wq);
        } else if (n == 0 || (n < 0 && errno == ECONNRESET)) {
            return 1;
        } else if (errno != EINTR) {
            return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
        }
    }
    return 0;
}

int gt__agent_drain(struct gt__agent *a)
{
    uv_os_fd_t fd;
    int rc;

    if (a->closing)
        return 1;
    if (uv_fileno((uv_handle_t *)&a->pipe, &fd) != 0)
        return 0;
    /* libuv made the socket non-blocking, so reading never waits; the
     * pool is waited for, so the agent's files are complete after. */
    rc = drain_socket(a, fd);
    if (a->closing)
        return 1;
    gt__workq_wait_idle(a->srv->wq, &a->wq);
    if (close_if_failed(a))
        return 1;
    if (rc == 1 || a->eof) {
        close_agent(a, "disconnected", 0);
        return 1;
    }
    if (rc < 0) {
        close_agent(a, "closing: read error", 1);
        return 1;
    }
    return 0;
}

static void refuse(uv_pipe_t *p, const char *why)
{
    gt__log("refused agent connection: %s", why);
    uv_close((uv_handle_t *)p, on_closed);
}

/* Sets up a connection already accepted into a->pipe. */
static void start_agent(struct gt__server *s, struct gt__agent *a)
{
    char why[160];

    s->connections++;
    if (gt__peer_check(&a->pipe, &a->peer_pid, why, sizeof(why)) < 0) {
        s->refused++;
        refuse(&a->pipe, why);
        return;
    }
    if (s->nagents >= GT__AGENTS_MAX) {
        s->refused++;
        snprintf(why, sizeof(why), "pid %u: %d agents already connected",
                 (unsigned)a->peer_pid, GT__AGENTS_MAX);
        refuse(&a->pipe, why);
        return;
    }
    if (gt__agent_stream_init(a) < 0) {
        refuse(&a->pipe, "out of memory");
        return;
    }
    a->id = ++s->next_agent_id;
    a->connected_ns = gt__mono_ns();
    a->next = s->agents;
    s->agents = a;
    s->nagents++;
    uv_read_start((uv_stream_t *)&a->pipe, on_alloc, on_read);
}

static struct gt__agent *new_agent(struct gt__server *s)
{
    struct gt__agent *a = gt__calloc(1, sizeof(*a));

    if (!a) {
        gt__log("agent accept: out of memory");
        return NULL;
    }
    a->srv = s;
    a->raw_fd = -1;
    if (gt__workq_item_init(&a->wq) < 0) {
        gt__free(a);
        return NULL;
    }
    if (uv_pipe_init(s->loop, &a->pipe, 0) != 0) {
        gt__workq_item_destroy(&a->wq);
        gt__free(a);
        return NULL;
    }
    return a;
}

void gt__agent_on_connection(uv_stream_t *server, int status)
{
    struct gt__server *s = server->data;
    struct gt__agent *a;

    if (status < 0) {
        gt__log("agent accept: %s", uv_strerror(status));
        return;
    }
    if (!(a = new_agent(s)))
        return;
    if (uv_accept(server, (uv_stream_t *)&a->pipe) != 0) {
        uv_close((uv_handle_t *)&a->pipe, on_closed);
        return;
    }
    start_agent(s, a);
}

void gt__agent_accept_pending(struct gt__server *s)
{
    uv_os_fd_t lfd;

    if (!s->listening || uv_fileno((uv_handle_t *)&s->agent_srv, &lfd) != 0)
        return;
    /* A process that connected and exited may still sit in the listen
     * backlog: the loop has not accepted it yet. Take it now so collect
     * and shutdown see every agent that ever connected. */
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        struct gt__agent *a;

        if (fd < 0)
            return;
        if (!(a = new_agent(s))) {
            close(fd);
            return;
        }
        if (uv_pipe_open(&a->pipe, fd) != 0) {
            close(fd);
            uv_close((uv_handle_t *)&a->pipe, on_closed);
            continue;
        }
        start_agent(s, a);
    }
}

