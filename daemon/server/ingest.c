/*
 * One agent connection: bytes from an untrusted process in, trace files out.
 *
 *   accept -> SO_PEERCRED check -> read -> strict framer (hello, chunks)
 *     hello: pick a unique sanitized stem, create the converter and the raw
 *            .gtr file (--raw), answer GT_CTL_WELCOME, send armed triggers;
 *     chunk: feed the converter (which keeps the windows, the lost counts
 *            and the job route that status reports: decoded once);
 *     EOF or any decode error: finish the converter (the partial trace is
 *            still a valid file), remember a summary, close the socket.
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

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/util.h"
#include "daemon/convert/convert.h"

#define PRE_MAX (GT_HELLO_MAX_SIZE + GT__READ_BYTES)
/* One drain call reads at most this much, so a busy agent cannot stall a
 * shutdown or a collect forever. */
#define DRAIN_MAX (256u << 20)

/* Copies src into dst, cut to fit; intentional truncation for summaries. */
static void copy_cut(char *dst, size_t cap, const char *src)
{
    size_t n = strnlen(src, cap - 1);

    memcpy(dst, src, n);
    dst[n] = '\0';
}

static int stem_taken(const struct gt__agent *self, const char *stem)
{
    static const char *const exts[] = {".pt.trace.json", ".json", ".gtr",
                                       ".1.pt.trace.json", ".1.json"};
    const struct gt__server *s = self->srv;
    char path[4096 + 160];
    struct stat st;

    for (const struct gt__agent *a = s->agents; a; a = a->next)
        if (a != self && strcmp(a->stem, stem) == 0)
            return 1;
    for (size_t i = 0; i < sizeof(exts) / sizeof(exts[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s%s", s->out_dir, stem, exts[i]);
        /* lstat: a dangling symlink planted there takes the name too. */
        if (lstat(path, &st) == 0)
            return 1;
    }
    return 0;
}

/* A stem no live agent uses and no file in the output directory has:
 * a reconnecting agent or a recycled pid must not overwrite a trace. */
static int choose_stem(struct gt__agent *a)
{
    const struct gt__hello_info *h = a->hello;
    const char *cmd = h->cmdline;
    char base[100];
    int n;

    /* "python -c ..." names no program: a worker that multiprocessing
     * (torch.multiprocessing.spawn) started is named after its parent's. */
    if (gt__command_is_code(cmd))
        for (const struct gt__agent *p = a->srv->agents; p; p = p->next)
            if (p != a && p->hello && p->hello->h.pid == h->h.ppid &&
                !gt__command_is_code(p->hello->cmdline)) {
                cmd = p->hello->cmdline;
                break;
            }
    n = gt__agent_stem(cmd, h->h.rank, h->h.pid, base, sizeof(base));

    if (n < 0)
        return n;
    snprintf(a->stem, sizeof(a->stem), "%s", base);
    for (unsigned i = 2; stem_taken(a, a->stem); i++) {
        if (i > 10000)
            return -EEXIST;
        snprintf(a->stem, sizeof(a->stem), "%s-%u", base, i);
    }
    return 0;
}

/*
 * The stream said its rank after the hello (gt_set_rank: mp.spawn sets no
 * RANK): the agent is that rank from now on, for status, ranks= routing
 * and file names; files already written are renamed to the new stem.
 * On the loop (other agents' stems, the armed triggers and sends are the
 * loop's), holding the agent's wq.lock while its converter and hello
 * change (a worker may be converting its next buffer).
 */
static void rank_learnt(struct gt__agent *a, int32_t rank)
{
    char old[sizeof(a->stem)], from[4096 + 160], to[4096 + 160];
    int32_t was = a->hello->h.rank;
    int ok;

    pthread_mutex_lock(&a->wq.lock);
    memcpy(old, a->stem, sizeof(old));
    a->hello->h.rank = rank;
    ok = choose_stem(a) == 0 && gt__conv_restem(a->conv, a->stem) == 0;
    if (!ok)
        memcpy(a->stem, old, sizeof(old));
    pthread_mutex_unlock(&a->wq.lock);
    if (ok && a->raw_fd >= 0) {
        snprintf(from, sizeof(from), "%s/%s.gtr", a->srv->out_dir, old);
        snprintf(to, sizeof(to), "%s/%s.gtr", a->srv->out_dir, a->stem);
        if (link(from, to) == 0)
            (void)unlink(from);
    }
    gt__log("agent pid %u: rank %d (was %d): %s -> %s", (unsigned)a->hello->h.pid,
            (int)rank, (int)was, old, a->stem);
    gt__agent_trig_rank(a);
}

static int open_raw(struct gt__agent *a)
{
    char path[4096 + 160];

    snprintf(path, sizeof(path), "%s/%s.gtr", a->srv->out_dir, a->stem);
    a->raw_fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
                     0600);
    if (a->raw_fd < 0) {
        gt__log("agent pid %u: cannot create %s: %s", (unsigned)a->hello->h.pid,
                path, strerror(errno));
        return -errno;
    }
    return 0;
}

static int on_hello(void *ud, const struct gt__hello_info *hello)
{
    struct gt__agent *a = ud;
    struct gt__server *s = a->srv;
    struct gt__conv_opts o = {0};
    int rc;

    a->hello = gt__malloc(sizeof(*a->hello));
    if (!a->hello)
        return -ENOMEM;
    memcpy(a->hello, hello, sizeof(*hello));
    /* From here on the agent's text is valid UTF-8 without control
     * characters, wherever it goes: log, status replies, trace metadata. */
    gt__text_clean(a->hello->hostname);
    gt__text_clean(a->hello->cmdline);
    hello = a->hello;
    if ((rc = choose_stem(a)) < 0)
        return rc;
    o.out_dir = s->out_dir;
    o.stem = a->stem;
    o.max_file_bytes = s->max_file_bytes;
    o.ack_marks = 1;
    o.index_dir = s->index_dir[0] ? s->index_dir : NULL;
    a->conv = gt__conv_create(&o);
    if (!a->conv)
        return -ENOMEM;
    if ((rc = gt__conv_hello(a->conv, hello)) < 0)
        return rc;
    if (s->raw && (rc = open_raw(a)) < 0)
        return rc;
    a->hello_seen = 1;
    a->capture = (hello->h.flags & GT_HELLO_CAPTURE) != 0;
    if (hello->h.pid != a->peer_pid)
        gt__log("agent says pid %u, kernel says %u (pid namespace?)",
                (unsigned)hello->h.pid, (unsigned)a->peer_pid);
    gt__log("agent pid %u rank %d on %.64s connected: %.120s -> %s",
            (unsigned)hello->h.pid, (int)hello->h.rank, hello->hostname,
            hello->cmdline, a->stem);
    /* An agent that already exited cannot read the welcome; its data is
     * still worth converting, so a failed send is not a stream error. */
    if (gt__agent_send(a, GT_CTL_WELCOME, "gradtraced " GT__VERSION) < 0)
        gt__log("agent pid %u: welcome not sent", (unsigned)hello->h.pid);
    gt__agent_send_triggers(a);
    return 0;
}

/* A full disk is not the agent's fault: the stream stays open, its
 * output pauses until the sweep finds space again; what was not written
 * since the last ACK is counted, never acknowledged as written. */
static void disk_pause(struct gt__agent *a)
{
    gt__log("agent pid %u: disk full writing %s: output paused, records "
            "counted as lost until space returns",
            (unsigned)a->hello->h.pid, a->stem);
    gt__conv_disk_pause(a->conv);
    a->disk_full = 1;
    gt__stat_add(&a->srv->disk_full, 1);
}

static int on_chunk(void *ud, const struct gt_chunk_header *h,
                    const uint8_t *records, size_t raw_size)
{
    struct gt__agent *a = ud;

    /* A stream whose hello failed takes no chunks, whatever the framer
     * still holds. */
    if (!a->hello_seen || !a->conv)
        return -EPIPE;
    if (a->disk_full) {
        /* Paused: counted per thread, written as lost when space is back. */
        gt__conv_skip(a->conv, records, raw_size);
        a->disk_full_records += h->record_count;
        a->records += h->record_count;
        gt__stat_add(&a->srv->records, h->record_count);
        return 0;
    }
    a->records += h->record_count;
    gt__stat_add(&a->srv->records, h->record_count);
    gt__stat_add(&a->srv->chunks, 1);
    a->last_seq = h->seq;
    /* Decoded once: the converter keeps what status reports of the
     * stream too (lost counts, job route: gt__conv_summary and
     * gt__conv_job_route). */
    int rc = gt__conv_chunk(a->conv, h, records, raw_size);
    if (rc == 0 && gt__conv_rank(a->conv) >= 0 &&
        gt__conv_rank(a->conv) != a->hello->h.rank && !a->rank_news) {
        /* A worker (wq.lock held): the loop does the rest. */
        a->rank_news = 1;
        a->rank_new = gt__conv_rank(a->conv);
        uv_async_send(&a->srv->wake);
    }
    if (rc < 0 && gt__conv_disk_full(a->conv)) {
        disk_pause(a);
        return 0;
    }
    return rc;
}

static void disk_retry(struct gt__agent *a)
{
    struct statvfs st;
    int rc;

    if (!a->disk_full || statvfs(a->srv->out_dir, &st) != 0 ||
        (uint64_t)st.f_bavail * st.f_frsize < GT__DISK_RESUME_BYTES)
        return;
    rc = gt__conv_resume(a->conv);
    if (rc == -ENOSPC || rc == -EDQUOT)
        return; /* not yet */
    gt__log("agent pid %u: disk space is back: %s resumes in a new file "
            "(%llu records arrived while full)%s%s", (unsigned)a->hello->h.pid,
            a->stem, (unsigned long long)a->disk_full_records,
            rc ? "; the cut file could not be finished: " : "",
            rc ? strerror(-rc) : "");
    a->disk_full = 0;
    a->disk_full_records = 0;
}

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

static struct gt__done *remember(struct gt__agent *a, const char *reason)
{
    struct gt__server *s = a->srv;
    const char *const *paths = NULL;
    size_t n = a->conv ? gt__conv_files(a->conv, &paths) : 0;
    struct gt__done *d = gt__calloc(1, sizeof(*d));
    struct gt__conv_summary sum = {0};

    if (!d)
        return NULL;
    if (a->conv)
        gt__conv_summary(a->conv, &sum);
    d->pid = a->hello->h.pid;
    d->ppid = a->hello->h.ppid;
    d->rank = a->hello->h.rank;
    d->start_mono_ns = a->hello->h.start_mono_ns;
    copy_cut(d->stem, sizeof(d->stem), a->stem);
    copy_cut(d->command, sizeof(d->command), a->hello->cmdline);
    copy_cut(d->reason, sizeof(d->reason), reason);
    d->bytes = a->bytes;
    d->records = a->records;
    d->events = sum.events;
    d->lost_events = sum.lost_events;
    d->lost_chunks = sum.lost_chunks + gt__framer_stats(a->framer)->chunks_lost;
    d->trig = gt__agent_trig_json(a);
    d->files = gt__calloc(n + 1, sizeof(char *));
    for (size_t i = 0; d->files && i < n; i++)
        if ((d->files[d->nfiles] = gt__strdup(paths[i])) != NULL)
            d->nfiles++;
    s->files += d->nfiles;
    s->events += d->events;
    s->lost_events += d->lost_events;
    s->lost_chunks += d->lost_chunks;
    d->next = s->done;
    s->done = d;
    if (++s->ndone > GT__DONE_MAX) {
        struct gt__done **pp = &s->done;

        while ((*pp)->next)
            pp = &(*pp)->next;
        gt__done_free(*pp);
        *pp = NULL;
        s->ndone--;
    }
    return d;
}

/* "chunks=N seq=S" of what a's converter has written out. */
static int ack_text(const struct gt__agent *a, char *buf, size_t cap)
{
    const struct gt__framer_stats *st = gt__framer_stats(a->framer);

    snprintf(buf, cap, "chunks=%llu seq=%llu", (unsigned long long)st->chunks,
             (unsigned long long)a->last_seq);
    return st->chunks != a->acked;
}

static void agent_ack(struct gt__agent *a)
{
    char text[64];

    /* Mark, then ACK: a daemon killed in between leaves records the
     * agent counts as lost in the file (never the other way round). */
    if (!a->hello_seen || a->disk_full || !ack_text(a, text, sizeof(text)))
        return;
    if (gt__conv_ack_mark(a->conv) != 0) {
        if (gt__conv_disk_full(a->conv))
            disk_pause(a);
        return;
    }
    if (gt__agent_send(a, GT_CTL_ACK, text) == 0)
        a->acked = gt__framer_stats(a->framer)->chunks;
}

void gt__agent_sweep(struct gt__agent *a)
{
    if (!a->hello_seen || a->closing)
        return;
    pthread_mutex_lock(&a->wq.lock);
    if (a->disk_full)
        disk_retry(a);
    else if (a->conv && gt__conv_flush(a->conv) == 0)
        /* A daemon killed now loses at most the last second, and the
         * agent counts exactly what was not acknowledged. A write error
         * is the converter's to report when the stream ends. */
        agent_ack(a);
    else if (a->conv && gt__conv_disk_full(a->conv))
        disk_pause(a);
    pthread_mutex_unlock(&a->wq.lock);
}

/* The stream is finished and written: the last ACK goes out now, before
 * the close (a write queued on libuv would be cancelled by it). */
static void final_ack(struct gt__agent *a)
{
    char text[64];

    if (a->hello_seen && ack_text(a, text, sizeof(text)) &&
        gt__agent_send_now(a, GT_CTL_ACK, text) == 0)
        a->acked = gt__framer_stats(a->framer)->chunks;
}

/* A stream paused by a full disk ends: finished now if space allows
 * (the cut files, then a last main file with what the disk cost), else
 * held by the server until it does (diskfull.c). @return 1 held. */
static int disk_end(struct gt__agent *a, const struct gt__framer_stats *st,
                    int truncated)
{
    int rc = gt__conv_resume(a->conv);

    a->disk_full = 0;
    if (rc != -ENOSPC && rc != -EDQUOT)
        return 0;
    return gt__disk_park(a->srv, a->conv, st, truncated, a->hello->h.pid,
                         a->hello->h.start_mono_ns, a->stem) == 0;
}

static void finish(struct gt__agent *a, const char *reason, int failed)
{
    struct gt__server *s = a->srv;
    int frc, rc, held = 0;

    /* After a stream error the framer is dead: finishing it would only
     * repeat the error. */
    frc = failed ? 0 : gt__framer_finish(a->framer);
    if (a->conv) {
        const struct gt__framer_stats *st = gt__framer_stats(a->framer);
        /* Without a goodbye the process (or the connection) died before
         * its last records: the converter marks the trace truncated, with
         * its last time. A stream that ends while its disk is full is held
         * and finished when space returns (daemon/server/diskfull.c). */
        int truncated = failed || frc != 0;

        if (a->disk_full)
            held = disk_end(a, st, truncated);
        rc = held ? 0 : gt__conv_finish(a->conv, st, truncated);
        if (rc == 0 && !held)
            final_ack(a);
        if (rc < 0)
            gt__log("agent pid %u: finishing %s failed: %s",
                    (unsigned)a->hello->h.pid, a->stem, gt__strerror(rc));
        s->seq_gaps += st->chunks_lost;
    }
    if (a->raw_fd >= 0)
        close(a->raw_fd);
    a->raw_fd = -1;
    if (a->hello_seen) {
        struct gt__done *d = remember(a, reason);

        gt__log("agent pid %u (%s) %s: %llu bytes, %llu records, %llu chunks "
                "lost, %s%s",
                (unsigned)a->hello->h.pid, a->stem, reason,
                (unsigned long long)a->bytes, (unsigned long long)a->records,
                (unsigned long long)(d ? d->lost_chunks : 0),
                frc == GT__ETRUNC ? "partial trace (stream ended mid-chunk), "
                : a->conv && !gt__conv_goodbye(a->conv)
                    ? "truncated (no goodbye from the agent), " : "",
                d && d->nfiles ? d->files[0] : "no file");
    } else {
        gt__log("connection from pid %u closed before a valid hello: %s",
                (unsigned)a->peer_pid, reason);
    }
    if (held)
        a->conv = NULL; /* the server's now */
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
            rank_learnt(a, a->rank_new);
            pthread_mutex_lock(&a->wq.lock);
        }
    }
    if (failed)
        a->srv->bad_streams++;
    finish(a, reason, failed);
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

/* The raw capture is written on the loop as bytes arrive, so a .gtr is
 * complete as soon as its agent's bytes are read, converted or not. */
static void raw_write(struct gt__agent *a, const uint8_t *data, size_t n)
{
    int rc;

    if (a->raw_fd >= 0 && (rc = gt__write_all(a->raw_fd, data, n, 0, 0)) < 0) {
        gt__log("agent pid %u: raw capture %s.gtr stopped: %s",
                (unsigned)a->hello->h.pid, a->stem, strerror(-rc));
        close(a->raw_fd);
        a->raw_fd = -1;
    }
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
    raw_write(a, a->pre, a->pre_len);
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
    raw_write(a, b->data, n);
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
            rank_learnt(a, rank);
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
    a->framer = gt__framer_create(GT__FRAMER_STRICT, on_hello, on_chunk, a);
    if (!a->framer) {
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

static cJSON *files_json(const char *const *paths, size_t n)
{
    cJSON *arr = cJSON_CreateArray();

    for (size_t i = 0; arr && i < n; i++)
        cJSON_AddItemToArray(arr, cJSON_CreateString(paths[i]));
    return arr;
}

static cJSON *agent_json_locked(const struct gt__agent *a)
{
    const struct gt__framer_stats *st = gt__framer_stats(a->framer);
    const struct gt__hello_info *h = a->hello;
    const char *const *paths = NULL;
    size_t n = gt__conv_files(a->conv, &paths);
    cJSON *o = cJSON_CreateObject();
    struct gt__conv_summary sum;

    if (!o)
        return NULL;
    gt__conv_summary(a->conv, &sum);
    cJSON_AddNumberToObject(o, "pid", h->h.pid);
    cJSON_AddNumberToObject(o, "ppid", h->h.ppid);
    cJSON_AddNumberToObject(o, "rank", h->h.rank);
    cJSON_AddNumberToObject(o, "local_rank", h->h.local_rank);
    cJSON_AddNumberToObject(o, "world_size", h->h.world_size);
    cJSON_AddStringToObject(o, "hostname", h->hostname);
    cJSON_AddStringToObject(o, "command", h->cmdline);
    cJSON_AddStringToObject(o, "stem", a->stem);
    cJSON_AddBoolToObject(o, "capture", a->capture);
    /* Operators in every capture (GRADTRACE_OPS=1); windows with ops=1
     * add them for their own span only. */
    cJSON_AddBoolToObject(o, "ops", (h->h.flags & GT_HELLO_OPS) != 0);
    cJSON_AddBoolToObject(o, "job_route", gt__conv_job_route(a->conv));
    cJSON_AddBoolToObject(o, "disk_full", a->disk_full);
    cJSON_AddNumberToObject(o, "connected_s",
                            (double)(gt__mono_ns() - a->connected_ns) / 1e9);
    cJSON_AddNumberToObject(o, "bytes", (double)a->bytes);
    cJSON_AddNumberToObject(o, "chunks", (double)st->chunks);
    cJSON_AddNumberToObject(o, "records", (double)a->records);
    cJSON_AddNumberToObject(o, "events", (double)sum.events);
    cJSON_AddNumberToObject(o, "lost_events", (double)sum.lost_events);
    cJSON_AddNumberToObject(o, "lost_cupti", (double)sum.lost_cupti);
    cJSON_AddNumberToObject(o, "lost_chunks",
                            (double)(sum.lost_chunks + st->chunks_lost));
    const struct gt__conv_window *w;
    cJSON_AddNumberToObject(o, "windows", (double)gt__conv_windows(a->conv, &w));
    cJSON_AddItemToObject(o, "files", files_json(paths, n));
    cJSON *trig = gt__agent_trig_json(a);
    gt__trig_json_merge(o, trig);
    cJSON_Delete(trig);
    return o;
}

cJSON *gt__done_json(const struct gt__done *d)
{
    cJSON *o = cJSON_CreateObject();

    if (!o)
        return NULL;
    cJSON_AddNumberToObject(o, "pid", d->pid);
    cJSON_AddNumberToObject(o, "ppid", d->ppid);
    cJSON_AddNumberToObject(o, "rank", d->rank);
    cJSON_AddStringToObject(o, "command", d->command);
    cJSON_AddStringToObject(o, "stem", d->stem);
    cJSON_AddStringToObject(o, "end", d->reason);
    cJSON_AddNumberToObject(o, "bytes", (double)d->bytes);
    cJSON_AddNumberToObject(o, "records", (double)d->records);
    cJSON_AddNumberToObject(o, "events", (double)d->events);
    cJSON_AddNumberToObject(o, "lost_events", (double)d->lost_events);
    cJSON_AddNumberToObject(o, "lost_chunks", (double)d->lost_chunks);
    cJSON_AddItemToObject(o, "files",
                          files_json((const char *const *)d->files, d->nfiles));
    gt__trig_json_merge(o, d->trig);
    return o;
}

cJSON *gt__agent_json(struct gt__agent *a)
{
    cJSON *o;

    /* Waits at most for the one buffer a worker is converting. */
    pthread_mutex_lock(&a->wq.lock);
    o = agent_json_locked(a);
    pthread_mutex_unlock(&a->wq.lock);
    return o;
}

int gt__agent_job_route(struct gt__agent *a)
{
    int up;

    pthread_mutex_lock(&a->wq.lock);
    up = a->conv && gt__conv_job_route(a->conv);
    pthread_mutex_unlock(&a->wq.lock);
    return up;
}
