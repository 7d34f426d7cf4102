/*
 * Records that feed the trace's metadata: lost counts (also drawn as a
 * counter), clock pairs, capture windows (also spans on their own track),
 * warnings (also process-scoped instants) and process information. All
 * tables are fixed-size; overflow is counted, never grown.
 */
#include <stdio.h>

#include "daemon/convert/internal.h"

/* ------------------------------------------------------------ metadata */

static uint32_t meta_track(struct gt__conv *c)
{
    if (!c->meta_track) {
        gt__main_proc(c);
        c->meta_track = gt__track_new(c, 0, 0, 0, "gradtrace");
    }
    return c->meta_track;
}

void gt__on_lost(struct gt__conv *c, const struct gt_r_lost *r)
{
    uint32_t i;
    if (r->what < GT_LOST_EVENTS || r->what > GT_LOST_CHUNKS) {
        c->an.bad_records++;
        return;
    }
    for (i = 0; i < c->nlost; i++)
        if (c->lost[i].tid == r->tid && c->lost[i].what == r->what)
            break;
    if (i == c->nlost) {
        if (c->nlost == GT__MAX_LOST) {
            c->an.threads_dropped++;
            return;
        }
        c->lost[c->nlost++] = (struct gt__lost){r->tid, r->what, 0};
    }
    uint64_t old = c->lost[i].count;
    if (r->count == old)
        return;
    /* Cumulative counts: the newest record replaces the older one. */
    c->lost_sum[r->what] = c->lost_sum[r->what] - old + r->count;
    c->lost[i].count = r->count;
    /* The counter is drawn only in a file that exists: lost counts alone
     * must not create a trace (they are in every file's metadata). */
    uint32_t t = c->file_open ? meta_track(c) : 0;
    if (!t)
        return;
    char *p = gt__ev_begin(c, t, 128);
    p = GT__LIT(p, "{\"ph\":\"C\",\"name\":\"gradtrace lost\",");
    p = gt__put_pt(c, p, t);
    p = GT__LIT(p, ",\"ts\":");
    p = gt__fmt_us(p, gt__rel(c, c->max_ts));
    p = PUT_KV(p, ",\"args\":{\"events\":", c->lost_sum[GT_LOST_EVENTS]);
    p = PUT_KV(p, ",\"cupti\":", c->lost_sum[GT_LOST_CUPTI]);
    p = PUT_KV(p, ",\"chunks\":", c->lost_sum[GT_LOST_CHUNKS]);
    p = GT__LIT(p, "}}");
    gt__ev_end(c, p);
}

void gt__on_clock(struct gt__conv *c, const struct gt_r_clock_sync *r)
{
    if (r->device < 0) {
        if (c->host_pairs++ == 0) {
            c->host_first_mono = r->mono_ns;
            c->host_first_real = r->real_ns;
        }
        c->host_last_mono = r->mono_ns;
        c->host_last_real = r->real_ns;
        return;
    }
    uint32_t i;
    for (i = 0; i < c->ndevclk; i++)
        if (c->devclk[i].device == r->device)
            break;
    if (i == c->ndevclk) {
        if (c->ndevclk == GT__MAX_DEVICES)
            return;
        c->ndevclk++;
        c->devclk[i].device = r->device;
    }
    struct gt__dev_clock *d = &c->devclk[i];
    d->count++;
    d->mono_ns = r->mono_ns;
    d->device_ts = r->device_ts;
    d->uncertainty_ns = r->uncertainty_ns;
}

static void emit_window(struct gt__conv *c, const struct gt__window *w)
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

void gt__window_done(struct gt__conv *c, struct gt__window *w)
{
    c->windows_total++;
    if (c->nwindows < GT__MAX_WINDOWS)
        c->windows[c->nwindows++] = *w;
    emit_window(c, w);
}

void gt__on_window(struct gt__conv *c, uint16_t type,
                      const struct gt_r_window *r)
{
    if (type == GT_R_WINDOW_DONE)
        return; /* conv_window.c finishes the window's converter */
    gt__see_ts(c, r->ts);
    if (type == GT_R_WINDOW_BEGIN) {
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

void gt__on_warning(struct gt__conv *c, const struct gt_r_warning *r)
{
    gt__see_ts(c, r->ts);
    if (c->nwarnings == GT__MAX_WARNINGS) {
        c->an.warnings_dropped++;
        return;
    }
    c->warnings[c->nwarnings++] =
        (struct gt__warning){.code = r->code, .text = r->text, .ts = r->ts};
    uint32_t t = c->file_open ? meta_track(c) : 0, tl;
    if (!t)
        return;
    const char *text = gt__str_esc(c, r->text, &tl);
    char *p = gt__ev_begin(c, t, tl + 128);
    p = GT__LIT(p, "{\"ph\":\"i\",\"s\":\"p\",\"cat\":\"warning\",\"name\":\"");
    p = put_esc(p, text, tl);
    p = GT__LIT(p, "\",");
    p = gt__put_pt(c, p, t);
    p = GT__LIT(p, ",\"ts\":");
    p = gt__fmt_us(p, gt__rel(c, r->ts));
    p = PUT_KV(p, ",\"args\":{\"code\":", r->code);
    p = GT__LIT(p, "}}");
    gt__ev_end(c, p);
}

void gt__on_process(struct gt__conv *c, const struct gt_r_process_info *r)
{
    if (c->have_hello && r->pid != c->pid) {
        c->an.pid_mismatch++;
        return;
    }
    c->pid = r->pid;
    c->ppid = r->ppid;
    int renamed = r->rank != c->rank;
    c->rank = r->rank;
    c->local_rank = r->local_rank;
    c->world_size = r->world_size;
    if (!c->start_mono && r->start_mono_ns) {
        c->start_mono = r->start_mono_ns;
        c->start_real = r->start_real_ns;
    }
    if (renamed && c->nprocs > 0)
        gt__main_proc_rename(c);
}

