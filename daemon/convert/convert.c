/*
 * The converter: wire records -> Chrome Trace Event JSON (convert.h is the
 * contract, schema/trace-output.md the normative output format).
 *
 * Design (internal.h has the types):
 *
 *   struct gt__conv      this file: the public handle of one stream;
 *    |- gt__cstream      stream.c: everything per stream, kept once and
 *    |                   shared (identity, time base, strings, thread
 *    |                   names, clocks, lost counts, warnings, window
 *    |                   history, every file's path)
 *    |- main writer      writer.c, records.c, layers.c, ...: one output's
 *    |                   model, reading the stream and saying what
 *    |                   happened to its emitter (emit.h; the Chrome
 *    |                   JSON one: emit_chrome.c, files.c)
 *    `- window writers   the same, one per capture window open now
 *
 * window.c routes each record: metadata records change the stream once
 * and then reach every writer; the others go to the one writer whose
 * window segment (or CUDA correlation) they belong to, or to main.
 * records.c's table gives each record type its size, route and handlers.
 * Dependencies point down: this file -> window.c -> writers -> stream.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "daemon/convert/internal.h"
#include "daemon/convert/names.h"

/* ------------------------------------------------------------ lifecycle */

struct gt__conv *gt__conv_create_kind(const struct gt__conv_opts *opts,
                                      const struct gt__emit_kind *kind)
{
    struct gt__conv *c = gt__calloc(1, sizeof(*c));
    if (!c)
        goto out_err;
    c->kind = kind;
    if (gt__cstream_init(&c->s, opts))
        goto out_free;
    c->main = gt__writer_create(&c->s, c->kind, 0, 0, c->s.stem,
                                c->s.out_path);
    if (!c->main)
        goto out_free;
    return c;

out_free:
    gt__conv_free(c);
out_err:
    errno = ENOMEM;
    return NULL;
}

struct gt__conv *gt__conv_create(const struct gt__conv_opts *opts)
{
    if (!opts || (!opts->out_path && (!opts->out_dir || !opts->stem))) {
        errno = EINVAL;
        return NULL;
    }
    return gt__conv_create_kind(opts, &gt__chrome_kind);
}

void gt__conv_free(struct gt__conv *c)
{
    if (!c)
        return;
    gt__win_free(c);
    gt__writer_free(c->main);
    gt__files_drop_cut(&c->s);
    gt__cstream_close(&c->s);
    gt__free(c);
}

size_t gt__conv_files(const struct gt__conv *c, const char *const **paths)
{
    static const char *const none[1] = {NULL};
    *paths = c->s.all_paths ? (const char *const *)c->s.all_paths : none;
    return c->s.nall;
}

int32_t gt__conv_rank(const struct gt__conv *c)
{
    return c->s.rank;
}

/* ------------------------------------------------------------ restem */

/* A file's new name, when nothing is there yet (never clobbers). */
static int rename_noreplace(const char *from, const char *to)
{
    if (link(from, to) != 0)
        return -errno;
    (void)unlink(from);
    return 0;
}

/* The index entry of a renamed file follows it (repair.h). */
static void restem_index(const struct gt__cstream *s, const char *from,
                         const char *to)
{
    char *a = NULL, *b = NULL;
    const char *fb = strrchr(from, '/'), *tb = strrchr(to, '/');

    if (!s->index_dir || !fb || !tb)
        return;
    if (asprintf(&a, "%s%s", s->index_dir, fb) >= 0 &&
        asprintf(&b, "%s%s", s->index_dir, tb) >= 0 && access(a, F_OK) == 0)
        (void)rename_noreplace(a, b);
    free(a);
    free(b);
}

int gt__conv_restem(struct gt__conv *c, const char *stem)
{
    struct gt__cstream *s = &c->s;
    char *from = NULL, *to = NULL, *nstem = gt__strdup(stem);
    int rc = -ENOMEM;

    if (!s->stem || !s->out_dir || s->out_path) {
        rc = -EINVAL;
        goto out;
    }
    if (!nstem || asprintf(&from, "%s/%s", s->out_dir, s->stem) < 0 ||
        asprintf(&to, "%s/%s", s->out_dir, stem) < 0)
        goto out;
    for (size_t i = 0; i < s->nall; i++) {
        char *old = gt__strdup(s->all_paths[i]);
        if (!old)
            goto out;
        if (gt__path_restem(&s->all_paths[i], from, to) == 1) {
            if (rename_noreplace(old, s->all_paths[i]) != 0) {
                gt__free(s->all_paths[i]); /* taken: that file keeps its name */
                s->all_paths[i] = old;
                old = NULL;
            } else {
                restem_index(s, old, s->all_paths[i]);
            }
        }
        gt__free(old);
    }
    for (uint32_t i = 0; i < s->nwinfo; i++)
        gt__file_path_restem((char **)&s->winfo[i].file, from, to);
    gt__emit_restem(c->main->out, from, to, s->stem, stem);
    for (uint32_t i = 0; i < c->nwout; i++)
        gt__emit_restem(c->wout[i].sub->out, from, to, s->stem, stem);
    gt__free(s->stem);
    s->stem = nstem;
    nstem = NULL;
    rc = 0;
out:
    free(from);
    free(to);
    gt__free(nstem);
    return rc;
}

int gt__conv_flush(struct gt__conv *c)
{
    int rc = gt__emit_flush(c->main->out);

    for (uint32_t i = 0; i < c->nwout; i++) {
        int wrc = gt__emit_flush(c->wout[i].sub->out);
        if (wrc && !rc)
            rc = wrc;
    }
    return rc;
}

int gt__conv_ack_mark(struct gt__conv *c)
{
    int rc;

    if (!c->s.ack_marks)
        return gt__conv_flush(c);
    rc = gt__emit_mark(c->main->out);
    for (uint32_t i = 0; i < c->nwout; i++) {
        int wrc = gt__emit_mark(c->wout[i].sub->out);
        if (wrc && !rc)
            rc = wrc;
    }
    if (rc == 0) {
        c->s.npend = 0; /* in the files up to the mark */
        c->s.marked_done = c->s.files_done;
    }
    return rc;
}

static int full(const struct gt__writer *w)
{
    return w->err == -ENOSPC || w->err == -EDQUOT;
}

int gt__conv_disk_full(const struct gt__conv *c)
{
    int f = full(c->main);

    for (uint32_t i = 0; i < c->nwout; i++)
        f |= full(c->wout[i].sub);
    return f;
}

/* ------------------------------------------------------------ disk full */

/* Adds n records of tid to table t (past GT__MAX_TCOUNT threads, tid 0's
 * entry takes them: still counted, no longer attributed). A table is
 * emptied by setting *nt to 0, so an entry taken anew starts at 0: the
 * pending table is emptied at every mark and every pause, and its old
 * counts, already in a file or already counted, must not come back. */
static void tcount_add(struct gt__tcount *t, uint32_t *nt, uint32_t tid,
                       uint64_t n)
{
    uint32_t i;

    if (n == 0)
        return;
    for (i = 0; i < *nt && t[i].tid != tid; i++)
        ;
    if (i == *nt) {
        if (*nt == GT__MAX_TCOUNT) {
            tid = 0;
            for (i = 0; i < *nt && t[i].tid != 0; i++)
                ;
            if (i == *nt)
                i = *nt - 1; /* its thread's count goes to tid 0 too */
        } else {
            (*nt)++;
            t[i].n = 0;
        }
        t[i].tid = tid;
    }
    t[i].n += n;
}

/* Records the agent makes on a thread's behalf, as its undelivered counts
 * do (schema/wire.md): everything after a GT_R_THREAD but the records the
 * agent's streamer adds itself. */
static int own_record(uint16_t type)
{
    return type != GT_R_THREAD && type != GT_R_THREAD_INFO &&
           type != GT_R_LOST && type != GT_R_GOODBYE &&
           type != GT_R_PROCESS_INFO;
}

/* Counts a chunk's records per thread into t. @return how many. */
static uint64_t count_chunk(struct gt__tcount *t, uint32_t *nt,
                            const uint8_t *records, size_t raw_size)
{
    struct gt__rec_iter it;
    const uint8_t *rec;
    uint16_t type, size;
    uint32_t tid = 0;
    uint64_t run = 0, all = 0;
    int have = 0;

    gt__rec_iter_init(&it, records, raw_size);
    while (gt__rec_next(&it, &type, &size, &rec) == 1) {
        if (type == GT_R_THREAD) {
            struct gt_r_thread r;
            if (gt__rec_get(rec, size, &r, sizeof(r)) != 0)
                continue;
            tcount_add(t, nt, tid, run);
            run = 0;
            tid = r.tid;
            have = 1;
        } else if (have && own_record(type)) {
            run++;
            all++;
        }
    }
    tcount_add(t, nt, tid, run);
    return all;
}

/* What was converted since the last mark is lost with the cut files. */
static void pend_lost(struct gt__cstream *s)
{
    for (uint32_t i = 0; i < s->npend; i++) {
        tcount_add(s->dfull, &s->ndfull, s->pend[i].tid, s->pend[i].n);
        s->lost_disk_full += s->pend[i].n;
    }
    s->npend = 0;
}

void gt__conv_disk_pause(struct gt__conv *c)
{
    pend_lost(&c->s);
    gt__emit_cut(c->main->out);
    for (uint32_t i = 0; i < c->nwout; i++)
        gt__emit_cut(c->wout[i].sub->out);
}

/*
 * Records not converted (a chunk skipped, or the rest of one cut short
 * by a full disk): what the stream says of itself still holds: the
 * agent's cumulative lost counts (a stream ending now has no later ones),
 * its goodbye (it ended the stream: not truncated) and its job route.
 */
static void stream_fact(struct gt__conv *c, uint16_t type, uint16_t size,
                        const uint8_t *rec)
{
    if (type == GT_R_LOST && size == sizeof(struct gt_r_lost))
        gt__cs_on_lost(&c->s, rec, size);
    else if (type == GT_R_GOODBYE)
        gt__cs_on_goodbye(&c->s, rec, size);
    else if (type == GT_R_JOB_ROUTE && size == sizeof(struct gt_r_job_route))
        gt__cs_on_job_route(&c->s, rec, size);
}

static void stream_facts(struct gt__conv *c, struct gt__rec_iter *it)
{
    const uint8_t *rec;
    uint16_t type, size;

    while (gt__rec_next(it, &type, &size, &rec) == 1)
        stream_fact(c, type, size, rec);
}

void gt__conv_skip(struct gt__conv *c, const uint8_t *records, size_t raw_size)
{
    struct gt__rec_iter it;

    c->s.lost_disk_full += count_chunk(c->s.dfull, &c->s.ndfull, records,
                                       raw_size);
    gt__rec_iter_init(&it, records, raw_size);
    stream_facts(c, &it);
}

int gt__conv_resume(struct gt__conv *c)
{
    int rc = gt__files_finish_cut(&c->s);

    if (rc)
        return rc;
    /* The next main file exists at once, so the trace says what the full
     * disk cost even if nothing else comes. */
    if (gt__emit_open(c->main->out) < 0)
        rc = c->main->err;
    if (rc == 0 && gt__conv_flush(c) != 0)
        rc = c->main->err;
    /* Full again at once: that file is cut too (nothing was converted
     * since the pause), so the writer is not left stopped on the error
     * and the next try starts clean. */
    if (rc == -ENOSPC || rc == -EDQUOT)
        gt__conv_disk_pause(c);
    return rc;
}

int gt__conv_goodbye(const struct gt__conv *c)
{
    return c->s.goodbye;
}

int gt__conv_job_route(const struct gt__conv *c)
{
    return c->s.job_route;
}

enum gt__ops_detail gt__conv_ops_detail(const struct gt__conv *c)
{
    uint64_t n = c->main->total_ops;

    if (c->s.hello_flags & GT_HELLO_OPS)
        return GT__OPS_ALL;
    for (uint32_t i = 0; i < c->nwout; i++)
        n += c->wout[i].sub->total_ops;
    return n ? GT__OPS_WINDOWS : GT__OPS_OFF;
}

uint64_t gt__conv_events(const struct gt__conv *c)
{
    struct gt__emit_stats st;
    gt__emit_stats(c->main->out, &st);
    uint64_t n = st.events + c->win_events;
    for (uint32_t i = 0; i < c->nwout; i++) {
        gt__emit_stats(c->wout[i].sub->out, &st);
        n += st.events;
    }
    return n;
}

void gt__conv_summary(const struct gt__conv *c, struct gt__conv_summary *out)
{
    const struct gt__writer *m = c->main;
    struct gt__emit_stats st;
    memset(out, 0, sizeof(*out));
    out->events = gt__conv_events(c);
    out->files = c->s.nall;
    gt__emit_stats(m->out, &st);
    out->bytes = st.bytes + c->win_bytes;
    for (uint32_t i = 0; i < c->nwout; i++) {
        gt__emit_stats(c->wout[i].sub->out, &st);
        out->bytes += st.bytes;
    }
    out->anomalies = c->win_anomalies + gt__writer_anomalies(m);
    out->chunks = m->chunks;
    out->records = m->records;
    out->lost_events = c->s.lost_sum[GT_LOST_EVENTS];
    out->lost_cupti = c->s.lost_sum[GT_LOST_CUPTI];
    out->lost_chunks = c->s.lost_sum[GT_LOST_CHUNKS];
}

/* ------------------------------------------------------------ feeding */

int gt__conv_hello(struct gt__conv *c, const struct gt__hello_info *hello)
{
    /* The file is created with its first event: a stream that records
     * only inside capture windows leaves no empty main trace. */
    return gt__cstream_hello(&c->s, hello);
}

int gt__conv_chunk(struct gt__conv *c, const struct gt_chunk_header *h,
                   const uint8_t *records, size_t raw_size)
{
    struct gt__writer *m = c->main;
    struct gt__rec_iter it;
    uint16_t type, size;
    const uint8_t *rec;
    int rc;
    /* Records since the last mark: a full disk cuts files back to it. */
    if (c->s.ack_marks)
        (void)count_chunk(c->s.pend, &c->s.npend, records, raw_size);
    gt__rec_iter_init(&it, records, raw_size);
    if (m->err) {
        /* Output failed already: nothing more is converted, but what
         * the stream says of itself still counts. */
        stream_facts(c, &it);
        return m->err;
    }
    gt__cstream_chunk_begin(&c->s, h);
    gt__writer_chunk_begin(m, h);
    gt__win_chunk_begin(c, h);
    while ((rc = gt__rec_next(&it, &type, &size, &rec)) == 1 && !m->err)
        gt__win_record(c, type, size, rec);
    if (rc == 1) {
        /* A write failed (a full disk) before the chunk's end: the record
         * just read and the rest are not converted, but their lost counts
         * and goodbye still count (the daemon's status reads them here). */
        stream_fact(c, type, size, rec);
        stream_facts(c, &it);
    } else if (rc < 0) {
        m->an.bad_records++; /* the rest of the chunk is unreadable */
    }
    gt__writer_chunk_end(m);
    gt__win_chunk_end(c);
    if (!m->err && c->s.ack_marks && c->s.files_done != c->s.marked_done) {
        /* A file was finished since the last mark (rotated, or a window
         * done): its events are on disk, and a cut must not count them as
         * lost as well. Marking every open file now puts the rest of what
         * was converted there too, so a full disk later counts only what
         * comes after. A mark a full disk refuses pauses the stream as
         * any write would (the finished file's records then count twice:
         * schema/reliability.md). */
        rc = gt__conv_ack_mark(c);
        if (rc && gt__conv_disk_full(c))
            return rc;
    }
    return m->err;
}

/* Whether the stream has losses to report. A stream without events but
 * with these (an agent's last connection after its backoff, a daemon that
 * started late: undelivered counts and a goodbye) must still leave a
 * file, or its counts are in none. */
static int has_losses(const struct gt__conv *c)
{
    for (size_t i = 0; i < sizeof(c->s.lost_sum) / sizeof(c->s.lost_sum[0]); i++)
        if (c->s.lost_sum[i])
            return 1;
    return c->s.lost_disk_full || (c->s.have_stats && c->s.stats.chunks_lost);
}

int gt__conv_finish(struct gt__conv *c, const struct gt__framer_stats *stats,
                    int truncated)
{
    struct gt__writer *m = c->main;
    int rc;
    if (m->finished)
        return m->err;
    if (!c->s.have_base)
        c->s.have_base = 1; /* nothing seen: base 0 */
    /* The agent's goodbye is its last record: a stream ending without it
     * was cut short (killed process, cut connection), in a file as on a
     * socket. */
    c->s.truncated = truncated != 0 || !c->s.goodbye;
    m->truncated = c->s.truncated;
    if (stats) {
        c->s.stats = *stats;
        c->s.have_stats = 1;
    }
    /* Windows first: their files are complete whatever happens to main. */
    rc = gt__win_finish_all(c);
    if (rc && !m->err)
        m->err = rc;
    /* Closing spans still open may write the first events; a stream with
     * none keeps no main file unless the caller named it or it has losses
     * to report (and no window file stands in for it). */
    gt__writer_close_open(m);
    if (!gt__emit_begun(m->out) && !m->err && c->s.nall == 0 &&
        (c->s.keep_empty_main || has_losses(c)) && (rc = gt__emit_open(m->out)))
        return rc;
    return gt__writer_close(m);
}
