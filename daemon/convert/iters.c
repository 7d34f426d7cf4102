/*
 * Backward passes and iteration spans of one writer: pass begin and end
 * open and close the pass groups of layers.c, and mark the iterations.
 *
 * Iterations: see schema/trace-output.md, "Iterations". Until the stream
 * has a GT_R_STEP, each backward pass end not flagged GT_MARK_F_STEPS or
 * GT_MARK_F_EXTRA is an iteration boundary; the
 * span it closes is held back one boundary, so that when the first STEP
 * arrives it replaces the pass-based boundary instead of cutting the
 * iteration in two.
 */
#include <stdio.h>

#include "daemon/convert/internal.h"

/* The Iterations track, the home of steps no thread track can hold. */
static uint32_t iterations_track(struct gt__writer *c)
{
    if (!c->iter_track) {
        gt__main_proc(c);
        c->iter_track = gt__track_new(c, 0, UINT32_MAX, 1, "Iterations");
    }
    return c->iter_track;
}

/*
 * ProfilerStep#<value> over [s, e], Kineto's way (cat user_annotation),
 * on thread track `on` when the boundaries allow it (see step_track),
 * else on the Iterations track.
 */
static void emit_iteration(struct gt__writer *c, uint64_t s, uint64_t e,
                           uint64_t value, uint32_t on)
{
    c->steps_written++;
    uint32_t t = on ? on : iterations_track(c);
    if (!t || !(t = on ? t : gt__place(c, t, s, e)))
        return;
    struct gt__ev ev;
    char name[48];
    int nl = snprintf(name, sizeof(name), "ProfilerStep#%llu",
                      (unsigned long long)value);
    gt__ev_init(&ev, GT__CAT_ITERATION, t, s, e);
    gt__ev_name_text(&ev, name, (size_t)nl);
    gt__ev_u64(&ev, "step", value);
    /* A window's own step (window_step) says so: it covers the window,
     * not the whole iteration, and gradtrace report skips it. */
    if (c->finished_layers)
        gt__ev_u64(&ev, "window", c->win_id);
    gt__emit_slice(c->out, &ev);
}

/*
 * The thread track of th for an iteration its boundary at the current
 * time closes, or 0. Kineto draws ProfilerStep on the thread that ran the
 * step, and consumers (TensorBoard's plugin) build each thread's operator
 * tree under it; a stack-built thread track nests by construction, so the
 * span may join it only when nothing was open on the thread at either
 * boundary: at its start (the previous boundary, made on the same thread,
 * or the first time of the stream) and now.
 */
static uint32_t step_track(struct gt__writer *c, const struct gt__wthread *th)
{
    if (!th || th->scopes.depth > 0 || th->nheld > 0)
        return 0;
    if (!c->have_iter_start || c->iter_start_track == GT__ANY_TRACK)
        /* From the stream's start: its first slice must start later. */
        return th->began && th->first_begin <= c->min_ts ? 0 : th->track;
    if (c->iter_start_track != th->track || c->iter_start_clash)
        return 0;
    return th->track;
}

void gt__step_note_begin(struct gt__writer *c, struct gt__wthread *th,
                         uint64_t ts)
{
    if (!th->began) {
        th->began = 1;
        th->first_begin = ts;
    }
    if (c->have_iter_start && ts == c->iter_start &&
        c->iter_start_track == th->track)
        c->iter_start_clash = 1;
}

/* What the next iteration may start on: th's track when nothing is open
 * on th now. */
static uint32_t next_start_track(const struct gt__wthread *th)
{
    return th && th->scopes.depth == 0 && th->nheld == 0 ? th->track : 0;
}

/* Start of the iteration that a boundary at ts closes, or 0 if invalid. */
static int iteration_start(struct gt__writer *c, uint64_t ts, uint64_t *start)
{
    *start = c->have_iter_start ? c->iter_start : c->min_ts;
    if (ts < *start) {
        c->an.steps_out_of_order++;
        return 0;
    }
    return 1;
}




void gt__step(struct gt__writer *c, struct gt__wthread *th, uint64_t ts,
              uint64_t value)
{
    uint64_t start;
    gt__layers_outside_pass(c, UINT64_MAX);
    c->saw_step = 1;
    if (c->pend_iter) {
        /* The pass-based boundary is superseded by the step mark. */
        c->pend_iter = 0;
        c->iter_start = c->pend_start;
        c->iter_start_track = c->pend_start_track;
        c->iter_start_clash = c->pend_start_clash;
    }
    if (!iteration_start(c, ts, &start))
        return;
    emit_iteration(c, start, ts, value, step_track(c, th));
    c->iter_start = ts;
    c->iter_start_track = next_start_track(th);
    c->iter_start_clash = 0;
    c->have_iter_start = 1;
}

void gt__pass_begin(struct gt__writer *c, struct gt__wthread *th, uint64_t ts,
                    uint64_t value)
{
    if (th && th->pass_open) {
        /* A begin without the previous end: close that pass here. */
        c->an.pass_unbalanced++;
        gt__pass_end(c, th, ts, value, 0);
    }
    if (c->passes_open == 0) {
        if (c->group_ended)
            gt__layers_flush_group(c, c->group_end);
        /* Nodes seen before this begin but timed after it ran on another
         * thread whose records came first: they belong to this pass. Any
         * earlier node ran outside a pass: its group is flushed alone. */
        if (c->group_nodes && c->group_min_first < ts)
            gt__layers_flush_group(c, 0);
        c->group_begin = ts;
        c->group_value = value;
        c->group_has_pass = 1;
    }
    c->passes_open++;
    if (th)
        th->pass_open = 1;
}

void gt__pass_end(struct gt__writer *c, struct gt__wthread *th, uint64_t ts,
                  uint64_t value, uint32_t flags)
{
    uint64_t start;
    if (!th || !th->pass_open || c->passes_open == 0) {
        c->an.pass_unbalanced++;
        return;
    }
    th->pass_open = 0;
    c->passes_open--;
    /* A stream whose iterations are steps, and a pass that is no
     * iteration, draw no pass-based boundary. */
    if (!c->saw_step && !(flags & (GT_MARK_F_STEPS | GT_MARK_F_EXTRA)) &&
        iteration_start(c, ts, &start)) {
        if (c->pend_iter)
            emit_iteration(c, c->pend_start, c->pend_end, c->pend_value,
                           c->pend_track);
        c->pend_iter = 1;
        c->pend_start = start;
        c->pend_end = ts;
        c->pend_value = value;
        c->pend_track = step_track(c, th);
        c->pend_start_track = c->have_iter_start ? c->iter_start_track
                                                 : GT__ANY_TRACK;
        c->pend_start_clash = c->iter_start_clash;
        c->iter_start = ts;
        c->iter_start_track = next_start_track(th);
        c->iter_start_clash = 0;
        c->have_iter_start = 1;
    }
    if (c->passes_open == 0) {
        /* Held open for nodes of other threads that arrive late: see
         * gt__layer_credit and gt__layers_chunk_end. */
        c->group_ended = 1;
        c->group_end = ts;
        c->group_end_chunk = c->chunks;
    }
}

/*
 * A window file that no step boundary fell into still belongs to one
 * iteration (the window's): it gets ProfilerStep#<iteration> over the
 * whole file's time, on the thread that opened the window (everything is
 * closed by now, so it nests there), so that tools which need steps
 * (HTA's critical path) read a window as they read a whole trace.
 */
static void window_step(struct gt__writer *c)
{
    const struct gt__conv_window *x = gt__winfo_find(c->s, c->win_id);
    struct gt__wthread *th = c->win_tid ? gt__thread_find(c, c->win_tid)
                                        : NULL;
    if (!x || !gt__emit_begun(c->out) || !c->have_ts || c->steps_written)
        return;
    c->have_iter_start = 0;
    c->finished_layers = 1;
    emit_iteration(c, c->min_ts, c->max_ts, x->iteration, step_track(c, th));
}

void gt__layers_finish(struct gt__writer *c)
{
    if (c->group_nodes || c->group_has_pass) {
        if (c->passes_open)
            c->an.pass_unbalanced += c->passes_open;
        gt__layers_flush_group(c, c->group_ended ? c->group_end : c->max_ts);
        c->passes_open = 0;
    }
    if (c->pend_iter) {
        emit_iteration(c, c->pend_start, c->pend_end, c->pend_value,
                       c->pend_track);
        c->pend_iter = 0;
    }
    if (c->window)
        window_step(c);
}
