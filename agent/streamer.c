/*
 * The streamer thread: every 20 ms, or sooner when a thread seals a block,
 * it drains every thread's committed records into a chunk, compresses it
 * with zstd (level 1, one context) and hands it to the sink.
 *
 * Chunk layout, in this order:
 *   string definitions not yet sent in this stream (snapshot taken AFTER
 *     the records were gathered, so every id a record uses is defined at
 *     the front of its chunk or in an earlier one);
 *   GT_R_PROCESS_INFO + host GT_R_CLOCK_SYNC (stream start, then every s);
 *   per thread: GT_R_THREAD_INFO (once per stream), GT_R_THREAD, its
 *     records in order, GT_R_LOST when its drop count changed.
 * A chunk never relies on a GT_R_THREAD of an earlier chunk.
 *
 * Without a sink (no daemon yet, file not writable) records are drained
 * and discarded without compression: the application never feels it, the
 * discarded chunks are counted (GT_LOST_CHUNKS, process lifetime) and the
 * sequence numbers they would have had are skipped.
 *
 * At exit the streamer does one final pass, bounded per thread by its
 * buffer size so that threads still recording cannot keep it going.
 *
 * A daemon that stops reading (SIGSTOPped, its queue for us full) keeps
 * its connection: a chunk that does not fit into the socket buffer
 * within ROOM_WAIT_MS (as long as a write used to wait before it gave the
 * connection up) is dropped and counted (its records undelivered, per
 * thread), and while the daemon still does not read, without a wait; so is the
 * rest of that pass, and the next pass sends again what the stream
 * carries once (strings, thread infos, process info, the cumulative loss
 * counts), which the dropped chunks may have held. The chunks written
 * stay the daemon's to acknowledge: counted once, whichever way. The
 * final pass ends with the loss counts and the goodbye in a chunk of
 * their own when it dropped any, written into the buffer's reserve.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <zstd.h>

#include "agent/streamer.h"

#include "agent/capture.h"
#include "agent/ring.h"
#include "agent/sink.h"
#include "agent/stream.h"
#include "agent/strings.h"
#include "agent/trigger.h"
#include "agent/undelivered.h"
#include "common/alloc.h"
#include "common/util.h"

#define CHUNK_TARGET (1u << 20) /* records per chunk, before compression */
#define TICK_MS 20
#define META_EVERY_NS 1000000000ull
#define ZSTD_LEVEL 1
/* Exit waits for the final pass while it makes progress (a chunk
 * written or dropped) at least every FINAL_WAIT_MS, FINAL_CAP_MS at most:
 * a pass slowed by a loaded machine or a slow daemon still ends whole
 * (a fixed 3 s wait cut it short uncounted), and a stuck one cannot hold
 * the exit for more than FINAL_WAIT_MS. */
#define FINAL_WAIT_MS 3000
#define FINAL_CAP_MS 30000
/* Socket buffer bytes only the final chunk (loss counts, goodbye) uses. */
#define SINK_RESERVE (64u * 1024u)
/* How long a chunk waits for the daemon to read before it is dropped. */
#define ROOM_WAIT_MS 2000

static _Atomic int streamer_running;
static _Atomic int stop_req;
static _Atomic int final_done;  /* futex word */
static _Atomic int wake_pending;
static _Atomic uint64_t progress; /* chunks handled: the exit's wait reads it */
static _Atomic int lazy_start;  /* fork child: start on first need */
static int efd = -1;
static void *cctx;
static uint8_t *raw;            /* GT_CHUNK_MAX_RAW bytes */
static uint8_t *sbuf;           /* string definitions, GT_CHUNK_MAX_RAW */
static uint8_t *enc;
static size_t enc_cap;
static uint64_t last_meta_ns;
static int goodbye_due;                   /* final pass: end with GT_R_GOODBYE */
static int congested;  /* this pass dropped a chunk: the rest is dropped */
static int tail_final; /* writing the final pass's last chunk: the reserve */

/* The chunk being built in raw. */
static uint32_t b_len, b_count;
static uint64_t b_first;

/* ------------------------------------------------------------ records */

static void b_note_ts(uint64_t ts)
{
    if (ts && ts < b_first)
        b_first = ts;
}

static void b_append(const void *rec, uint16_t size)
{
    uint16_t type;

    memcpy(raw + b_len, rec, size);
    memcpy(&type, rec, 2);
    b_note_ts(gt__rec_ts(raw + b_len, type, size));
    b_len += size;
    b_count++;
}

static void b_reset(void)
{
    b_len = 0;
    b_count = 0;
    b_first = UINT64_MAX;
}

/* ------------------------------------------------------------ chunks */

/* @return 1 when the chunk went into the connection, 0 when it was
 * dropped (counted in GT_LOST_CHUNKS). */
static int chunk_write(const uint8_t *buf, uint32_t len, uint32_t count,
                       uint64_t first_ns)
{
    uint64_t seq = atomic_fetch_add(&gt__st.seq, 1);
    ssize_t n;
    int rc;

    atomic_fetch_add_explicit(&progress, 1, memory_order_relaxed);

    if (!gt__st.ready || congested) {
        atomic_fetch_add(&gt__st.lost_chunks, 1);
        return 0;
    }
    n = gt__chunk_encode(cctx, ZSTD_LEVEL, buf, len, count, seq,
                        first_ns == UINT64_MAX ? 0 : first_ns, enc, enc_cap);
    if (n < 0) {
        GT__DIAG("chunk %llu not encoded: %s", (unsigned long long)seq,
                 gt__strerror((int)n));
        atomic_fetch_add(&gt__st.lost_chunks, 1);
        return 0;
    }
    /* The daemon is not reading: after a wait (none while it still does
     * not read) drop rather than close. The final chunk tries even
     * without room: nothing comes after it. */
    if (!tail_final &&
        !gt__sink_room((size_t)n, SINK_RESERVE, gt__st.resend_due ? 0 : ROOM_WAIT_MS)) {
        if (!gt__st.resend_due)
            GT__DIAG("daemon not reading: chunks dropped (counted) until "
                     "it reads again");
        congested = 1;
        gt__st.resend_due = 1;
        atomic_fetch_add(&gt__st.lost_chunks, 1);
        return 0;
    }
    rc = gt__sink_write(enc, (size_t)n, 2000);
    if (rc == 0) {
        gt__st.sent++;
        return 1;
    }
    atomic_fetch_add(&gt__st.lost_chunks, 1);
    gt__sink_close(rc == -ETIMEDOUT ? "daemon not reading" : "write failed");
    return 0;
}

/* Puts the definitions the stream lacks in front of the chunk, or sends
 * them in string-only chunks first when they do not fit beside it. A
 * string not readable yet (its entry is being published) waits for the
 * next chunk, as does the rest after it. */
static void strings_prefix(void)
{
    uint32_t n = gt__strings_count();

    while (gt__st.ready && gt__st.str_emitted < n) {
        uint32_t slen = 0, scount = 0;
        int k = 0;

        while (gt__st.str_emitted < n) {
            k = gt__strings_record(gt__st.str_emitted + 1, sbuf + slen,
                                   GT_CHUNK_MAX_RAW - slen);
            if (k <= 0)
                break;
            slen += (uint32_t)k;
            scount++;
            gt__st.str_emitted++;
        }
        if (slen == 0)
            return;
        if (gt__st.str_emitted < n || slen + b_len > GT_CHUNK_MAX_RAW) {
            (void)chunk_write(sbuf, slen, scount, UINT64_MAX);
            if (k < 0)
                return;
            continue;
        }
        memmove(raw + slen, raw, b_len);
        memcpy(raw, sbuf, slen);
        b_len += slen;
        b_count += scount;
    }
}

static void chunk_flush(void)
{
    if (!b_len)
        return;
    strings_prefix();
    /* The threads' records in it are the daemon's once it says so; a
     * file has them once written. */
    if (chunk_write(raw, b_len, b_count, b_first)) {
        gt__undel_chunk_sent(gt__st.sent);
        if (gt__st.kind == GT__SINK_FILE)
            gt__undel_acked(gt__st.sent);
    } else
        gt__undel_chunk_lost();
    b_reset();
}

static void meta_append(void)
{
    uint8_t m[sizeof(struct gt_r_process_info) + sizeof(struct gt_r_clock_sync)];
    struct gt_r_job_route jr = {.h = {GT_R_JOB_ROUTE, sizeof(jr)},
                                .up = (uint32_t)atomic_load(&gt__st.job_route)};

    (void)gt__meta_records(m);
    b_append(m, sizeof(struct gt_r_process_info));
    b_append(m + sizeof(struct gt_r_process_info), sizeof(struct gt_r_clock_sync));
    b_append(&jr, sizeof(jr));
}

/* Reads the thread's current name (it may have been set after its first
 * event); falls back to the name seen at registration. */
static uint32_t thread_name(struct gt__thread *t)
{
    char path[64], name[32];
    int fd;
    ssize_t n = -1;

    if (atomic_load(&t->status) == GT__THR_ACTIVE) {
        snprintf(path, sizeof(path), "/proc/self/task/%u/comm", t->tid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            n = read(fd, name, sizeof(name) - 1);
            close(fd);
        }
        while (n > 0 && (name[n - 1] == '\n' || name[n - 1] == '\0'))
            n--;
    }
    if (n <= 0) {
        n = (ssize_t)strnlen(t->name, sizeof(t->name));
        memcpy(name, t->name, (size_t)n);
    }
    if (n > 0)
        atomic_store(&t->name_id, gt__intern(name, (size_t)n));
    return atomic_load(&t->name_id);
}

static void thread_prefix(struct gt__thread *t)
{
    struct gt_r_thread th = {.h = {GT_R_THREAD, sizeof(th)}, .tid = t->tid};

    if (t->info_stream != gt__st.stream_id) {
        struct gt_r_thread_info ti = {.h = {GT_R_THREAD_INFO, sizeof(ti)},
                                      .tid = t->tid};
        ti.name = thread_name(t);
        b_append(&ti, sizeof(ti));
        t->info_stream = gt__st.stream_id;
    }
    b_append(&th, sizeof(th));
}

static void lost_append(uint32_t tid, uint32_t what, uint64_t count)
{
    struct gt_r_lost l = {.h = {GT_R_LOST, sizeof(l)}, .tid = tid, .what = what,
                          .count = count};
    b_append(&l, sizeof(l));
}

static void undelivered_append(uint32_t tid, uint64_t count)
{
    if (b_len + 64 + sizeof(struct gt_r_lost) > CHUNK_TARGET)
        chunk_flush();
    lost_append(tid, GT_LOST_UNDELIVERED, count);
}

/* Discards what t has committed (no sink), counting its records as
 * undelivered. @return bytes discarded. */
static uint64_t thread_discard(struct gt__thread *t, uint64_t limit)
{
    uint64_t total = 0, records = 0;
    const uint8_t *p;
    uint32_t n;

    while (total < limit && (n = gt__ring_peek(t, &p)) > 0) {
        for (uint32_t off = 0; off < n;) {
            uint16_t sz = gt__rec_size_at(p + off);
            if (sz < sizeof(struct gt_rec) || sz > n - off)
                break; /* a bad size: the rest is not records */
            off += sz;
            records++;
        }
        gt__ring_consume(t, n);
        total += n;
    }
    gt__undel_discarded(t->tid, records);
    return total;
}

/* Moves t's committed records (at most limit bytes) into chunks. */
static void thread_drain(struct gt__thread *t, uint64_t limit)
{
    int in_seg = 0;
    uint64_t total = 0, lost;
    const uint8_t *p;
    uint32_t n;

    while (total < limit && (n = gt__ring_peek(t, &p)) > 0) {
        uint32_t take = 0, cnt = 0;
        uint64_t first = UINT64_MAX;

        if (b_len + 64 >= CHUNK_TARGET) {
            chunk_flush();
            in_seg = 0;
        }
        while (take < n) {
            uint16_t sz = gt__rec_size_at(p + take), type;
            uint64_t ts;
            if (sz < sizeof(struct gt_rec) || sz > n - take) {
                /* A hook wrote a bad size: the rest of this segment cannot
                 * be cut into records. Drop it rather than the stream. */
                gt__ring_consume(t, n);
                gt__warn_once(0, "agent: a record with an invalid size was dropped");
                goto next;
            }
            if (b_len + 64 + take + sz > CHUNK_TARGET)
                break;
            memcpy(&type, p + take, 2);
            ts = gt__rec_ts(p + take, type, sz);
            if (ts && ts < first)
                first = ts;
            take += sz;
            cnt++;
        }
        if (take) {
            if (!in_seg) {
                thread_prefix(t);
                in_seg = 1;
            }
            memcpy(raw + b_len, p, take);
            b_len += take;
            b_count += cnt;
            gt__undel_add(t->tid, cnt);
            b_note_ts(first == UINT64_MAX ? 0 : first);
            gt__ring_consume(t, take);
            total += take;
        }
        if (take < n) {
            chunk_flush();
            in_seg = 0;
        }
    next:;
    }
    /* A thread registered after the stream began has base 0. */
    if (t->lost_stream != gt__st.stream_id) {
        t->lost_stream = gt__st.stream_id;
        t->lost_sent = 0;
    }
    lost = atomic_load_explicit(&t->lost, memory_order_relaxed) - t->lost_base;
    if (lost != t->lost_sent) {
        lost_append(t->tid, GT_LOST_EVENTS, lost);
        t->lost_sent = lost;
    }
}

/* A chunk of this stream was dropped: what a stream carries once goes
 * again (strings, thread infos and per-thread counts by the stream id,
 * process info, the process's cumulative counts), so the chunks after it
 * stand on their own. The loss counts stay cumulative since the stream
 * began (the bases are kept). */
static void stream_resend(void)
{
    gt__st.stream_id++;
    gt__st.str_emitted = 0;
    gt__st.meta_due = 1;
    gt__st.orphan_sent = 0;
    gt__st.chunks_sent = 0;
    gt__undel_stream_reset();
    gt__st.resend_due = 0;
}

/* The final pass dropped chunks: every loss count (cumulative, so the
 * dropped chunks' are included) and the goodbye, alone in the last chunk,
 * which may use the buffer's reserve. */
static void final_tail(void)
{
    struct gt_r_goodbye g = {.h = {GT_R_GOODBYE, sizeof(g)}, .ts = gt__mono_ns()};
    uint64_t v;

    b_reset();
    congested = 0;
    for (struct gt__thread *t = atomic_load(&gt__threads); t; t = t->next) {
        v = atomic_load_explicit(&t->lost, memory_order_relaxed) - t->lost_base;
        if (v && t->lost_stream == gt__st.stream_id)
            lost_append(t->tid, GT_LOST_EVENTS, v);
    }
    if ((v = atomic_load(&gt__lost_orphan) - gt__st.orphan_base) != 0)
        lost_append(0, GT_LOST_EVENTS, v);
    gt__undel_stream_reset();
    gt__undel_emit(undelivered_append);
    lost_append(0, GT_LOST_CHUNKS, atomic_load(&gt__st.lost_chunks));
    b_append(&g, sizeof(g));
    tail_final = 1;
    chunk_flush();
    tail_final = 0;
}

/* One pass over every thread. Called with the lock held. */
static void cycle(void)
{
    uint64_t now = gt__mono_ns(), discarded = 0;
    uint64_t v;

    b_reset();
    congested = 0;
    if (gt__st.resend_due && gt__st.ready)
        stream_resend();
    if (gt__st.ready && (gt__st.meta_due || now - last_meta_ns >= META_EVERY_NS)) {
        meta_append();
        gt__st.meta_due = 0;
        last_meta_ns = now;
    }
    for (struct gt__thread *t = atomic_load(&gt__threads); t; t = t->next) {
        int status = atomic_load_explicit(&t->status, memory_order_acquire);
        uint64_t limit = (uint64_t)t->nblocks * t->block_size;

        if (status != GT__THR_ACTIVE && status != GT__THR_EXITED)
            continue;
        if (gt__st.ready)
            thread_drain(t, limit);
        else if (gt__st.kind == GT__SINK_SOCKET || gt__st.warned_open)
            discarded += thread_discard(t, limit);
        else
            continue; /* the file is about to be opened: keep the records */
        /* Exited and (status read before the peek) fully drained. */
        if (status == GT__THR_EXITED && !gt__ring_peek(t, &(const uint8_t *){0}))
            gt__ring_release_exited(t);
    }
    if (discarded) {
        uint64_t chunks = (discarded + CHUNK_TARGET - 1) / CHUNK_TARGET;
        atomic_fetch_add(&gt__st.lost_chunks, chunks);
        atomic_fetch_add(&gt__st.seq, chunks);
    }
    if (gt__st.ready) {
        v = atomic_load(&gt__lost_orphan) - gt__st.orphan_base;
        if (v != gt__st.orphan_sent) {
            lost_append(0, GT_LOST_EVENTS, v);
            gt__st.orphan_sent = v;
        }
        gt__undel_emit(undelivered_append);
        v = atomic_load(&gt__st.lost_chunks);
        if (v != gt__st.chunks_sent) {
            lost_append(0, GT_LOST_CHUNKS, v);
            gt__st.chunks_sent = v;
        }
        if (goodbye_due) {
            struct gt_r_goodbye g = {.h = {GT_R_GOODBYE, sizeof(g)},
                                     .ts = gt__mono_ns()};
            if (b_len + 64 + sizeof(g) > CHUNK_TARGET)
                chunk_flush();
            b_append(&g, sizeof(g));
        }
    }
    chunk_flush();
    if (goodbye_due && congested && gt__st.ready)
        final_tail();
}

/* ------------------------------------------------------------ thread */

static void wait_connect(int ms)
{
    while (gt__st.connecting && ms > 0) {
        struct pollfd pfd = {.fd = gt__st.fd, .events = POLLOUT};
        int rc = poll(&pfd, 1, 10);
        if (rc > 0)
            gt__sink_events(pfd.revents);
        ms -= 10;
    }
}

/* The last pass: everything committed reaches the sink, which is closed. */
static void final_flush(void)
{
    if (!gt__stream_trylock(1000))
        return;
    if (!gt__st.ready && gt__sink_wanted() && gt__sink_open() == -EINPROGRESS)
        wait_connect(200);
    /* The stream ends here by our choice: say so, so that a stream that
     * ends without it reads as cut short. */
    goodbye_due = 1;
    cycle();
    goodbye_due = 0;
    /* Our own end: the daemon reads to EOF and finishes the stream with
     * everything sent, so nothing is owed an acknowledgement. */
    gt__st.acked = gt__st.sent;
    gt__undel_acked(gt__st.sent);
    if (gt__st.fd >= 0)
        gt__sink_close("agent finished");
    gt__stream_unlock();
}

static void wake(void)
{
    if (efd >= 0 && !atomic_exchange(&wake_pending, 1)) {
        uint64_t one = 1;
        ssize_t rc = write(efd, &one, sizeof(one));
        (void)rc;
    }
}

static void *streamer_main(void *arg)
{
    (void)arg;
    prctl(PR_SET_NAME, "gt-streamer", 0, 0, 0);
    /* Open the sink right away (not after the first tick), so that even a
     * process that crashes within milliseconds has its stream started. */
    if (gt__sink_wanted() && gt__stream_trylock(100)) {
        int rc = gt__st.ready ? 0 : gt__sink_open();
        (void)rc;
        gt__stream_unlock();
    }
    while (!atomic_load(&stop_req)) {
        struct pollfd pf[2] = {{.fd = efd, .events = POLLIN}, {.fd = -1}};
        int nf = 1;

        /* kind is fixed before this thread starts; in socket mode only
         * this thread changes fd, so it may read it without the lock
         * (in file mode the first record's thread opens the file). */
        if (gt__st.kind == GT__SINK_SOCKET && gt__st.fd >= 0) {
            pf[1].fd = gt__st.fd;
            pf[1].events = POLLIN | (gt__st.connecting ? POLLOUT : 0);
            nf = 2;
        }
        if (poll(pf, (nfds_t)nf, TICK_MS) > 0 && (pf[0].revents & POLLIN)) {
            uint64_t v;
            ssize_t rc = read(efd, &v, sizeof(v));
            (void)rc;
            atomic_store(&wake_pending, 0);
        }
        if (gt__timebase_update() < 0)
            gt__warn_once(0, "agent: TSC disagrees with CLOCK_MONOTONIC by more than "
                             "5 ms; timestamps now come from clock_gettime");
        gt__capture_tick(gt__mono_ns(), gt__trig_iteration());
        if (atomic_load(&stop_req) || !gt__stream_trylock(100))
            continue;
        if (nf == 2 && pf[1].revents)
            gt__sink_events(pf[1].revents);
        if (!gt__st.ready && !gt__st.connecting && gt__sink_wanted() &&
            gt__mono_ns() >= gt__st.next_try_ns) {
            /* A failure schedules the next attempt itself (backoff). */
            int rc = gt__sink_open();
            (void)rc;
        }
        cycle();
        gt__stream_unlock();
    }
    final_flush();
    atomic_store(&final_done, 1);
    syscall(SYS_futex, &final_done, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
    return NULL;
}

static void poke(void)
{
    if (atomic_load_explicit(&streamer_running, memory_order_relaxed))
        wake();
}

/* A thread's first record (in this process). */
static void armed(void)
{
    /* File mode: the file is created now, before this first record is
     * written, so nothing recorded can precede its stream. If the streamer
     * holds the lock, it opens the file on its next pass instead (and
     * keeps records in the buffers meanwhile). */
    if (gt__st.kind == GT__SINK_FILE && !atomic_load(&gt__st.file_wanted)) {
        atomic_store(&gt__st.file_wanted, 1);
        if (gt__stream_trylock(0)) {
            int rc = gt__st.ready ? 0 : gt__sink_open();
            (void)rc;
            gt__stream_unlock();
        } else {
            wake();
        }
    }
    /* A failed start leaves the final flush to run inline at exit. */
    if (!atomic_load_explicit(&streamer_running, memory_order_relaxed) &&
        atomic_load(&lazy_start) && atomic_exchange(&lazy_start, 0) &&
        gt__streamer_start() < 0)
        GT__DIAG("streamer not started in the child");
}

static int buffers_alloc(void)
{
    if (raw)
        return 0;
    enc_cap = gt__chunk_bound(GT_CHUNK_MAX_RAW);
    raw = gt__malloc(GT_CHUNK_MAX_RAW);
    sbuf = gt__malloc(GT_CHUNK_MAX_RAW);
    enc = gt__malloc(enc_cap);
    cctx = ZSTD_createCCtx();
    if (!raw || !sbuf || !enc || !cctx) {
        gt__free(raw);
        gt__free(sbuf);
        gt__free(enc);
        ZSTD_freeCCtx(cctx);
        raw = sbuf = enc = NULL;
        cctx = NULL;
        return -ENOMEM;
    }
    return 0;
}

int gt__streamer_start(void)
{
    pthread_attr_t attr;
    pthread_t th;
    sigset_t all, old;
    int rc;

    rc = buffers_alloc();
    if (rc < 0)
        return rc;
    if (efd < 0) {
        efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (efd < 0)
            return -errno;
    }
    gt__ring_notify = poke;
    gt__ring_armed = armed;
    atomic_store(&stop_req, 0);
    atomic_store(&final_done, 0);
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    /* The thread inherits this mask: no application signal ever lands on
     * the streamer (it must not run the application's handlers). */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = -pthread_create(&th, &attr, streamer_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (rc == 0)
        atomic_store(&streamer_running, 1);
    else
        GT__DIAG("streamer thread not started: %s", strerror(-rc));
    return rc;
}

void gt__streamer_stop(void)
{
    uint64_t t0, last, seen;

    atomic_store(&lazy_start, 0);
    if (!atomic_load(&streamer_running)) {
        if (buffers_alloc() == 0)
            final_flush();
        return;
    }
    atomic_store(&stop_req, 1);
    if (efd >= 0) {
        uint64_t one = 1;
        ssize_t rc = write(efd, &one, sizeof(one));
        (void)rc;
    }
    t0 = last = gt__mono_ns();
    seen = atomic_load_explicit(&progress, memory_order_relaxed);
    while (!atomic_load(&final_done)) {
        struct timespec ts = {0, 50000000};
        uint64_t now, p;

        syscall(SYS_futex, &final_done, FUTEX_WAIT_PRIVATE, 0, &ts, NULL, 0);
        now = gt__mono_ns();
        p = atomic_load_explicit(&progress, memory_order_relaxed);
        if (p != seen) {
            seen = p;
            last = now;
        }
        if ((now - last) / 1000000 > FINAL_WAIT_MS) {
            GT__DIAG("final flush made no progress in %d ms; giving up", FINAL_WAIT_MS);
            break;
        }
        if ((now - t0) / 1000000 > FINAL_CAP_MS) {
            GT__DIAG("final flush did not finish in %d ms; giving up", FINAL_CAP_MS);
            break;
        }
    }
    atomic_store(&streamer_running, 0);
}

void gt__streamer_exit_flush(void)
{
    if (atomic_load(&streamer_running))
        gt__streamer_stop();
}

void gt__streamer_after_fork_child(void)
{
    atomic_store(&streamer_running, 0);
    atomic_store(&stop_req, 0);
    atomic_store(&final_done, 0);
    atomic_store(&wake_pending, 0);
    /* The parent's eventfd is a shared object: never touch it from here
     * (a write would wake the parent's streamer). */
    if (efd >= 0)
        close(efd);
    efd = -1;
    gt__stream_after_fork_child();
    last_meta_ns = 0;
    atomic_store(&lazy_start, 1);
}
