/*
 * Chrome Trace Event output of one writer: tracks and the event emitters
 * the record handlers use (files.c opens, rotates and closes the files).
 *
 * Process and thread metadata ('M' events) are written lazily: each
 * track remembers the file that has its metadata, and the first event on
 * the track in a new file writes it again, so every rotated file is
 * self-describing without replaying anything.
 *
 * Tracks are (pid, tid) pairs with a pre-rendered `"pid":P,"tid":T` so that
 * an event's identity is one memcpy. Tracks fed with complete events that
 * are not known to nest (GPU activity, CUDA API calls, computed layer spans)
 * go through gt__place, which keeps a small stack of open ends per track
 * and sends anything that would overlap without nesting to an overlap
 * track, so no track ever holds invalid nesting.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/alloc.h"
#include "daemon/convert/internal.h"

/* ------------------------------------------------------------ tracks */

static char *escape_dup(const char *raw, size_t n, uint32_t *len)
{
    char *e = gt__malloc(GT__JSON_ESCAPED_MAX(n) + 1);
    if (!e)
        return NULL;
    size_t k = gt__json_escape(e, raw, n);
    e[k] = 0;
    *len = (uint32_t)k;
    return e;
}

static uint32_t proc_new(struct gt__writer *c, uint32_t pid, uint32_t sort,
                         const char *name)
{
    struct gt__proc *np = gt__realloc(c->procs, (c->nprocs + 1) * sizeof(*np));
    if (!np)
        return UINT32_MAX;
    c->procs = np;
    struct gt__proc *p = &c->procs[c->nprocs];
    memset(p, 0, sizeof(*p));
    p->pid = pid;
    p->sort = sort;
    p->next_synth = GT__SYNTH_TID_BASE;
    p->name = escape_dup(name, strlen(name), &p->name_len);
    if (!p->name)
        return UINT32_MAX;
    return c->nprocs++;
}

/* "python3 [rank 0] pid 1234": the command's basename, rank, pid. */
static void main_proc_name(const struct gt__writer *c, char *name, size_t cap)
{
    const char *cmd = c->s->cmdline ? c->s->cmdline : "";
    size_t n = strcspn(cmd, " ");
    const char *base = cmd;
    for (size_t i = 0; i < n; i++)
        if (cmd[i] == '/')
            base = cmd + i + 1;
    int bl = (int)(n - (size_t)(base - cmd));
    if (bl > 200)
        bl = 200;
    if (bl <= 0) {
        base = "process";
        bl = 7;
    }
    if (c->s->rank >= 0)
        snprintf(name, cap, "%.*s [rank %d] pid %u", bl, base, c->s->rank,
                 c->s->pid);
    else
        snprintf(name, cap, "%.*s pid %u", bl, base, c->s->pid);
}

uint32_t gt__main_proc(struct gt__writer *c)
{
    if (c->nprocs == 0) {
        char name[320];
        main_proc_name(c, name, sizeof(name));
        if (proc_new(c, c->s->pid, 0, name) == UINT32_MAX)
            c->err = c->err ? c->err : -ENOMEM;
    }
    return 0;
}

void gt__main_proc_rename(struct gt__writer *c)
{
    char name[320];
    if (c->nprocs == 0)
        return;
    main_proc_name(c, name, sizeof(name));
    gt__proc_rename(c, 0, name);
}

uint32_t gt__gpu_proc(struct gt__writer *c, uint32_t device)
{
    if (device >= GT__MAX_DEVICES)
        return UINT32_MAX;
    gt__main_proc(c);
    if (!c->gpu_proc[device]) {
        char name[32];
        snprintf(name, sizeof(name), "GPU %u", device);
        uint32_t p = proc_new(c, GT__GPU_PID_BASE + device, 1000 + device,
                              name);
        if (p == UINT32_MAX)
            return UINT32_MAX;
        c->gpu_proc[device] = p + 1;
    }
    return c->gpu_proc[device] - 1;
}

static uint32_t track_new_esc(struct gt__writer *c, uint32_t proc, uint32_t tid,
                              uint32_t sort, char *esc, uint32_t esc_len)
{
    if (c->ntracks + 1 >= GT__MAX_TRACKS)
        goto out_free;
    if (c->ntracks + 1 >= c->tracks_cap) {
        uint32_t cap = c->tracks_cap ? c->tracks_cap * 2 : 64;
        struct gt__track *nt = gt__realloc(c->tracks, cap * sizeof(*nt));
        if (!nt)
            goto out_free;
        c->tracks = nt;
        c->tracks_cap = cap;
        if (c->ntracks == 0)
            c->ntracks = 1; /* index 0 means "no track" */
    }
    if (tid == UINT32_MAX)
        tid = c->procs[proc].next_synth++;
    struct gt__track *t = &c->tracks[c->ntracks];
    memset(t, 0, sizeof(*t));
    t->proc = proc;
    t->tid = tid;
    t->sort = sort;
    t->name = esc;
    t->name_len = esc_len;
    t->pt_len = (uint32_t)snprintf(t->pt, sizeof(t->pt),
                                   "\"pid\":%u,\"tid\":%u",
                                   c->procs[proc].pid, tid);
    return c->ntracks++;

out_free:
    gt__free(esc);
    return 0;
}

uint32_t gt__track_new(struct gt__writer *c, uint32_t proc, uint32_t tid,
                       uint32_t sort, const char *name)
{
    uint32_t len;
    char *esc = escape_dup(name, strlen(name), &len);
    if (!esc)
        return 0;
    return track_new_esc(c, proc, tid, sort, esc, len);
}

void gt__track_rename(struct gt__writer *c, uint32_t t, const char *name)
{
    uint32_t len;
    char *esc = escape_dup(name, strlen(name), &len);
    if (!esc || t == 0) {
        gt__free(esc);
        return;
    }
    gt__free(c->tracks[t].name);
    c->tracks[t].name = esc;
    c->tracks[t].name_len = len;
    c->tracks[t].meta_file = 0; /* re-emit thread_name in this file */
}

void gt__proc_rename(struct gt__writer *c, uint32_t proc, const char *name)
{
    uint32_t len;
    char *esc = escape_dup(name, strlen(name), &len);
    if (!esc)
        return;
    gt__free(c->procs[proc].name);
    c->procs[proc].name = esc;
    c->procs[proc].name_len = len;
    c->procs[proc].meta_file = 0;
}

static int lane_try(struct gt__track *t, uint64_t s, uint64_t e)
{
    if (s < t->last_start)
        return 0; /* out of start order: nesting cannot be verified */
    while (t->depth > 0 && t->ends[t->depth - 1] <= s)
        t->depth--;
    if (t->depth > 0 && e > t->ends[t->depth - 1])
        return 0;
    if (t->depth == GT__LANE_DEPTH)
        return 0;
    t->ends[t->depth++] = e;
    t->last_start = s;
    return 1;
}

uint32_t gt__place(struct gt__writer *c, uint32_t t, uint64_t s, uint64_t e)
{
    while (t) {
        if (lane_try(&c->tracks[t], s, e)) {
            if (c->tracks[t].level)
                c->an.overlap_moved++;
            return t;
        }
        if (!c->tracks[t].overflow) {
            const struct gt__track *pt = &c->tracks[t];
            if (pt->level >= GT__MAX_OVERFLOW)
                break;
            /* Name the overlap track after the primary one. */
            uint32_t lvl = pt->level + 1;
            const struct gt__track *base = pt;
            size_t cut = base->name_len;
            if (lvl > 1) {
                const char *par = strstr(base->name, " (overlap ");
                if (par)
                    cut = (size_t)(par - base->name);
            }
            char *esc = gt__malloc(cut + 32);
            if (!esc)
                break;
            int n = snprintf(esc, cut + 32, "%.*s (overlap %u)", (int)cut,
                             base->name, lvl);
            uint32_t nt = track_new_esc(c, pt->proc, UINT32_MAX,
                                        pt->sort + lvl, esc, (uint32_t)n);
            if (!nt)
                break;
            c->tracks[nt].level = lvl;
            c->tracks[t].overflow = nt;
        }
        t = c->tracks[t].overflow;
    }
    c->an.overlap_dropped++;
    return 0;
}

/* ------------------------------------------------------------ events */

/* The latest time a trace shows: 2^52 ns (52 days) after its base, so
 * that every ts and ts + dur, written in microseconds with nanosecond
 * fractions, is exact in a JSON reader's double. Later (hostile) times
 * are clamped to it, which keeps nesting: clamping is monotonic. */
static uint64_t horizon(const struct gt__writer *c)
{
    uint64_t b = c->s->base_ns;
    return b > UINT64_MAX - GT__REL_MAX ? UINT64_MAX : b + GT__REL_MAX;
}

uint64_t gt__rel(struct gt__writer *c, uint64_t ts)
{
    if (ts < c->s->base_ns) {
        c->an.before_base++;
        return 0;
    }
    if (ts > horizon(c)) {
        c->an.beyond_horizon++;
        ts = horizon(c);
    }
    return ts - c->s->base_ns;
}

static const char unknown_str[] = "(unknown string)";

const char *gt__str_esc(struct gt__writer *c, uint32_t id, uint32_t *len)
{
    if (id < c->s->nstrs && c->s->strs[id].esc) {
        *len = c->s->strs[id].esc_len;
        return c->s->strs[id].esc;
    }
    c->an.unknown_strings++;
    *len = sizeof(unknown_str) - 1;
    return unknown_str;
}

const char *gt__str_raw(struct gt__writer *c, uint32_t id, uint32_t *len)
{
    if (id < c->s->nstrs && c->s->strs[id].raw) {
        *len = c->s->strs[id].raw_len;
        return c->s->strs[id].raw;
    }
    *len = sizeof(unknown_str) - 1;
    return unknown_str;
}

/* Writes one metadata event; name is a literal key, val escaped text. */
/* Starts a metadata event: {"ph":"M","name":"<what>",<pid/tid>,"args":{
 * with room for extra more bytes after it. */
static char *meta_head(struct gt__writer *c, const char *what, const char *pt,
                       size_t pt_len, size_t extra)
{
    size_t wl = strlen(what);
    char *p = gt__jw_reserve(&c->w, wl + pt_len + extra + 64);
    if (c->file_events)
        *p++ = ',';
    *p++ = '\n';
    p = GT__LIT(p, "{\"ph\":\"M\",\"name\":\"");
    memcpy(p, what, wl);
    p += wl;
    p = GT__LIT(p, "\",");
    memcpy(p, pt, pt_len);
    p += pt_len;
    return GT__LIT(p, ",\"args\":{");
}

static void meta_name(struct gt__writer *c, const char *what, const char *pt,
                      size_t pt_len, const char *val, uint32_t len)
{
    char *p = meta_head(c, what, pt, pt_len, len + 16);
    p = GT__LIT(p, "\"name\":\"");
    memcpy(p, val, len);
    p += len;
    p = GT__LIT(p, "\"}}");
    gt__jw_commit(&c->w, p);
    c->file_events++;
    c->total_events++;
}

static void meta_sort(struct gt__writer *c, const char *what, const char *pt,
                      size_t pt_len, uint32_t sort)
{
    char *p = meta_head(c, what, pt, pt_len, 48);
    p = GT__LIT(p, "\"sort_index\":");
    p = gt__fmt_u64(p, sort);
    p = GT__LIT(p, "}}");
    gt__jw_commit(&c->w, p);
    c->file_events++;
    c->total_events++;
}

static void write_track_meta(struct gt__writer *c, uint32_t t)
{
    struct gt__track *tr = &c->tracks[t];
    struct gt__proc *pr = &c->procs[tr->proc];
    uint32_t mark = c->file_index + 1;
    if (pr->meta_file != mark) {
        char pt[48];
        int n = snprintf(pt, sizeof(pt), "\"pid\":%u,\"tid\":0", pr->pid);
        meta_name(c, "process_name", pt, (size_t)n, pr->name, pr->name_len);
        meta_sort(c, "process_sort_index", pt, (size_t)n, pr->sort);
        pr->meta_file = mark;
    }
    meta_name(c, "thread_name", tr->pt, tr->pt_len, tr->name, tr->name_len);
    meta_sort(c, "thread_sort_index", tr->pt, tr->pt_len, tr->sort);
    tr->meta_file = mark;
}

char *gt__ev_begin(struct gt__writer *c, uint32_t t, size_t extra)
{
    /* Files are created with their first event (see gt__conv_hello). A
     * failure is sticky in c->err; the event then goes to the writer with
     * no file behind it, which discards it. */
    if (!c->file_open && !c->err) {
        int rc = gt__file_open(c);
        if (rc)
            c->err = rc;
    }
    if (c->tracks[t].meta_file != c->file_index + 1)
        write_track_meta(c, t);
    char *p = gt__jw_reserve(&c->w, extra + 256);
    if (c->file_events)
        *p++ = ',';
    *p++ = '\n';
    return p;
}

void gt__ev_end(struct gt__writer *c, char *end)
{
    gt__jw_commit(&c->w, end);
    c->file_events++;
    c->total_events++;
}

char *gt__x_open(struct gt__writer *c, uint32_t t, const char *cat, uint64_t s,
                 uint64_t e, size_t extra)
{
    size_t cl = strlen(cat);
    char *p = gt__ev_begin(c, t, cl + extra);
    /* A start before the base is clamped to it (ts 0); the end stays,
     * so the span never covers its siblings' time. */
    if (s < c->s->base_ns) {
        c->an.before_base++;
        s = c->s->base_ns;
        if (e < s)
            e = s;
    }
    if (e < s) {
        c->an.negative_durations++;
        e = s;
    }
    if (e > horizon(c)) {
        c->an.beyond_horizon++;
        e = horizon(c);
        if (s > e)
            s = e;
    }
    p = GT__LIT(p, "{\"ph\":\"X\",\"cat\":\"");
    memcpy(p, cat, cl);
    p += cl;
    p = GT__LIT(p, "\",");
    p = gt__put_pt(c, p, t);
    p = GT__LIT(p, ",\"ts\":");
    p = gt__fmt_us(p, gt__rel(c, s));
    p = GT__LIT(p, ",\"dur\":");
    p = gt__fmt_us(p, e - s);
    p = GT__LIT(p, ",\"name\":\"");
    return p;
}

void gt__emit_x(struct gt__writer *c, uint32_t t, const char *cat,
                const char *n1, uint32_t l1, const char *n2, uint32_t l2,
                const char *n3, uint32_t l3, uint64_t s, uint64_t e,
                const char *args, size_t args_len)
{
    char *p = gt__x_open(c, t, cat, s, e, l1 + l2 + l3 + args_len);
    memcpy(p, n1, l1);
    p += l1;
    memcpy(p, n2, l2);
    p += l2;
    memcpy(p, n3, l3);
    p += l3;
    *p++ = '"';
    if (args_len) {
        p = GT__LIT(p, ",\"args\":{");
        memcpy(p, args, args_len);
        p += args_len;
        *p++ = '}';
    }
    *p++ = '}';
    gt__ev_end(c, p);
}

void gt__obs_layer(struct gt__writer *c, const struct gt__layer_ev *ev,
                   const char *path, uint32_t pl, const char *cls,
                   uint32_t cl)
{
    static const char *const phases[] = {" backward", " forward",
                                         " recompute"};
    const struct gt__span_obs *obs = c->s->obs;
    /* Named as a JSON reader reads the event's name back. */
    char name[6 * GT_STRING_MAX + 32], *p = name;
    if (!obs || !obs->layer || ev->phase < 0 || ev->phase > 2)
        return;
    p += gt__json_text(p, path, pl < GT_STRING_MAX ? pl : GT_STRING_MAX);
    if (cl) {
        p = GT__LIT(p, " (");
        p += gt__json_text(p, cls, cl < GT_STRING_MAX ? cl : GT_STRING_MAX);
        *p++ = ')';
    }
    size_t n = strlen(phases[ev->phase]);
    memcpy(p, phases[ev->phase], n + 1);
    /* As the JSON has them: start clamped at the base, no negative
     * duration (gt__x_open). */
    struct gt__layer_ev x = *ev;
    char parent[6 * GT_STRING_MAX + 1];
    if (ev->parent) {
        uint32_t l = ev->parent_len;
        size_t k = gt__json_text(parent, ev->parent,
                                 l < GT_STRING_MAX ? l : GT_STRING_MAX);
        parent[k] = 0;
        x.parent = parent;
        x.parent_len = (uint32_t)k;
    }
    char top[6 * GT_STRING_MAX + 1];
    if (ev->top) {
        uint32_t l = ev->top_len;
        size_t k = gt__json_text(top, ev->top, l < GT_STRING_MAX ? l : GT_STRING_MAX);
        top[k] = 0;
        x.top = top;
        x.top_len = (uint32_t)k;
    }
    uint64_t s = ev->s, e = ev->e;
    if (s < c->s->base_ns)
        s = c->s->base_ns; /* clamped at the base, keeping its end */
    obs->layer(obs->ud, name, s - c->s->base_ns, e < s ? 0 : e - s, &x);
}
