/*
 * Fatal signals (SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL): write what the
 * threads have committed to the sink, then let the process die the way it
 * would have without us.
 *
 * Only async-signal-safe code runs here: no malloc, no zstd, no stdio, no
 * mutex. Chunks are written raw (GT_CHUNK_RAW): header and CRC-32C are
 * computed over the block bytes in place (the CRC tables were built at
 * start), so no staging copy is needed. The stream lock is taken with a
 * bounded wait; if this thread interrupted the streamer itself, or the
 * lock cannot be had, nothing is written (a half-written chunk would be
 * worse than none).
 *
 * Chaining: the handlers are installed once, at start; a handler the
 * application installs later simply replaces ours (and usually chains to
 * it). On a fatal signal we restore the previous action and, for a signal
 * that was sent (kill, raise, abort) rather than raised by a faulting
 * instruction, raise it again; a faulting instruction re-executes on return
 * and delivers it to the previous action by itself.
 */
#include <errno.h>
#include <signal.h>
#include <unistd.h>

#include "agent/crash.h"

#include "agent/ring.h"
#include "agent/sink.h"
#include "agent/stream.h"
#include "agent/strings.h"

static const int fatal_sigs[] = {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL};
#define NSIGS (sizeof(fatal_sigs) / sizeof(fatal_sigs[0]))
static struct sigaction old_actions[NSIGS];
static _Atomic int crashing;
/* Strings and small records are staged here (no malloc in a handler). */
static uint8_t scratch[64 * 1024];

static uint32_t count_records(const uint8_t *p, uint32_t n, uint64_t *first)
{
    uint32_t count = 0;

    for (uint32_t off = 0; off + sizeof(struct gt_rec) <= n;) {
        uint16_t type, size = gt__rec_size_at(p + off);
        uint64_t ts;
        if (size < sizeof(struct gt_rec) || size > n - off)
            break;
        memcpy(&type, p + off, 2);
        ts = gt__rec_ts(p + off, type, size);
        if (ts && ts < *first)
            *first = ts;
        off += size;
        count++;
    }
    return count;
}

/* One raw chunk of pre[0..pre_len) followed by data[0..data_len). */
static int raw_chunk(const uint8_t *pre, uint32_t pre_len, const uint8_t *data,
                     uint32_t data_len)
{
    struct gt_chunk_header h;
    uint64_t first = UINT64_MAX;
    uint32_t crc;
    int rc;

    memset(&h, 0, sizeof(h));
    h.magic = GT_CHUNK_MAGIC;
    h.major = GT_WIRE_MAJOR;
    h.minor = GT_WIRE_MINOR;
    h.flags = GT_CHUNK_RAW;
    h.header_size = sizeof(h);
    h.raw_size = h.payload_size = pre_len + data_len;
    h.record_count = count_records(pre, pre_len, &first) +
                     count_records(data, data_len, &first);
    h.seq = atomic_fetch_add(&gt__st.seq, 1);
    h.first_ns = first == UINT64_MAX ? 0 : first;
    crc = gt__crc32c(0, &h, sizeof(h));
    crc = gt__crc32c(crc, pre, pre_len);
    h.crc = gt__crc32c(crc, data, data_len);
    rc = gt__sink_write(&h, sizeof(h), 500);
    if (rc == 0 && pre_len)
        rc = gt__sink_write(pre, pre_len, 500);
    if (rc == 0 && data_len)
        rc = gt__sink_write(data, data_len, 500);
    return rc;
}

/* Definitions the stream lacks, in as many chunks as scratch needs. */
static int crash_strings(void)
{
    uint32_t n = gt__strings_count(), len = 0;
    int rc = 0;

    while (rc == 0 && gt__st.str_emitted < n) {
        int k = gt__strings_record(gt__st.str_emitted + 1, scratch + len,
                                   (uint32_t)sizeof(scratch) - len);
        if (k < 0)
            break;
        if (k == 0 && len == 0)
            break; /* longer than the scratch buffer: cannot be sent */
        if (k == 0) {
            rc = raw_chunk(scratch, len, NULL, 0);
            len = 0;
            continue;
        }
        len += (uint32_t)k;
        gt__st.str_emitted++;
    }
    if (rc == 0 && len)
        rc = raw_chunk(scratch, len, NULL, 0);
    return rc;
}

static int crash_thread(struct gt__thread *t)
{
    uint8_t pre[sizeof(struct gt_r_thread_info) + sizeof(struct gt_r_thread)];
    const uint8_t *p;
    uint32_t n;
    int rc = 0;

    while (rc == 0 && (n = gt__ring_peek(t, &p)) > 0) {
        struct gt_r_thread th = {.h = {GT_R_THREAD, sizeof(th)}, .tid = t->tid};
        uint32_t pl = 0;

        /* Ids used by these records were interned before they were
         * committed, i.e. before this peek: this emits them first. */
        rc = crash_strings();
        if (rc)
            break;
        if (t->info_stream != gt__st.stream_id) {
            struct gt_r_thread_info ti = {.h = {GT_R_THREAD_INFO, sizeof(ti)},
                                          .tid = t->tid,
                                          .name = atomic_load(&t->name_id)};
            memcpy(pre, &ti, sizeof(ti));
            pl = sizeof(ti);
            t->info_stream = gt__st.stream_id;
        }
        memcpy(pre + pl, &th, sizeof(th));
        pl += (uint32_t)sizeof(th);
        rc = raw_chunk(pre, pl, p, n);
        gt__ring_consume(t, n);
    }
    return rc;
}

static void crash_flush(void)
{
    uint32_t len = 0;

    if (!gt__stream_trylock(500))
        return;
    /* A file that was not open yet (a crash right at start) is opened
     * here; a socket that is not connected is not waited for. */
    if (!gt__st.ready && gt__st.kind == GT__SINK_FILE &&
        atomic_load(&gt__st.file_wanted) && gt__sink_open() < 0)
        goto out_unlock;
    if (!gt__st.ready)
        goto out_unlock;
    if (gt__st.meta_due) {
        uint8_t meta[128];
        uint32_t ml = gt__meta_records(meta);
        if (crash_strings() < 0 || raw_chunk(meta, ml, NULL, 0) < 0)
            goto out_unlock;
        gt__st.meta_due = 0;
    }
    for (struct gt__thread *t = atomic_load(&gt__threads); t; t = t->next) {
        int status = atomic_load_explicit(&t->status, memory_order_acquire);
        struct gt_r_lost l = {.h = {GT_R_LOST, sizeof(l)}, .what = GT_LOST_EVENTS};

        if (status != GT__THR_ACTIVE && status != GT__THR_EXITED)
            continue;
        if (crash_thread(t) < 0)
            goto out_unlock;
        l.tid = t->tid;
        if (t->lost_stream != gt__st.stream_id)
            t->lost_base = 0; /* registered after the stream began */
        l.count = atomic_load_explicit(&t->lost, memory_order_relaxed) - t->lost_base;
        if (l.count && len + sizeof(l) <= sizeof(scratch)) {
            memcpy(scratch + len, &l, sizeof(l));
            len += sizeof(l);
        }
    }
    if (len)
        (void)raw_chunk(scratch, len, NULL, 0);
out_unlock:
    gt__stream_unlock();
}

static void on_fatal(int sig, siginfo_t *si, void *uctx)
{
    int saved = errno;
    unsigned i;

    (void)uctx;
    if (!atomic_exchange(&crashing, 1)) {
        GT__DIAG("fatal signal %d: flushing completed records", sig);
        crash_flush();
    }
    for (i = 0; i < NSIGS; i++)
        if (fatal_sigs[i] == sig)
            sigaction(sig, &old_actions[i], NULL);
    /* Sent signals do not recur on return: send it again (it stays
     * blocked until this handler returns, then meets the old action). */
    if (si->si_code <= 0)
        raise(sig);
    errno = saved;
}

void gt__crash_install(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_fatal;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (unsigned i = 0; i < NSIGS; i++)
        if (sigaction(fatal_sigs[i], &sa, &old_actions[i]) < 0)
            GT__DIAG("cannot watch signal %d", fatal_sigs[i]);
}
