/*
 * The Chrome JSON emitter (emit.h): events as Chrome Trace Event JSON, in
 * the files files.c opens, rotates and closes.
 *
 * Every event is one JSON object on a line of its own, formatted straight
 * into the JSON writer's buffer (jsonw.h): the room it needs is summed
 * from its parts first, so one reservation holds it. Times are written in
 * microseconds relative to the stream's base with nanosecond fractions;
 * what a JSON reader's double cannot hold exactly, and what precedes the
 * base, is clamped here and counted in the writer's anomalies.
 *
 * Process and thread metadata ('M' events) are written lazily: each
 * process and track remembers the file that has its metadata, and the
 * first event on a track in a new file writes it again, so every rotated
 * file is self-describing without replaying anything. A track renamed
 * (process or track op again) is described again at its next event.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <unistd.h>

#include "common/alloc.h"
#include "daemon/convert/chrome.h"
#include "daemon/convert/internal.h"
#include "daemon/convert/names.h"

static const char unknown_str[] = "(unknown string)";

/* ------------------------------------------------------------ text */

/* Copies n bytes, most of them short (keys, category names, string
 * texts): up to 16 bytes in two overlapping fixed-size moves, without a
 * call per string. */
static inline char *put_bytes(char *p, const char *s, size_t n)
{
    if (n > 16) {
        memcpy(p, s, n);
    } else if (n >= 8) {
        memcpy(p, s, 8);
        memcpy(p + n - 8, s + n - 8, 8);
    } else if (n >= 4) {
        memcpy(p, s, 4);
        memcpy(p + n - 4, s + n - 4, 4);
    } else if (n) {
        p[0] = s[0];
        p[n / 2] = s[n / 2];
        p[n - 1] = s[n - 1];
    }
    return p + n;
}

/* The escaped text of string id (the placeholder when undefined). */
static const char *sid_esc(const struct gt__cstream *s, uint32_t id,
                           uint32_t *len)
{
    if (id < s->nstrs && s->strs[id].esc) {
        *len = s->strs[id].esc_len;
        return s->strs[id].esc;
    }
    *len = sizeof(unknown_str) - 1;
    return unknown_str;
}

/*
 * Room for n more bytes at p, inside the event being written: p itself
 * when the buffer holds them, else what is written so far is committed
 * and a new reservation returned. Every event starts with GT__ROOM bytes
 * reserved, enough for its fixed parts; each text makes room for itself
 * and GT__ROOM more, so an event is never sized twice.
 */
#define GT__ROOM 256u
static inline char *room(struct gt__chrome *ch, char *p, size_t n)
{
    struct gt__jw *w = &ch->w;
    if ((size_t)(w->buf + w->cap - p) >= n)
        return p;
    gt__jw_commit(w, p);
    return gt__jw_reserve(w, n);
}

static char *put_text(struct gt__chrome *ch, char *p, const struct gt__text *t)
{
    uint32_t len;
    const char *esc;
    if (t->s && t->sid == GT__TEXT_PLAIN) {
        p = room(ch, p, t->len + GT__ROOM);
        return put_bytes(p, t->s, t->len);
    }
    if (t->s) {
        p = room(ch, p, GT__JSON_ESCAPED_MAX((size_t)t->len) + GT__ROOM);
        return p + gt__json_escape(p, t->s, t->len);
    }
    esc = sid_esc(ch->s, t->sid, &len);
    p = room(ch, p, len + GT__ROOM);
    return put_bytes(p, esc, len);
}

static char *put_name(struct gt__chrome *ch, char *p, const struct gt__ev *ev)
{
    for (uint32_t i = 0; i < ev->nname; i++)
        p = put_text(ch, p, &ev->name[i]);
    return p;
}

static char *escape_dup(const char *raw, uint32_t *len)
{
    size_t n = strlen(raw);
    char *e = gt__malloc(GT__JSON_ESCAPED_MAX(n) + 1);
    if (!e)
        return NULL;
    size_t k = gt__json_escape(e, raw, n);
    e[k] = 0;
    *len = (uint32_t)k;
    return e;
}

/* ------------------------------------------------------------ args */

/* One value (an integer is at most 20 digits, three of them 64 bytes). */
static char *put_value(struct gt__chrome *ch, char *p, const struct gt__arg *a)
{
    switch (a->type) {
    case GT__ARG_U64:
        return gt__fmt_u64(p, a->v.u);
    case GT__ARG_I64:
        return gt__fmt_i64(p, a->v.i);
    case GT__ARG_F64:
        if (!isfinite(a->v.f))
            return GT__LIT(p, "null");
        return p + snprintf(p, 32, "%.17g", a->v.f);
    case GT__ARG_BOOL:
        return a->v.b ? GT__LIT(p, "true") : GT__LIT(p, "false");
    case GT__ARG_TEXT:
    case GT__ARG_SID:
        *p++ = '"';
        p = put_text(ch, p, &a->v.t);
        *p++ = '"';
        return p;
    case GT__ARG_NS:
        return gt__fmt_us(p, a->v.u);
    case GT__ARG_U32X3:
        *p++ = '[';
        p = gt__fmt_u64(p, a->v.u3[0]);
        *p++ = ',';
        p = gt__fmt_u64(p, a->v.u3[1]);
        *p++ = ',';
        p = gt__fmt_u64(p, a->v.u3[2]);
        *p++ = ']';
        return p;
    default: /* GT__ARG_NULL */
        return GT__LIT(p, "null");
    }
}

/* ,"args":{"k":v,...} when ev has args. */
static char *put_args(struct gt__chrome *ch, char *p, const struct gt__ev *ev)
{
    if (ev->nargs == 0)
        return p;
    /* Keys are short literals and numbers at most 64 bytes: one room for
     * all but the texts, which make their own. */
    p = room(ch, p, (size_t)ev->nargs * (GT__EV_KEY_MAX + 72) + GT__ROOM);
    p = GT__LIT(p, ",\"args\":{");
    for (uint32_t i = 0; i < ev->nargs; i++) {
        const struct gt__arg *a = &ev->args[i];
        if (i)
            *p++ = ',';
        *p++ = '"';
        p = put_bytes(p, a->key, a->klen);
        p = GT__LIT(p, "\":");
        p = put_value(ch, p, a);
    }
    *p++ = '}';
    return p;
}

/* ------------------------------------------------------------ time */

static uint64_t horizon(const struct gt__chrome *ch)
{
    return gt__cstream_horizon(ch->s);
}

/* Relative ns of a monotonic time, clamped to [0, the horizon] (later
 * hostile times: clamping is monotonic, so it keeps nesting). */
static uint64_t rel(struct gt__chrome *ch, uint64_t ts)
{
    if (ts < ch->s->base_ns)
        ch->an->before_base++;
    else if (ts > horizon(ch))
        ch->an->beyond_horizon++;
    return gt__cstream_rel(ch->s, ts);
}

/* ------------------------------------------------------------ metadata */

/* Starts a metadata event: {"ph":"M","name":"<what>",<pid/tid>,"args":{
 * with room for extra more bytes after it. */
static char *meta_head(struct gt__chrome *ch, const char *what, const char *pt,
                       size_t pt_len, size_t extra)
{
    size_t wl = strlen(what);
    char *p = gt__jw_reserve(&ch->w, wl + pt_len + extra + 64);
    if (ch->file_events)
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

static void meta_end(struct gt__chrome *ch, char *p)
{
    gt__jw_commit(&ch->w, p);
    ch->file_events++;
    ch->total_events++;
}

/* One metadata event; name is a literal key, val escaped text. */
static void meta_name(struct gt__chrome *ch, const char *what, const char *pt,
                      size_t pt_len, const char *val, uint32_t len)
{
    char *p = meta_head(ch, what, pt, pt_len, len + 16);
    p = GT__LIT(p, "\"name\":\"");
    memcpy(p, val, len);
    p += len;
    meta_end(ch, GT__LIT(p, "\"}}"));
}

static void meta_sort(struct gt__chrome *ch, const char *what, const char *pt,
                      size_t pt_len, uint32_t sort)
{
    char *p = meta_head(ch, what, pt, pt_len, 48);
    p = GT__LIT(p, "\"sort_index\":");
    p = gt__fmt_u64(p, sort);
    meta_end(ch, GT__LIT(p, "}}"));
}

static void write_track_meta(struct gt__chrome *ch, uint32_t t)
{
    struct gt__chrome_track *tr = &ch->tracks[t];
    struct gt__chrome_proc *pr = &ch->procs[tr->proc];
    uint32_t mark = ch->file_index + 1;
    if (pr->meta_file != mark) {
        char pt[48];
        int n = snprintf(pt, sizeof(pt), "\"pid\":%u,\"tid\":0", pr->pid);
        meta_name(ch, "process_name", pt, (size_t)n, pr->name, pr->name_len);
        meta_sort(ch, "process_sort_index", pt, (size_t)n, pr->sort);
        pr->meta_file = mark;
    }
    meta_name(ch, "thread_name", tr->pt, tr->pt_len, tr->name, tr->name_len);
    meta_sort(ch, "thread_sort_index", tr->pt, tr->pt_len, tr->sort);
    tr->meta_file = mark;
}

/* ------------------------------------------------------------ events */

/*
 * Starts one event on track t: writes its track metadata first when the
 * current file lacks it, reserves extra + 256 bytes, writes the separator
 * and returns where the event's '{' goes (finish with ev_end); NULL for a
 * track never declared (its declaration ran out of memory: counted as
 * the writer's error).
 */
static char *ev_begin(struct gt__chrome *ch, uint32_t t, size_t extra)
{
    if (t >= ch->ntracks || !ch->tracks[t].declared) {
        if (!*ch->err)
            *ch->err = -ENOMEM;
        return NULL;
    }
    /* Files are created with their first event (see gt__conv_hello). A
     * failure is sticky in the writer's error; the event then goes to the
     * JSON writer with no file behind it, which discards it. */
    if (!ch->file_open && !*ch->err) {
        int rc = gt__chrome_file_open(ch);
        if (rc)
            *ch->err = rc;
    }
    if (ch->tracks[t].meta_file != ch->file_index + 1)
        write_track_meta(ch, t);
    char *p = gt__jw_reserve(&ch->w, extra + 256);
    if (ch->file_events)
        *p++ = ',';
    *p++ = '\n';
    return p;
}

static void ev_end(struct gt__chrome *ch, char *end)
{
    gt__jw_commit(&ch->w, end);
    ch->file_events++;
    ch->total_events++;
}

/* Writes "pid":P,"tid":T of track t. */
static char *put_pt(const struct gt__chrome *ch, char *p, uint32_t t)
{
    const struct gt__chrome_track *tr = &ch->tracks[t];
    return put_bytes(p, tr->pt, tr->pt_len);
}

static char *put_cat(char *p, uint8_t cat)
{
    return put_bytes(p, gt__cat_name((enum gt__cat)cat),
                     gt__cat_len((enum gt__cat)cat));
}

static void ch_slice(struct gt__emit *e, const struct gt__ev *ev)
{
    struct gt__chrome *ch = (struct gt__chrome *)e;
    uint64_t s = ev->ts, end = ev->end;
    char *p = ev_begin(ch, ev->track, GT__ROOM);
    if (!p)
        return;
    /* A start before the base is clamped to it (ts 0); the end stays,
     * so the span never covers its siblings' time. */
    if (s < ch->s->base_ns) {
        ch->an->before_base++;
        s = ch->s->base_ns;
        if (end < s)
            end = s;
    }
    if (end < s) {
        ch->an->negative_durations++;
        end = s;
    }
    if (end > horizon(ch)) {
        ch->an->beyond_horizon++;
        end = horizon(ch);
        if (s > end)
            s = end;
    }
    if (ev->cat == GT__CAT_CPU_OP)
        ch->file_ops++;
    p = GT__LIT(p, "{\"ph\":\"X\",\"cat\":\"");
    p = put_cat(p, ev->cat);
    p = GT__LIT(p, "\",");
    p = put_pt(ch, p, ev->track);
    p = GT__LIT(p, ",\"ts\":");
    p = gt__fmt_us(p, rel(ch, s));
    p = GT__LIT(p, ",\"dur\":");
    p = gt__fmt_us(p, end - s);
    p = GT__LIT(p, ",\"name\":\"");
    p = put_name(ch, p, ev);
    *p++ = '"';
    p = put_args(ch, p, ev);
    *p++ = '}';
    ev_end(ch, p);
}

/* What instants and counters end with: the name, the track's pid/tid,
 * the time, the args; then the event is committed. */
static void put_rest(struct gt__chrome *ch, char *p, const struct gt__ev *ev)
{
    p = put_name(ch, p, ev);
    p = GT__LIT(p, "\",");
    p = put_pt(ch, p, ev->track);
    p = GT__LIT(p, ",\"ts\":");
    p = gt__fmt_us(p, rel(ch, ev->ts));
    p = put_args(ch, p, ev);
    *p++ = '}';
    ev_end(ch, p);
}

static void ch_instant(struct gt__emit *e, const struct gt__ev *ev)
{
    struct gt__chrome *ch = (struct gt__chrome *)e;
    char *p = ev_begin(ch, ev->track, GT__ROOM);
    if (!p)
        return;
    p = ev->scope == GT__SCOPE_PROCESS
            ? GT__LIT(p, "{\"ph\":\"i\",\"s\":\"p\",\"cat\":\"")
            : GT__LIT(p, "{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"");
    p = put_cat(p, ev->cat);
    p = GT__LIT(p, "\",\"name\":\"");
    put_rest(ch, p, ev);
}

/* Chrome counters carry no category: a name and a sample per series. */
static void ch_counter(struct gt__emit *e, const struct gt__ev *ev)
{
    struct gt__chrome *ch = (struct gt__chrome *)e;
    char *p = ev_begin(ch, ev->track, GT__ROOM);
    if (!p)
        return;
    p = GT__LIT(p, "{\"ph\":\"C\",\"name\":\"");
    put_rest(ch, p, ev);
}

/* One half of a flow: a start ('s') or its end ('f', bound to the slice
 * that encloses it), named after its category. */
static char *flow_one(struct gt__chrome *ch, char *p, char ph, uint8_t cat,
                      uint32_t t, uint64_t ts)
{
    p = GT__LIT(p, "{\"ph\":\"");
    *p++ = ph;
    p = GT__LIT(p, "\",\"cat\":\"");
    p = put_cat(p, cat);
    p = GT__LIT(p, "\",\"name\":\"");
    p = put_cat(p, cat);
    p = GT__LIT(p, "\",\"id\":");
    p = gt__fmt_u64(p, ch->flow_id);
    if (ph == 'f')
        p = GT__LIT(p, ",\"bp\":\"e\"");
    *p++ = ',';
    p = put_pt(ch, p, t);
    p = GT__LIT(p, ",\"ts\":");
    p = gt__fmt_us(p, rel(ch, ts));
    *p++ = '}';
    return p;
}

/* Both halves at once, so they always land in the same file. */
static void ch_flow(struct gt__emit *e, const struct gt__flow *f)
{
    struct gt__chrome *ch = (struct gt__chrome *)e;
    size_t cl = gt__cat_len((enum gt__cat)f->cat);
    char *p;
    ch->flow_id++;
    if ((p = ev_begin(ch, f->from_track, 2 * cl)) != NULL)
        ev_end(ch, flow_one(ch, p, 's', f->cat, f->from_track, f->from_ts));
    if ((p = ev_begin(ch, f->to_track, 2 * cl)) != NULL)
        ev_end(ch, flow_one(ch, p, 'f', f->cat, f->to_track, f->to_ts));
}

/* ------------------------------------------------------------ tracks */

static void ch_process(struct gt__emit *e, uint32_t proc, uint32_t pid,
                       uint32_t sort, const char *name)
{
    struct gt__chrome *ch = (struct gt__chrome *)e;
    uint32_t len;
    char *esc = escape_dup(name, &len);
    if (!esc)
        goto out_nomem;
    if (proc >= ch->nprocs) {
        struct gt__chrome_proc *np =
            gt__realloc(ch->procs, (proc + 1) * sizeof(*np));
        if (!np)
            goto out_nomem;
        memset(np + ch->nprocs, 0, (proc + 1 - ch->nprocs) * sizeof(*np));
        ch->procs = np;
        ch->nprocs = proc + 1;
    }
    struct gt__chrome_proc *p = &ch->procs[proc];
    gt__free(p->name);
    *p = (struct gt__chrome_proc){.pid = pid, .sort = sort, .name = esc,
                                  .name_len = len};
    return;

out_nomem:
    gt__free(esc);
    if (!*ch->err)
        *ch->err = -ENOMEM;
}

/* Makes room for track t. @return 0 or -ENOMEM. */
static int tracks_grow(struct gt__chrome *ch, uint32_t t)
{
    uint32_t cap = ch->ntracks ? ch->ntracks : 64;
    if (t < ch->ntracks)
        return 0;
    while (cap <= t)
        cap *= 2;
    struct gt__chrome_track *nt = gt__realloc(ch->tracks, cap * sizeof(*nt));
    if (!nt)
        return -ENOMEM;
    memset(nt + ch->ntracks, 0, (cap - ch->ntracks) * sizeof(*nt));
    ch->tracks = nt;
    ch->ntracks = cap;
    return 0;
}

static void ch_track(struct gt__emit *e, uint32_t t, uint32_t proc,
                     uint32_t tid, uint32_t sort, const char *name)
{
    struct gt__chrome *ch = (struct gt__chrome *)e;
    uint32_t len;
    char *esc = escape_dup(name, &len);
    if (!esc || proc >= ch->nprocs || tracks_grow(ch, t)) {
        gt__free(esc);
        if (!*ch->err)
            *ch->err = -ENOMEM;
        return;
    }
    struct gt__chrome_track *tr = &ch->tracks[t];
    gt__free(tr->name);
    tr->proc = proc;
    tr->sort = sort;
    tr->meta_file = 0; /* (re)described in the current file */
    tr->declared = 1;
    tr->name = esc;
    tr->name_len = len;
    tr->pt_len = (uint32_t)snprintf(tr->pt, sizeof(tr->pt),
                                    "\"pid\":%u,\"tid\":%u",
                                    ch->procs[proc].pid, tid);
}

/* ------------------------------------------------------------ life cycle */

static uint32_t ch_part(const struct gt__emit *e)
{
    return ((const struct gt__chrome *)e)->file_index;
}

static int ch_begun(const struct gt__emit *e)
{
    return ((const struct gt__chrome *)e)->file_open;
}

static int ch_open(struct gt__emit *e)
{
    struct gt__chrome *ch = (struct gt__chrome *)e;
    int rc;
    if (ch->file_open || *ch->err)
        return *ch->err;
    rc = gt__chrome_file_open(ch);
    if (rc)
        *ch->err = rc;
    return rc;
}

static int ch_between(struct gt__emit *e)
{
    struct gt__chrome *ch = (struct gt__chrome *)e;
    if (ch->w.bytes < ch->s->max_bytes && ch->file_events < ch->s->max_events)
        return 0;
    return gt__chrome_maybe_rotate(ch);
}

static void ch_chunk_end(struct gt__emit *e)
{
    struct gt__chrome *ch = (struct gt__chrome *)e;
    if (ch->w.err && !*ch->err)
        *ch->err = ch->w.err;
}

static int ch_flush(struct gt__emit *e)
{
    struct gt__chrome *ch = (struct gt__chrome *)e;
    if (ch->file_open && !*ch->err && gt__jw_flush(&ch->w) != 0)
        *ch->err = ch->w.err;
    return *ch->err;
}

/* A tab between events: JSON whitespace, where a repair may cut. */
static int ch_mark(struct gt__emit *e)
{
    struct gt__chrome *ch = (struct gt__chrome *)e;
    if (ch->file_open && !*ch->err) {
        gt__jw_puts(&ch->w, "\t");
        if (gt__jw_flush(&ch->w) != 0)
            *ch->err = ch->w.err;
    }
    return *ch->err;
}

static void ch_cut(struct gt__emit *e)
{
    gt__chrome_file_cut((struct gt__chrome *)e);
}

static int ch_close(struct gt__emit *e)
{
    struct gt__chrome *ch = (struct gt__chrome *)e;
    int rc = gt__chrome_file_close(ch, 1);
    gt__chrome_patch_count(ch);
    if (rc && !*ch->err)
        *ch->err = rc;
    return *ch->err;
}

static void ch_stats(const struct gt__emit *e, struct gt__emit_stats *st)
{
    const struct gt__chrome *ch = (const struct gt__chrome *)e;
    st->events = ch->total_events;
    st->bytes = ch->total_bytes + (ch->file_open ? ch->w.bytes : 0);
    st->files = ch->nfiles;
}

static void ch_restem(struct gt__emit *e, const char *from, const char *to,
                      const char *sfrom, const char *sto)
{
    struct gt__chrome *ch = (struct gt__chrome *)e;
    for (size_t i = 0; i < ch->nfiles; i++)
        gt__file_path_restem(&ch->files[i].path, from, to);
    (void)gt__path_restem(&ch->stem, sfrom, sto);
    if (ch->stem && strcmp(ch->stem, sfrom) == 0) {
        char *n = gt__strdup(sto);
        if (n) {
            gt__free(ch->stem);
            ch->stem = n;
        }
    }
}

/* Frees everything; closes (without finishing) any open file. */
static void ch_free(struct gt__emit *e)
{
    struct gt__chrome *ch = (struct gt__chrome *)e;
    if (ch->fd >= 0)
        close(ch->fd);
    gt__jw_close(&ch->w);
    for (size_t i = 0; i < ch->nfiles; i++)
        gt__free(ch->files[i].path);
    gt__free(ch->files);
    for (uint32_t i = 0; i < ch->ntracks; i++)
        gt__free(ch->tracks[i].name);
    gt__free(ch->tracks);
    for (uint32_t i = 0; i < ch->nprocs; i++)
        gt__free(ch->procs[i].name);
    gt__free(ch->procs);
    gt__free(ch->stem);
    gt__free(ch->out_path);
    gt__free(ch);
}

static const struct gt__emit_ops chrome_ops = {
    .process = ch_process,
    .track = ch_track,
    .slice = ch_slice,
    .instant = ch_instant,
    .counter = ch_counter,
    .flow = ch_flow,
    .part = ch_part,
    .begun = ch_begun,
    .open = ch_open,
    .between = ch_between,
    .chunk_end = ch_chunk_end,
    .flush = ch_flush,
    .mark = ch_mark,
    .cut = ch_cut,
    .close = ch_close,
    .stats = ch_stats,
    .restem = ch_restem,
    .free = ch_free,
};

static struct gt__emit *chrome_create(const struct gt__emit_kind *k,
                                      const struct gt__emit_src *src)
{
    struct gt__chrome *ch = gt__calloc(1, sizeof(*ch));
    (void)k;
    if (!ch)
        return NULL;
    ch->base.ops = &chrome_ops;
    ch->fd = -1;
    ch->s = src->s;
    ch->wr = src->w;
    ch->an = src->an;
    ch->err = src->err;
    ch->window = src->window;
    ch->win_id = src->win_id;
    if ((src->out_path && !(ch->out_path = gt__strdup(src->out_path))) ||
        (src->stem && !(ch->stem = gt__strdup(src->stem))) ||
        gt__jw_init(&ch->w, 4u << 20)) {
        ch_free(&ch->base);
        return NULL;
    }
    return &ch->base;
}

const struct gt__emit_kind gt__chrome_kind = {.create = chrome_create};
