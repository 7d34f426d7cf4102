/*
 * A writer's lifecycle: one per output of a stream (the main one, and one
 * per capture window: window.c), all reading the one struct gt__cstream
 * they were created with, each saying what happened to its own emitter
 * (emit.h), which its kind made with it.
 *
 * A writer owns its tracks, thread stacks, correlation maps, layers, its
 * anomaly counts and its emitter. It is fed records by gt__writer_record
 * (records.c) between gt__writer_chunk_begin and gt__writer_chunk_end,
 * and closed by gt__writer_close, which closes the spans still open at
 * the last time it saw and then its output.
 */
#include <errno.h>

#include "common/alloc.h"
#include "daemon/convert/internal.h"

struct gt__writer *gt__writer_create(struct gt__cstream *s,
                                     const struct gt__emit_kind *kind,
                                     int window, uint32_t win_id,
                                     const char *stem, const char *out_path)
{
    struct gt__writer *c = gt__calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->s = s;
    c->window = window;
    c->win_id = win_id;
    const struct gt__emit_src src = {.s = s, .w = c, .an = &c->an,
                                     .err = &c->err, .window = window,
                                     .win_id = win_id, .stem = stem,
                                     .out_path = out_path};
    if (!(c->out = kind->create(kind, &src)))
        goto out_free;
    if (gt__index_init(&c->thread_ix, 2 * GT__MAX_THREADS))
        goto out_free;
    if (gt__bmap_init(&c->nodes, s->node_map_cap) ||
        gt__bmap_init(&c->ext, GT__CORR_MAP_CAP) ||
        gt__bmap_init(&c->api, GT__CORR_MAP_CAP) ||
        gt__bmap_init(&c->kpend, GT__CORR_MAP_CAP) ||
        gt__bmap_init(&c->wait_idx, GT__WAIT_CAP))
        goto out_free;
    c->wait = gt__calloc(GT__WAIT_CAP, sizeof(*c->wait));
    c->streams = gt__calloc(2 * GT__MAX_STREAMS, sizeof(*c->streams));
    if (!c->wait || !c->streams)
        goto out_free;
    return c;

out_free:
    gt__writer_free(c);
    return NULL;
}

void gt__writer_free(struct gt__writer *c)
{
    if (!c)
        return;
    gt__emit_free(c->out);
    for (uint32_t i = 0; i < c->nthreads; i++) {
        gt__free(c->threads[i].scopes.e);
        gt__free(c->threads[i].held);
        gt__free(c->threads[i].ranges);
        gt__free(c->threads[i].nodes.e);
        gt__free(c->threads[i].cfwd);
    }
    gt__free(c->ctouched);
    gt__free(c->cring);
    gt__free(c->cjoin);
    if (c->capi_ready)
        gt__bmap_free(&c->capi);
    gt__free(c->threads);
    gt__index_free(&c->thread_ix);
    for (uint32_t i = 1; i < c->ntracks; i++)
        gt__free(c->tracks[i].name);
    gt__free(c->tracks);
    gt__free(c->procs);
    gt__bmap_free(&c->nodes);
    gt__bmap_free(&c->ext);
    gt__bmap_free(&c->api);
    gt__bmap_free(&c->kpend);
    gt__free(c->streams);
    gt__bmap_free(&c->wait_idx);
    gt__free(c->wait);
    gt__layers_free(c);
    gt__free(c);
}

uint64_t gt__writer_anomalies(const struct gt__writer *c)
{
    uint64_t n = 0;
#define GT__ANOM_ADD(f) n += c->an.f;
    GT__ANOMALIES(GT__ANOM_ADD)
#undef GT__ANOM_ADD
    return n;
}

void gt__anomalies_add(struct gt__anomalies *dst,
                       const struct gt__anomalies *src)
{
#define GT__ANOM_ADD(f) dst->f += src->f;
    GT__ANOMALIES(GT__ANOM_ADD)
#undef GT__ANOM_ADD
}

/* ------------------------------------------------------------ chunks */

void gt__writer_chunk_begin(struct gt__writer *c,
                            const struct gt_chunk_header *h)
{
    c->chunks++;
    c->records += h && !c->window ? h->record_count : 0;
    c->cur = 0; /* each chunk names its threads again */
}

void gt__writer_chunk_end(struct gt__writer *c)
{
    gt__nodes_chunk_end(c, 0);
    gt__layers_chunk_end(c);
    gt__emit_chunk_end(c->out);
}

/* ------------------------------------------------------------ close */

/* Closes everything still open at the last time seen, innermost first. */
void gt__writer_close_open(struct gt__writer *c)
{
    uint64_t end = c->max_ts;
    for (uint32_t i = 0; i < c->nthreads; i++) {
        struct gt__stack *s = &c->threads[i].nodes;
        while (s->depth > 0) {
            struct gt__open o = s->e[--s->depth];
            c->an.closed_at_finish++;
            if (s->depth > 0 && end > o.ts) /* not its parent's own time */
                s->e[s->depth - 1].nested_ns += end - o.ts;
            gt__emit_node(c, &c->threads[i], &o, end < o.ts ? o.ts : end, 1);
        }
        s = &c->threads[i].scopes;
        while (s->depth > 0) {
            struct gt__open o = s->e[--s->depth];
            c->an.closed_at_finish++;
            gt__scope_closed(c, &c->threads[i], &o, end < o.ts ? o.ts : end,
                             1);
        }
    }
    while (c->nopen_win > 0) {
        struct gt__window w = c->open_win[--c->nopen_win];
        c->an.windows_unmatched++;
        w.end = end < w.begin ? w.begin : end;
        gt__window_done(c, &w);
    }
}

int gt__writer_close(struct gt__writer *c)
{
    int rc;
    gt__writer_close_open(c);
    gt__nodes_chunk_end(c, 1);
    gt__layers_finish(c);
    c->finished = 1;
    rc = gt__emit_close(c->out);
    if (rc && !c->err)
        c->err = rc;
    return c->err;
}
