/*
 * One agent's stream, from its hello to its finish: what the framer's
 * handlers and the sweep do with it (the connection it arrives on is
 * ingest.c's).
 *
 *   hello: pick a unique sanitized stem, create the converter and the raw
 *          .gtr file (--raw), answer GT_CTL_WELCOME, send armed triggers;
 *   chunk: feed the converter, the one decoder of the chunk's records: it
 *          keeps the windows, and the lost counts and job route that
 *          status reports (agent_status.c reads them from it);
 *   sweep: once a second, flush and acknowledge what is written, or retry
 *          an output paused by a full disk;
 *   end:   finish the converter (the partial trace is still a valid file),
 *          send the last ACK, remember a summary (agent_status.c); a
 *          stream that ends while its disk is full is held by diskfull.c.
 *
 * A rank the stream says after its hello (gt_set_rank) renames the stem
 * and its files, and re-targets triggers.
 *
 * Threads: the hello is handled on the loop; chunks on a pool worker
 * holding the agent's wq.lock (workq.h); the rest on the loop, under
 * wq.lock wherever it touches the converter (the caller holds it for
 * gt__agent_finish).
 */
#include "daemon/server/server.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/util.h"
#include "daemon/convert/convert.h"

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
void gt__agent_rank_learnt(struct gt__agent *a, int32_t rank)
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

void gt__agent_finish(struct gt__agent *a, const char *reason, int failed)
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
        struct gt__done *d = gt__done_add(a, reason);

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

/* The raw capture is written on the loop as bytes arrive, so a .gtr is
 * complete as soon as its agent's bytes are read, converted or not. */
void gt__agent_raw_write(struct gt__agent *a, const uint8_t *data, size_t n)
{
    int rc;

    if (a->raw_fd >= 0 && (rc = gt__write_all(a->raw_fd, data, n, 0, 0)) < 0) {
        gt__log("agent pid %u: raw capture %s.gtr stopped: %s",
                (unsigned)a->hello->h.pid, a->stem, strerror(-rc));
        close(a->raw_fd);
        a->raw_fd = -1;
    }
}

int gt__agent_stream_init(struct gt__agent *a)
{
    a->framer = gt__framer_create(GT__FRAMER_STRICT, on_hello, on_chunk, a);
    return a->framer ? 0 : -ENOMEM;
}
