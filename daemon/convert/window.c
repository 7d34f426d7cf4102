/*
 * Capture windows: one trace file (set) per window.
 *
 * The agent writes a window as one or more segments WINDOW_BEGIN(id) ..
 * WINDOW_END(id), then WINDOW_DONE(id), and records only inside segments
 * (plus metadata). Each window gets its own writer (struct gt__writer,
 * writer.c), created at its first WINDOW_BEGIN and closed and freed at
 * WINDOW_DONE, so a window file is built by exactly the code that builds
 * any trace: its own tracks, layer spans, flows, rotation and metadata.
 * This file only routes, for the stream's converter (struct gt__conv):
 *
 *   - metadata records (strings, process and thread info, thread context,
 *     clock pairs, lost counts, warnings) change the shared stream state
 *     once (stream.c), then every writer alive gets the record for its
 *     own part of it (a renamed track, a counter in its file); a window
 *     writer reads the stream's strings, names and clocks, never a copy,
 *     so each file names its threads and strings alone;
 *   - records between WINDOW_BEGIN(id) and WINDOW_END(id), in stream order,
 *     go to window id (the agent keeps each thread's order and drains all
 *     threads every 20 ms); everything else goes to main, whose file is
 *     created only with its first event (emit_chrome.c);
 *   - a segment begun by WINDOW_BEGIN_SHARED (capture was on outside the
 *     window too) is the window's and main's: its records go to both, so
 *     the main trace keeps everything it would have had without the
 *     trigger; only node creations the agent replays into the window
 *     (timed before the segment began: main has the original) stay out
 *     of main. Main also gets the window's begin and end, so its
 *     "Capture windows" track shows where the window was;
 *   - CUDA API records (CUPTI delivers them late, in batches) go to the
 *     window whose segment contains their start time, and GPU activity and
 *     external correlations follow their launch's correlation id to its
 *     window until that window's WINDOW_DONE; after it, they go to main
 *     (the window file is complete and closed by then).
 *
 * Memory: at most GT__MAX_WIN_OPEN window writers at once (the agent
 * has one open at a time; a stream that opens more cuts the oldest, which
 * is counted as windows_unmatched), a fixed correlation map, and the last
 * GT__MAX_WINDOWS windows' descriptions for status.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/alloc.h"
#include "daemon/convert/internal.h"
#include "daemon/convert/names.h"

/* ------------------------------------------------------------ lookups */

static int wout_index(const struct gt__conv *c, uint32_t id)
{
    for (uint32_t i = 0; i < c->nwout; i++)
        if (c->wout[i].id == id)
            return (int)i;
    return -1;
}

size_t gt__conv_windows(const struct gt__conv *c,
                        const struct gt__conv_window **out)
{
    *out = c->s.winfo;
    return c->s.nwinfo;
}

/* ------------------------------------------------------------ spec text */

/*
 * Copies the value of key= from a trigger spec ("layer=a.b,phase=both,...")
 * into out. @return its length, 0 when absent.
 */
static size_t spec_field(const char *spec, size_t len, const char *key,
                         char *out, size_t cap)
{
    size_t kl = strlen(key), i = 0;
    while (i < len) {
        size_t j = i;
        while (j < len && spec[j] != ',')
            j++;
        if (j - i > kl && memcmp(spec + i, key, kl) == 0 && spec[i + kl] == '=') {
            size_t n = j - i - kl - 1;
            if (n >= cap)
                n = cap - 1;
            memcpy(out, spec + i + kl + 1, n);
            out[n] = '\0';
            return n;
        }
        i = j + 1;
    }
    out[0] = '\0';
    return 0;
}

static const char *phase_name(const char *v)
{
    static const char *const names[] = {"forward", "backward", "both"};
    if (!*v)
        return "backward"; /* the spec's default */
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(v, names[i]) == 0)
            return names[i];
    return "unknown";
}

/* ------------------------------------------------------------ create */

/* Fills info (id, iteration, spec, layer, phase) for window r. */
static int win_describe(struct gt__cstream *s, const struct gt_r_window *r,
                        struct gt__conv_window *info)
{
    char layer[GT_STRING_MAX + 1], phase[16];
    uint32_t sl = 0;
    const char *spec = "";

    if (r->spec && r->spec < s->nstrs && s->strs[r->spec].raw) {
        spec = s->strs[r->spec].raw;
        sl = s->strs[r->spec].raw_len;
    }
    spec_field(spec, sl, "phase", phase, sizeof(phase));
    if (!spec_field(spec, sl, "layer", layer, sizeof(layer))) {
        /* No spec (or another agent's spelling): the opening layer. */
        if (r->layer && r->layer < s->nstrs && s->strs[r->layer].raw)
            snprintf(layer, sizeof(layer), "%s", s->strs[r->layer].raw);
        else
            snprintf(layer, sizeof(layer), "window");
    }
    info->id = r->id;
    info->iteration = r->iteration;
    info->phase = phase_name(phase);
    info->spec = gt__strdup(spec);
    info->layer = gt__strdup(layer);
    return info->spec && info->layer ? 0 : -ENOMEM;
}

/*
 * The window's file name: the stream's with -w<id>-<layer>-<phase>-it<N>
 * (and -dup<k> for a reused id) before .json. *stem or *out_path is set,
 * allocated with malloc. @return 0 or -ENOMEM.
 */
static int win_name(struct gt__cstream *s, const struct gt__conv_window *info,
                    char **stem, char **out_path)
{
    char part[GT__NAME_PART_MAX + 1], dup[32] = "";
    int n;

    gt__sanitize_part(info->layer, strlen(info->layer), part, sizeof(part));
    /* Agents number windows 1, 2, 3...; an id that does not increase
     * (hostile or broken input) would reuse an earlier window's file name
     * and overwrite it, so it gets a suffix unique within the stream. */
    if (info->id <= s->win_max_id)
        snprintf(dup, sizeof(dup), "-dup%llu",
                 (unsigned long long)s->win_created);
    else
        s->win_max_id = info->id;
    s->win_created++;
    if (s->out_path) {
        size_t pl = strlen(s->out_path), ext = gt__trace_ext_len(s->out_path);
        const char *sfx = ext ? s->out_path + pl - ext : ".json";
        n = asprintf(out_path, "%.*s-w%u-%s-%s-it%llu%s%s", (int)(pl - ext),
                     s->out_path, info->id, part, info->phase,
                     (unsigned long long)info->iteration, dup, sfx);
    } else {
        n = asprintf(stem, "%s-w%u-%s-%s-it%llu%s", s->stem, info->id, part,
                     info->phase, (unsigned long long)info->iteration, dup);
    }
    return n < 0 ? -ENOMEM : 0;
}

/*
 * A new writer for window r. It shares the stream's state; what it needs
 * of its own is one thread per named thread of main, in main's order (so
 * its tracks sort as main's do), and the current thread when a chunk is
 * being read.
 */
static struct gt__writer *win_create(struct gt__conv *c,
                                     const struct gt_r_window *r,
                                     struct gt__conv_window *info)
{
    char *stem = NULL, *out_path = NULL;
    struct gt__writer *w = NULL;

    if (win_describe(&c->s, r, info) || win_name(&c->s, info, &stem, &out_path))
        goto out;
    w = gt__writer_create(&c->s, c->kind, 1, r->id, stem, out_path);
    if (!w)
        goto out;
    for (uint32_t i = 0; i < c->main->nthreads; i++) {
        uint32_t tid = c->main->threads[i].os_tid;
        if (gt__cstream_tname(&c->s, tid))
            (void)gt__thread_get(w, tid);
    }
    if (c->s.have_cur) {
        /* Mid-chunk: the current thread context carries over. */
        struct gt__wthread *th = gt__thread_get(w, c->s.cur_tid);
        w->cur = th ? (uint32_t)(th - w->threads) + 1 : 0;
    }
    w->chunks = 1; /* inside the chunk being read */
out:
    free(stem);
    free(out_path);
    return w;
}

/* ------------------------------------------------------------ close */

/* A writer's error becomes the stream's (main's, which stops it). */
static void win_error(struct gt__conv *c, int rc)
{
    if (rc && !c->main->err)
        c->main->err = rc;
}

/* Finishes window writer i: its last file is closed and complete. */
static void win_close(struct gt__conv *c, uint32_t i, int state)
{
    struct gt__writer *w = c->wout[i].sub;
    struct gt__conv_window *info = gt__winfo_find(&c->s, c->wout[i].id);

    if (info)
        info->state = state; /* its last file says so */
    w->truncated = state == GT__CONV_WIN_CUT && c->s.truncated;
    win_error(c, gt__writer_close(w));
    struct gt__emit_stats st;
    gt__emit_stats(w->out, &st);
    c->win_events += st.events;
    c->win_bytes += st.bytes;
    c->win_files += st.files;
    c->win_anomalies += gt__writer_anomalies(w);
    gt__writer_free(w);
    memmove(&c->wout[i], &c->wout[i + 1],
            (c->nwout - i - 1) * sizeof(c->wout[0]));
    c->nwout--;
    if (c->route == i + 1)
        c->route = 0;
    else if (c->route > i + 1)
        c->route--;
}

int gt__win_finish_all(struct gt__conv *c)
{
    while (c->nwout > 0) {
        c->main->an.windows_unmatched++;
        win_close(c, 0, GT__CONV_WIN_CUT);
    }
    return c->main->err;
}

void gt__win_free(struct gt__conv *c)
{
    for (uint32_t i = 0; i < c->nwout; i++)
        gt__writer_free(c->wout[i].sub);
    c->nwout = 0;
    if (c->win_corr.e)
        gt__bmap_free(&c->win_corr);
}

/* ------------------------------------------------------------ routing */

/* Whether window id was refused (one of the last refused). */
static int win_was_refused(const struct gt__conv *c, uint32_t id)
{
    uint32_t n = c->nrefused < GT__MAX_WIN_OPEN ? c->nrefused : GT__MAX_WIN_OPEN;
    for (uint32_t k = 0; k < n; k++)
        if (c->refused_id[k] == id)
            return 1;
    return 0;
}

/* WINDOW_BEGIN of a window not open: its writer. @return its index or -1. */
static int win_open(struct gt__conv *c, const struct gt_r_window *r)
{
    struct gt__writer *m = c->main;
    if (win_was_refused(c, r->id))
        return -1; /* a later segment of a refused window */
    if (c->win_begun >= GT__CONV_WIN_PER_STREAM) {
        m->an.windows_refused++;
        c->refused_id[c->nrefused++ % GT__MAX_WIN_OPEN] = r->id;
        return -1;
    }
    c->win_begun++;
    if (c->nwout == GT__MAX_WIN_OPEN) {
        /* The agent never has this many open: bound memory anyway. */
        m->an.windows_unmatched++;
        win_close(c, 0, GT__CONV_WIN_CUT);
    }
    if (!c->win_corr.e && gt__bmap_init(&c->win_corr, GT__WIN_CORR_CAP)) {
        c->win_corr.e = NULL;
        m->an.windows_unmatched++;
        return -1;
    }
    struct gt__conv_window *info = gt__winfo_add(&c->s);
    struct gt__writer *w = info ? win_create(c, r, info) : NULL;
    if (!w) {
        /* Out of memory: the window's records go to main. */
        if (info) {
            gt__winfo_release(info);
            c->s.nwinfo--;
        }
        m->an.windows_unmatched++;
        return -1;
    }
    c->wout[c->nwout] = (struct gt__win_out){.sub = w, .id = r->id};
    return (int)c->nwout++;
}

static void on_window(struct gt__conv *c, uint16_t type, uint16_t size,
                      const uint8_t *rec)
{
    struct gt_r_window r;
    int i, shared = type == GT_R_WINDOW_BEGIN_SHARED;

    if (size != sizeof(r)) {
        c->main->an.bad_records++;
        return;
    }
    memcpy(&r, rec, sizeof(r));
    if (shared) {
        /* Writers see a plain begin. */
        type = r.h.type = GT_R_WINDOW_BEGIN;
        rec = (const uint8_t *)&r;
    }
    gt__see_ts(c->main, r.ts);
    i = wout_index(c, r.id);
    if (type == GT_R_WINDOW_BEGIN && i < 0 && (i = win_open(c, &r)) < 0)
        return;
    if (i < 0 && win_was_refused(c, r.id))
        return; /* the refused window's end: counted as refused already */
    if (i < 0) {
        /* END or DONE of a window never begun (or cut at the cap). */
        c->main->an.windows_unmatched++;
        return;
    }
    struct gt__win_out *o = &c->wout[i];
    struct gt__conv_window *info = gt__winfo_find(&c->s, r.id);
    switch (type) {
    case GT_R_WINDOW_BEGIN:
        if (c->route && c->route != (uint32_t)i + 1) {
            /* Another window's segment never ended: it ends here. */
            c->main->an.windows_unmatched++;
            c->wout[c->route - 1].seg_open = 0;
            c->wout[c->route - 1].seg_end = r.ts;
        }
        c->route = (uint32_t)i + 1;
        o->shared = shared;
        o->sub->shared_window = shared;
        o->seg_open = 1;
        o->seg_begin = r.ts;
        o->seg_end = UINT64_MAX;
        if (info)
            info->segments++;
        gt__writer_record(o->sub, type, size, rec);
        if (shared)
            gt__writer_record(c->main, type, size, rec);
        break;
    case GT_R_WINDOW_END:
        gt__writer_record(o->sub, type, size, rec);
        if (o->shared)
            gt__writer_record(c->main, type, size, rec);
        o->seg_open = 0;
        o->seg_end = r.ts;
        if (c->route == (uint32_t)i + 1)
            c->route = 0;
        break;
    default: /* GT_R_WINDOW_DONE */
        win_close(c, (uint32_t)i, GT__CONV_WIN_DONE);
        break;
    }
}

/* Window writer for a CUDA API call starting at ts, or NULL. */
static struct gt__win_out *win_at(struct gt__conv *c, uint64_t ts)
{
    for (uint32_t i = c->nwout; i > 0; i--) {
        struct gt__win_out *o = &c->wout[i - 1];
        if (ts >= o->seg_begin && ts <= o->seg_end)
            return o;
    }
    return NULL;
}

/*
 * A metadata record: the stream's part once, then each writer's part,
 * each charged with the anomalies the stream's part found (as if each had
 * read the record itself, which is what its file's metadata describes).
 */
static void route_meta(struct gt__conv *c, const struct gt__rec_kind *k,
                       uint16_t size, const uint8_t *rec)
{
    struct gt__cstream *s = &c->s;
    s->note = 0;
    memset(&s->an, 0, sizeof(s->an));
    if (gt__rec_size_ok(k, size) && k->stream)
        k->stream(s, rec, size);
    gt__anomalies_add(&c->main->an, &s->an);
    gt__writer_record(c->main, k->type, size, rec);
    for (uint32_t i = 0; i < c->nwout; i++) {
        gt__anomalies_add(&c->wout[i].sub->an, &s->an);
        gt__writer_record(c->wout[i].sub, k->type, size, rec);
    }
}

static uint32_t rec_u32(const uint8_t *rec, size_t off)
{
    uint32_t v;
    memcpy(&v, rec + off, 4);
    return v;
}

/* A node creation the agent replays into a window (timed before its
 * segment began): the main trace has the original. */
static int replayed(const struct gt__win_out *o, const uint8_t *rec, uint16_t size)
{
    struct gt_r_node_created r;

    if (size != sizeof(r))
        return 0;
    memcpy(&r, rec, sizeof(r));
    return r.ts < o->seg_begin;
}

void gt__win_record(struct gt__conv *c, uint16_t type, uint16_t size,
                    const uint8_t *rec)
{
    const struct gt__rec_kind *k = gt__rec_kind(type);
    struct gt__win_out *o = c->route ? &c->wout[c->route - 1] : NULL;
    int route = k ? k->route : GT__ROUTE_SEGMENT;

    if (route == GT__ROUTE_META) {
        route_meta(c, k, size, rec);
        return;
    }
    if (route == GT__ROUTE_WINDOW) {
        on_window(c, type, size, rec);
        return;
    }
    if (route == GT__ROUTE_API && c->nwout && size == k->size) {
        struct gt_r_cuda_api r;
        memcpy(&r, rec, sizeof(r));
        if (!o)
            o = win_at(c, r.start);
        if (o) {
            struct gt__bmap_val v = {.x = o->id};
            (void)gt__bmap_put(&c->win_corr, 0, r.corr, &v);
        }
    }
    if (route == GT__ROUTE_CORR && k->stream && gt__rec_size_ok(k, size))
        k->stream(&c->s, rec, size); /* NCCL kernels are collectives too */
    if (route == GT__ROUTE_CORR && c->nwout && size >= k->corr_off + 4) {
        const struct gt__bmap_val *v =
            gt__bmap_get(&c->win_corr, 0, rec_u32(rec, k->corr_off));
        int i = v ? wout_index(c, (uint32_t)v->x) : -1;
        if (i >= 0)
            o = &c->wout[i];
    }
    gt__writer_record(o ? o->sub : c->main, type, size, rec);
    if (o && o->shared && !(type == GT_R_NODE_CREATED && replayed(o, rec, size)))
        gt__writer_record(c->main, type, size, rec);
}

void gt__win_chunk_begin(struct gt__conv *c, const struct gt_chunk_header *h)
{
    for (uint32_t i = 0; i < c->nwout; i++)
        gt__writer_chunk_begin(c->wout[i].sub, h);
}

void gt__win_chunk_end(struct gt__conv *c)
{
    for (uint32_t i = 0; i < c->nwout; i++) {
        gt__writer_chunk_end(c->wout[i].sub);
        win_error(c, c->wout[i].sub->err);
    }
}
