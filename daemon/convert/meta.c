/*
 * A writer's part of the records that feed the trace's metadata: lost
 * counts drawn as a counter, warnings as process-scoped instants, the
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
    /* The counter is drawn only in a file that exists: lost counts alone
     * must not create a trace (they are in every file's metadata). */
    uint32_t t = c->s->note & GT__NOTE_CHANGED && c->file_open ? meta_track(c)
                                                               : 0;
    if (!t)
        return;
    char *p = gt__ev_begin(c, t, 128);
    p = GT__LIT(p, "{\"ph\":\"C\",\"name\":\"gradtrace lost\",");
    p = gt__put_pt(c, p, t);
    p = GT__LIT(p, ",\"ts\":");
    p = gt__fmt_us(p, gt__rel(c, c->max_ts));
    p = PUT_KV(p, ",\"args\":{\"events\":", c->s->lost_sum[GT_LOST_EVENTS]);
    p = PUT_KV(p, ",\"cupti\":", c->s->lost_sum[GT_LOST_CUPTI]);
    p = PUT_KV(p, ",\"chunks\":", c->s->lost_sum[GT_LOST_CHUNKS]);
    p = GT__LIT(p, "}}");
    gt__ev_end(c, p);
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
    uint32_t sl = 0, ll = 0;
    const char *spec = w->spec ? gt__str_esc(c, w->spec, &sl) : "";
    const char *layer = w->layer ? gt__str_esc(c, w->layer, &ll) : "";
    char *p = gt__x_open(c, t, "window", w->begin, w->end, sl + ll + 128);
    p = PUT_KV(p, "window #", w->id);
    p = GT__LIT(p, "\",\"args\":{\"spec\":\"");
    p = put_esc(p, spec, sl);
    p = GT__LIT(p, "\",\"layer\":\"");
    p = put_esc(p, layer, ll);
    p = PUT_KV(p, "\",\"iteration\":", w->iter_begin);
    p = GT__LIT(p, "}}");
    gt__ev_end(c, p);
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
    uint32_t t, tl;
    (void)size;
    memcpy(&r, rec, sizeof(r));
    gt__see_ts(c, r.ts);
    t = c->s->note & GT__NOTE_ADDED && c->file_open ? meta_track(c) : 0;
    if (!t)
        return;
    const char *text = gt__str_esc(c, r.text, &tl);
    char *p = gt__ev_begin(c, t, tl + 128);
    p = GT__LIT(p, "{\"ph\":\"i\",\"s\":\"p\",\"cat\":\"warning\",\"name\":\"");
    p = put_esc(p, text, tl);
    p = GT__LIT(p, "\",");
    p = gt__put_pt(c, p, t);
    p = GT__LIT(p, ",\"ts\":");
    p = gt__fmt_us(p, gt__rel(c, r.ts));
    p = PUT_KV(p, ",\"args\":{\"code\":", r.code);
    p = GT__LIT(p, "}}");
    gt__ev_end(c, p);
}

/* The process is named by its rank: rename it when the rank changed. */
void gt__on_process(struct gt__writer *c, const uint8_t *rec, uint16_t size)
{
    (void)rec;
    (void)size;
    if (c->s->note & GT__NOTE_CHANGED && c->nprocs > 0)
        gt__main_proc_rename(c);
}
