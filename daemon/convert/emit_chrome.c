/*
 * The Chrome JSON emitter (emit.h): events as Chrome Trace Event JSON.
 *
 * Every event is one JSON object on a line of its own, formatted straight
 * into the JSON writer's buffer (jsonw.h): the room it needs is summed
 * from its parts first, so one reservation holds it. Times are written in
 * microseconds relative to the stream's base with nanosecond fractions;
 * what a JSON reader's double cannot hold exactly, and what precedes the
 * base, is clamped here and counted in the writer's anomalies.
 */
#include <math.h>
#include <stdio.h>

#include "common/alloc.h"
#include "daemon/convert/emit.h"
#include "daemon/convert/internal.h"

static const char unknown_str[] = "(unknown string)";

struct chrome {
    struct gt__emit base;
    struct gt__writer *c;   /* the writer whose files hold the events */
};

static struct gt__writer *writer_of(struct gt__emit *e)
{
    return ((struct chrome *)e)->c;
}

/* ------------------------------------------------------------ text */

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

static size_t text_room(const struct gt__cstream *s, const struct gt__text *t)
{
    uint32_t len;
    if (t->s)
        return GT__JSON_ESCAPED_MAX((size_t)t->len);
    (void)sid_esc(s, t->sid, &len);
    return len;
}

static char *put_text(const struct gt__cstream *s, char *p,
                      const struct gt__text *t)
{
    uint32_t len;
    const char *esc;
    if (t->s)
        return p + gt__json_escape(p, t->s, t->len);
    esc = sid_esc(s, t->sid, &len);
    memcpy(p, esc, len);
    return p + len;
}

static size_t name_room(const struct gt__cstream *s, const struct gt__ev *ev)
{
    size_t n = 0;
    for (uint32_t i = 0; i < ev->nname; i++)
        n += text_room(s, &ev->name[i]);
    return n;
}

static char *put_name(const struct gt__cstream *s, char *p,
                      const struct gt__ev *ev)
{
    for (uint32_t i = 0; i < ev->nname; i++)
        p = put_text(s, p, &ev->name[i]);
    return p;
}

/* ------------------------------------------------------------ args */

static size_t args_room(const struct gt__cstream *s, const struct gt__ev *ev)
{
    size_t n = 16;
    for (uint32_t i = 0; i < ev->nargs; i++) {
        const struct gt__arg *a = &ev->args[i];
        n += a->klen + 8;
        switch (a->type) {
        case GT__ARG_TEXT:
        case GT__ARG_SID:
            n += text_room(s, &a->v.t);
            break;
        case GT__ARG_U64X3:
            n += 3 * 21;
            break;
        default:
            n += 32;
            break;
        }
    }
    return n;
}

static char *put_value(const struct gt__cstream *s, char *p,
                       const struct gt__arg *a)
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
        p = put_text(s, p, &a->v.t);
        *p++ = '"';
        return p;
    case GT__ARG_NS:
        return gt__fmt_us(p, a->v.u);
    case GT__ARG_U64X3:
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
static char *put_args(const struct gt__cstream *s, char *p,
                      const struct gt__ev *ev)
{
    if (ev->nargs == 0)
        return p;
    p = GT__LIT(p, ",\"args\":{");
    for (uint32_t i = 0; i < ev->nargs; i++) {
        const struct gt__arg *a = &ev->args[i];
        if (i)
            *p++ = ',';
        *p++ = '"';
        memcpy(p, a->key, a->klen);
        p += a->klen;
        p = GT__LIT(p, "\":");
        p = put_value(s, p, a);
    }
    *p++ = '}';
    return p;
}

/* ------------------------------------------------------------ events */

static char *put_cat(char *p, uint8_t cat)
{
    size_t n = gt__cat_len((enum gt__cat)cat);
    memcpy(p, gt__cat_name((enum gt__cat)cat), n);
    return p + n;
}

static void ch_slice(struct gt__emit *e, const struct gt__ev *ev)
{
    struct gt__writer *c = writer_of(e);
    const struct gt__cstream *s = c->s;
    size_t room = gt__cat_len((enum gt__cat)ev->cat) + name_room(s, ev) +
                  args_room(s, ev);
    char *p = gt__x_open(c, ev->track, gt__cat_name((enum gt__cat)ev->cat),
                         ev->ts, ev->end, room);
    p = put_name(s, p, ev);
    *p++ = '"';
    p = put_args(s, p, ev);
    *p++ = '}';
    gt__ev_end(c, p);
}

static void ch_instant(struct gt__emit *e, const struct gt__ev *ev)
{
    struct gt__writer *c = writer_of(e);
    const struct gt__cstream *s = c->s;
    size_t room = gt__cat_len((enum gt__cat)ev->cat) + name_room(s, ev) +
                  args_room(s, ev);
    char *p = gt__ev_begin(c, ev->track, room);
    p = ev->scope == GT__SCOPE_PROCESS
            ? GT__LIT(p, "{\"ph\":\"i\",\"s\":\"p\",\"cat\":\"")
            : GT__LIT(p, "{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"");
    p = put_cat(p, ev->cat);
    p = GT__LIT(p, "\",\"name\":\"");
    p = put_name(s, p, ev);
    p = GT__LIT(p, "\",");
    p = gt__put_pt(c, p, ev->track);
    p = GT__LIT(p, ",\"ts\":");
    p = gt__fmt_us(p, gt__rel(c, ev->ts));
    p = put_args(s, p, ev);
    *p++ = '}';
    gt__ev_end(c, p);
}

/* Chrome counters carry no category: a name and a sample per series. */
static void ch_counter(struct gt__emit *e, const struct gt__ev *ev)
{
    struct gt__writer *c = writer_of(e);
    const struct gt__cstream *s = c->s;
    char *p = gt__ev_begin(c, ev->track, name_room(s, ev) + args_room(s, ev));
    p = GT__LIT(p, "{\"ph\":\"C\",\"name\":\"");
    p = put_name(s, p, ev);
    p = GT__LIT(p, "\",");
    p = gt__put_pt(c, p, ev->track);
    p = GT__LIT(p, ",\"ts\":");
    p = gt__fmt_us(p, gt__rel(c, ev->ts));
    p = put_args(s, p, ev);
    *p++ = '}';
    gt__ev_end(c, p);
}

/* One half of a flow: a start ('s') or its end ('f', bound to the slice
 * that encloses it), named after its category. */
static char *flow_one(struct gt__writer *c, char *p, char ph, uint8_t cat,
                      uint32_t t, uint64_t ts)
{
    p = GT__LIT(p, "{\"ph\":\"");
    *p++ = ph;
    p = GT__LIT(p, "\",\"cat\":\"");
    p = put_cat(p, cat);
    p = GT__LIT(p, "\",\"name\":\"");
    p = put_cat(p, cat);
    p = GT__LIT(p, "\",\"id\":");
    p = gt__fmt_u64(p, c->flow_id);
    if (ph == 'f')
        p = GT__LIT(p, ",\"bp\":\"e\"");
    *p++ = ',';
    p = gt__put_pt(c, p, t);
    p = GT__LIT(p, ",\"ts\":");
    p = gt__fmt_us(p, gt__rel(c, ts));
    *p++ = '}';
    return p;
}

static void ch_flow(struct gt__emit *e, const struct gt__flow *f)
{
    struct gt__writer *c = writer_of(e);
    size_t cl = gt__cat_len((enum gt__cat)f->cat);
    c->flow_id++;
    char *p = gt__ev_begin(c, f->from_track, 2 * cl);
    p = flow_one(c, p, 's', f->cat, f->from_track, f->from_ts);
    gt__ev_end(c, p);
    p = gt__ev_begin(c, f->to_track, 2 * cl);
    p = flow_one(c, p, 'f', f->cat, f->to_track, f->to_ts);
    gt__ev_end(c, p);
}

static void ch_process(struct gt__emit *e, uint32_t proc, uint32_t pid,
                       uint32_t sort, const char *name)
{
    (void)e;
    (void)proc;
    (void)pid;
    (void)sort;
    (void)name;
}

static void ch_track(struct gt__emit *e, uint32_t t, uint32_t proc,
                     uint32_t tid, uint32_t sort, const char *name)
{
    (void)e;
    (void)t;
    (void)proc;
    (void)tid;
    (void)sort;
    (void)name;
}

static uint32_t ch_part(const struct gt__emit *e)
{
    return ((const struct chrome *)e)->c->file_index;
}

static int ch_begun(const struct gt__emit *e)
{
    return ((const struct chrome *)e)->c->file_open;
}

static void ch_free(struct gt__emit *e)
{
    gt__free(e);
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
    .free = ch_free,
};

struct gt__emit *gt__chrome_emit_create(struct gt__writer *c)
{
    struct chrome *ch = gt__calloc(1, sizeof(*ch));
    if (!ch)
        return NULL;
    ch->base.ops = &chrome_ops;
    ch->c = c;
    return &ch->base;
}
