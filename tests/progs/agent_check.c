/*
 * Decodes a .gtr file written by the agent and checks what the agent e2e
 * tests promise (tests/e2e/t_agent_*.sh), for records produced by
 * agent_threads (scope names "t<i>.s<k mod 16>"):
 *
 *   - the hello parses; --pid/--ppid match it and GT_R_PROCESS_INFO;
 *   - no corrupt chunk, no sequence gap;
 *   - every string id a record uses is defined earlier in the stream;
 *   - each OS thread has its GT_R_THREAD_INFO before its records and maps
 *     to exactly one workload thread index (and vice versa);
 *   - per thread: begins and ends alternate, the k-th begin is named
 *     s<k mod 16>, each end names its begin, timestamps never decrease;
 *   - per thread: recorded == expected (default), or with --lossy
 *     recorded + lost == expected, where lost counts both the records
 *     dropped at a full buffer (GT_LOST_EVENTS) and those in chunks the
 *     agent dropped (GT_LOST_UNDELIVERED).
 *
 *   agent_check FILE [--threads T --events E] [--expect INDEX=EVENTS]...
 *               [--lossy] [--require-lost] [--pid P] [--ppid P]
 *               [--min-raw-chunks N]   (chunks written by the crash path)
 *               [--partial]  (like --lossy, but recorded + lost may fall
 *                             short: threads still running at exit)
 *
 * Prints one summary line; exits 0 when every check holds, else 1 with the
 * first failure on stderr.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/codec.h"

#define MAX_THREADS 1024
#define MAX_INDEX 1024

struct tstate {
    uint32_t tid;
    int index;          /* workload thread index, -1 until known */
    int info_seen;
    int open;           /* a begin without its end yet */
    uint32_t open_name;
    uint64_t pairs;     /* begins seen */
    uint64_t recorded;  /* scope records */
    uint64_t lost;
    uint64_t undelivered; /* in chunks the agent dropped (GT_LOST_UNDELIVERED) */
    uint64_t last_ts;
};

static struct tstate threads[MAX_THREADS];
static int nthreads;
static char **strs;
static uint32_t nstrs;
static long expect_events[MAX_INDEX];
static int lossy, partial;
static uint64_t total_records, total_lost, total_undelivered, orphan_lost, chunk_lost;
static int process_info_seen;
static uint64_t raw_chunks;
static uint32_t pi_pid;
static const char *failure;
static char failbuf[256];

#define FAIL(...)                                                             \
    do {                                                                      \
        if (!failure) {                                                       \
            snprintf(failbuf, sizeof(failbuf), __VA_ARGS__);                  \
            failure = failbuf;                                                \
        }                                                                     \
    } while (0)

static struct tstate *tstate_get(uint32_t tid)
{
    for (int i = 0; i < nthreads; i++)
        if (threads[i].tid == tid)
            return &threads[i];
    if (nthreads == MAX_THREADS)
        return NULL;
    threads[nthreads] = (struct tstate){.tid = tid, .index = -1};
    return &threads[nthreads++];
}

static const char *str(uint32_t id)
{
    return id && id <= nstrs ? strs[id - 1] : NULL;
}

/* "t<i>.s<k>" -> i and k. @return 0 or -1. */
static int parse_name(const char *s, int *index, int *k)
{
    return s && sscanf(s, "t%d.s%d", index, k) == 2 ? 0 : -1;
}

static void on_scope(struct tstate *t, int begin, uint32_t name, uint64_t ts)
{
    const char *s = str(name);
    int index, k;

    t->recorded++;
    total_records++;
    if (!t->info_seen)
        FAIL("tid %u: records before its THREAD_INFO", t->tid);
    if (parse_name(s, &index, &k) < 0) {
        FAIL("tid %u: scope name id %u undefined or foreign (%s)", t->tid, name,
             s ? s : "undefined");
        return;
    }
    if (t->index < 0)
        t->index = index;
    else if (t->index != index)
        FAIL("tid %u carries records of threads %d and %d", t->tid, t->index, index);
    if (ts < t->last_ts)
        FAIL("tid %u: time goes backwards", t->tid);
    t->last_ts = ts;
    if (lossy)
        return;
    if (begin) {
        if (t->open)
            FAIL("tid %u: begin inside an open scope at pair %llu", t->tid,
                 (unsigned long long)t->pairs);
        if ((uint64_t)k != (t->pairs & 15))
            FAIL("tid %u: pair %llu is named s%d: out of order", t->tid,
                 (unsigned long long)t->pairs, k);
        t->open = 1;
        t->open_name = name;
        t->pairs++;
    } else {
        if (!t->open || t->open_name != name)
            FAIL("tid %u: end does not match its begin", t->tid);
        t->open = 0;
    }
}

static int on_chunk(void *ud, const struct gt_chunk_header *h,
                    const uint8_t *records, size_t raw_size)
{
    struct gt__rec_iter it;
    struct tstate *cur = NULL;
    uint16_t type, size;
    const uint8_t *rec;
    int rc;

    (void)ud;
    if (h->flags & GT_CHUNK_RAW)
        raw_chunks++;
    gt__rec_iter_init(&it, records, raw_size);
    while ((rc = gt__rec_next(&it, &type, &size, &rec)) == 1) {
        switch (type) {
        case GT_R_STRING: {
            struct gt_r_string r;
            const char *text;
            size_t len;
            if (gt__rec_get(rec, size, &r, sizeof(r)) < 0)
                break;
            text = (const char *)rec + sizeof(r);
            len = size - sizeof(r);
            if (r.id != nstrs + 1) {
                /* Re-definitions (a new stream) must repeat the same text. */
                if (r.id <= nstrs && (strlen(strs[r.id - 1]) != len ||
                                      memcmp(strs[r.id - 1], text, len)))
                    FAIL("string %u redefined differently", r.id);
                if (r.id > nstrs + 1)
                    FAIL("string ids skip from %u to %u", nstrs, r.id);
                break;
            }
            strs = realloc(strs, sizeof(*strs) * (nstrs + 1));
            strs[nstrs] = strndup(text, len);
            nstrs++;
            break;
        }
        case GT_R_PROCESS_INFO: {
            struct gt_r_process_info r;
            if (gt__rec_get(rec, size, &r, sizeof(r)) == 0) {
                process_info_seen = 1;
                pi_pid = r.pid;
                if (!str(r.cmdline) || !str(r.hostname))
                    FAIL("process info uses undefined strings");
            }
            break;
        }
        case GT_R_THREAD_INFO: {
            struct gt_r_thread_info r;
            if (gt__rec_get(rec, size, &r, sizeof(r)) == 0) {
                struct tstate *t = tstate_get(r.tid);
                if (t)
                    t->info_seen = 1;
                if (r.name && !str(r.name))
                    FAIL("thread name %u undefined", r.name);
            }
            break;
        }
        case GT_R_THREAD: {
            struct gt_r_thread r;
            if (gt__rec_get(rec, size, &r, sizeof(r)) == 0)
                cur = tstate_get(r.tid);
            break;
        }
        case GT_R_SCOPE_BEGIN: {
            struct gt_r_scope_begin r;
            if (!cur)
                FAIL("scope record outside a THREAD context");
            else if (gt__rec_get(rec, size, &r, sizeof(r)) == 0)
                on_scope(cur, 1, r.name, r.ts);
            break;
        }
        case GT_R_SCOPE_END: {
            struct gt_r_scope_end r;
            if (!cur)
                FAIL("scope record outside a THREAD context");
            else if (gt__rec_get(rec, size, &r, sizeof(r)) == 0)
                on_scope(cur, 0, r.name, r.ts);
            break;
        }
        case GT_R_LOST: {
            struct gt_r_lost r;
            if (gt__rec_get(rec, size, &r, sizeof(r)) < 0)
                break;
            if (r.what == GT_LOST_CHUNKS)
                chunk_lost = r.count;
            else if (r.what == GT_LOST_EVENTS && r.tid == 0)
                orphan_lost = r.count;
            else if (r.what == GT_LOST_EVENTS) {
                struct tstate *t = tstate_get(r.tid);
                if (t && r.count < t->lost)
                    FAIL("tid %u: lost count decreased", r.tid);
                if (t)
                    t->lost = r.count;
            } else if (r.what == GT_LOST_UNDELIVERED) {
                struct tstate *t = tstate_get(r.tid);
                if (t && r.count < t->undelivered)
                    FAIL("tid %u: undelivered count decreased", r.tid);
                if (t)
                    t->undelivered = r.count;
            }
            break;
        }
        default:
            break;
        }
    }
    if (rc < 0)
        FAIL("bad record in chunk %llu", (unsigned long long)h->seq);
    return 0;
}

static int on_hello(void *ud, const struct gt__hello_info *hello)
{
    (void)ud;
    (void)hello;
    return 0;
}

int main(int argc, char **argv)
{
    long want_pid = -1, want_ppid = -1, t_count = -1, t_events = -1, min_raw = 0;
    int require_lost = 0, fd;
    const struct gt__framer_stats *st;
    const struct gt__hello_info *hello;
    struct gt__framer *f;
    static uint8_t buf[1 << 20];
    ssize_t n;
    int fin;

    for (int i = 0; i < MAX_INDEX; i++)
        expect_events[i] = -1;
    if (argc < 2)
        return 2;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            t_count = atol(argv[++i]);
        else if (!strcmp(argv[i], "--events") && i + 1 < argc)
            t_events = atol(argv[++i]);
        else if (!strcmp(argv[i], "--expect") && i + 1 < argc) {
            int idx;
            long ev;
            if (sscanf(argv[++i], "%d=%ld", &idx, &ev) != 2 || idx < 0 || idx >= MAX_INDEX)
                return 2;
            expect_events[idx] = ev;
        } else if (!strcmp(argv[i], "--lossy"))
            lossy = 1;
        else if (!strcmp(argv[i], "--partial"))
            lossy = partial = 1;
        else if (!strcmp(argv[i], "--require-lost"))
            require_lost = 1;
        else if (!strcmp(argv[i], "--min-raw-chunks") && i + 1 < argc)
            min_raw = atol(argv[++i]);
        else if (!strcmp(argv[i], "--pid") && i + 1 < argc)
            want_pid = atol(argv[++i]);
        else if (!strcmp(argv[i], "--ppid") && i + 1 < argc)
            want_ppid = atol(argv[++i]);
        else
            return 2;
    }
    for (long i = 0; i < t_count && i < MAX_INDEX; i++)
        expect_events[i] = t_events;

    fd = open(argv[1], O_RDONLY);
    if (fd < 0) {
        fprintf(stderr, "agent_check: %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    f = gt__framer_create(GT__FRAMER_RESYNC, on_hello, on_chunk, NULL);
    if (!f)
        return 1;
    while ((n = read(fd, buf, sizeof(buf))) > 0)
        if (gt__framer_feed(f, buf, (size_t)n) < 0) {
            FAIL("framer refused the stream (bad hello?)");
            break;
        }
    close(fd);
    fin = gt__framer_finish(f);
    st = gt__framer_stats(f);
    hello = gt__framer_hello(f);

    if (!hello)
        FAIL("no hello");
    else if (want_pid >= 0 && hello->h.pid != (uint32_t)want_pid)
        FAIL("hello pid %u, expected %ld", hello->h.pid, want_pid);
    else if (want_ppid >= 0 && hello->h.ppid != (uint32_t)want_ppid)
        FAIL("hello ppid %u, expected %ld", hello->h.ppid, want_ppid);
    if (fin < 0)
        FAIL("stream ends inside a chunk (%s)", gt__strerror(fin));
    if (st->corrupt_chunks)
        FAIL("%llu corrupt chunks", (unsigned long long)st->corrupt_chunks);
    /* With --lossy, gaps the agent counted (GT_LOST_CHUNKS) are allowed. */
    if (st->chunks_lost && !(lossy && chunk_lost >= st->chunks_lost))
        FAIL("%llu chunks missing (sequence gaps)", (unsigned long long)st->chunks_lost);
    if (!process_info_seen)
        FAIL("no PROCESS_INFO");
    else if (hello && pi_pid != hello->h.pid)
        FAIL("PROCESS_INFO pid %u differs from the hello's", pi_pid);

    for (int i = 0; i < nthreads; i++) {
        struct tstate *t = &threads[i];
        /* Dropped at a full buffer, or in a chunk the agent dropped. */
        uint64_t lost = t->lost + t->undelivered;

        total_lost += t->lost;
        total_undelivered += t->undelivered;
        if (t->index < 0) {
            if (lost)
                FAIL("tid %u lost events but recorded none", t->tid);
            continue;
        }
        for (int j = 0; j < i; j++)
            if (threads[j].index == t->index)
                FAIL("thread %d recorded under two tids", t->index);
        if (t->index >= MAX_INDEX || expect_events[t->index] < 0) {
            FAIL("unexpected thread index %d", t->index);
            continue;
        }
        if (!lossy && lost)
            FAIL("thread %d lost %llu events (%llu undelivered)", t->index,
                 (unsigned long long)lost, (unsigned long long)t->undelivered);
        if (partial ? t->recorded + lost > (uint64_t)expect_events[t->index]
                    : t->recorded + (lossy ? lost : 0) !=
                          (uint64_t)expect_events[t->index])
            FAIL("thread %d: %llu recorded + %llu lost != %ld", t->index,
                 (unsigned long long)t->recorded, (unsigned long long)lost,
                 expect_events[t->index]);
        expect_events[t->index] = -2; /* seen */
    }
    for (int i = 0; i < MAX_INDEX; i++)
        if (expect_events[i] >= 0 && !partial)
            FAIL("thread %d missing", i);
    if (raw_chunks < (uint64_t)min_raw)
        FAIL("%llu raw (crash-path) chunks, expected at least %ld",
             (unsigned long long)raw_chunks, min_raw);
    if (require_lost && !total_lost)
        FAIL("no event was lost: the buffer was not small enough");

    printf("records=%llu lost=%llu undelivered=%llu orphan_lost=%llu chunks=%llu "
           "raw_chunks=%llu lost_chunks=%llu strings=%u tids=%d pid=%u\n",
           (unsigned long long)total_records, (unsigned long long)total_lost,
           (unsigned long long)total_undelivered, (unsigned long long)orphan_lost, (unsigned long long)st->chunks,
           (unsigned long long)raw_chunks,
           (unsigned long long)chunk_lost, nstrs, nthreads,
           hello ? hello->h.pid : 0);
    gt__framer_free(f);
    if (failure) {
        fprintf(stderr, "agent_check: %s: %s\n", argv[1], failure);
        return 1;
    }
    return 0;
}
