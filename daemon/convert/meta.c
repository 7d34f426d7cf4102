/*
 * A writer's part of the records that feed the trace's metadata: lost
 * counts said as a counter, warnings as process-scoped instants, the
 * process renamed with its rank (the stream keeps the values: stream.c),
 * and capture windows drawn as spans on their own track (the writer's own
 * list). All tables are fixed-size; overflow is counted, never grown.
 */
#include <stdio.h>

#include "daemon/convert/internal.h"

/* ------------------------------------------------------------ metadata */

static uint32_t meta_track(struct gt__writer *c)
{
    if (!c->meta_track) {
        gt__main_proc(c);
        c->meta_track = gt__track_new(c, 0, 0, 0, "gradtrace");
    }
    return c->meta_track;
}

/* Draws the stream's lost counts as a counter, when they changed. */
void gt__on_lost(struct gt__writer *c, const uint8_t *rec, uint16_t size)
{
    (void)rec;
    (void)size;
    /* The counter is said only to an output that has begun: lost counts
     * alone must not create a trace (they are in every file's metadata). */
    uint32_t t = c->s->note & GT__NOTE_CHANGED && gt__emit_begun(c->out)
                     ? meta_track(c)
                     : 0;
    if (!t)
        return;
    struct gt__ev ev;
    gt__ev_init(&ev, GT__CAT_LOST, t, c->max_ts, c->max_ts);
    gt__ev_name(&ev, "gradtrace lost");
    gt__ev_u64(&ev, "events", c->s->lost_sum[GT_LOST_EVENTS]);
    gt__ev_u64(&ev, "cupti", c->s->lost_sum[GT_LOST_CUPTI]);
    gt__ev_u64(&ev, "chunks", c->s->lost_sum[GT_LOST_CHUNKS]);
    gt__emit_counter(c->out, &ev);
}

static void emit_window(struct gt__writer *c, const struct gt__window *w)
{
    if (!c->window_track) {
        gt__main_proc(c);
        c->window_track = gt__track_new(c, 0, UINT32_MAX, 3,
                                        "Capture windows");
        if (!c->window_track)
            return;
    }
    uint32_t t = gt__place(c, c->window_track, w->begin, w->end);
    if (!t)
        return;
    struct gt__ev ev;
    char name[32];
    int nl = snprintf(name, sizeof(name), "window #%u", w->id);
    gt__ev_init(&ev, GT__CAT_WINDOW, t, w->begin, w->end);
    gt__ev_name_text(&ev, name, (size_t)nl);
    if (w->spec)
        gt__ev_sid(&ev, "spec", gt__str_known(c, w->spec));
    else
        gt__ev_lit(&ev, "spec", "");
    if (w->layer)
        gt__ev_sid(&ev, "layer", gt__str_known(c, w->layer));
    else
        gt__ev_lit(&ev, "layer", "");
    gt__ev_u64(&ev, "iteration", w->iter_begin);
    gt__emit_slice(c->out, &ev);
}

void gt__window_done(struct gt__writer *c, struct gt__window *w)
{
    c->windows_total++;
    if (c->nwindows < GT__MAX_WINDOWS)
        c->windows[c->nwindows++] = *w;
    emit_window(c, w);
}

void gt__on_window(struct gt__writer *c, const uint8_t *rec, uint16_t size)
{
    struct gt_r_window rr;
    const struct gt_r_window *r = &rr;
    uint16_t type;
    (void)size;
    memcpy(&rr, rec, sizeof(rr));
    type = rr.h.type;
    if (type == GT_R_WINDOW_DONE)
        return; /* window.c closes the window's writer */
    gt__see_ts(c, r->ts);
    if (type == GT_R_WINDOW_BEGIN) {
        if (c->window && !c->win_tid && c->cur)
            c->win_tid = c->threads[c->cur - 1].os_tid;
        if (c->nopen_win == GT__MAX_OPEN_WINDOWS) {
            c->an.windows_unmatched++;
            return;
        }
        c->open_win[c->nopen_win++] = (struct gt__window){
            .id = r->id, .spec = r->spec, .layer = r->layer,
            .begin = r->ts, .iter_begin = r->iteration};
        return;
    }
    for (uint32_t i = 0; i < c->nopen_win; i++) {
        if (c->open_win[i].id != r->id)
            continue;
        struct gt__window w = c->open_win[i];
        c->open_win[i] = c->open_win[--c->nopen_win];
        w.end = r->ts < w.begin ? w.begin : r->ts;
        w.iter_end = r->iteration;
        gt__window_done(c, &w);
        return;
    }
    c->an.windows_unmatched++;
}

/* The writer's part of a warning: its time, and an instant in its file. */
void gt__on_warning(struct gt__writer *c, const uint8_t *rec, uint16_t size)
{
    struct gt_r_warning r;
    struct gt__ev ev;
    uint32_t t;
    (void)size;
    memcpy(&r, rec, sizeof(r));
    gt__see_ts(c, r.ts);
    t = c->s->note & GT__NOTE_ADDED && gt__emit_begun(c->out) ? meta_track(c)
                                                              : 0;
    if (!t)
        return;
    gt__ev_init(&ev, GT__CAT_WARNING, t, r.ts, r.ts);
    ev.scope = GT__SCOPE_PROCESS;
    gt__ev_name_sid(&ev, gt__str_known(c, r.text));
    gt__ev_u64(&ev, "code", r.code);
    gt__emit_instant(c->out, &ev);
}

/* The process is named by its rank: rename it when the rank changed. */
void gt__on_process(struct gt__writer *c, const uint8_t *rec, uint16_t size)
{
    (void)rec;
    (void)size;
    if (c->s->note & GT__NOTE_CHANGED && c->nprocs > 0)
        gt__main_proc_rename(c);
}
