/*
 * The event-line rewriter of `gradtrace merge` (mergeline.h). A small
 * scanner walks the object once, copying it, tracking string state and
 * nesting depth, so that only the keys it is meant to change are changed:
 * a name containing "ts": is inside a string, and args' keys are one
 * level deeper than the event's own.
 */
#include "daemon/convert/mergeline.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define GPU_PID_BASE 0x40000000u

enum { K_OTHER, K_PID, K_TS, K_ID, K_NAME, K_SORT };
enum { S_NONE, S_PROC_NAME, S_PROC_SORT };

struct scan {
    const char *p, *e;
    char *o, *oe;
    const struct gt__mline *m;
    int special;         /* S_*: what the event's top-level name says */
};

/* Copies the string at s->p (at its opening quote); str and len: its body. */
static int copy_string(struct scan *s, const char **str, size_t *len)
{
    const char *q = s->p + 1;
    while (q < s->e && *q != '"')
        q += (*q == '\\' && q + 1 < s->e) ? 2 : 1;
    if (q >= s->e)
        return -EINVAL;
    *str = s->p + 1;
    *len = (size_t)(q - s->p - 1);
    q++;
    if (q - s->p > s->oe - s->o)
        return -ENOSPC; /* repeated keys grew the line past its room */
    memcpy(s->o, s->p, (size_t)(q - s->p));
    s->o += q - s->p;
    s->p = q;
    return 0;
}

static int key_kind(const char *k, size_t n, int depth, int special)
{
#define IS(lit) (n == sizeof(lit) - 1 && memcmp(k, lit, n) == 0)
    if (depth == 1) {
        if (IS("pid"))
            return K_PID;
        if (IS("ts"))
            return K_TS;
        if (IS("id"))
            return K_ID;
        if (IS("name"))
            return K_NAME;
    } else if (depth == 2) {
        if (special == S_PROC_NAME && IS("name"))
            return K_NAME;
        if (special == S_PROC_SORT && IS("sort_index"))
            return K_SORT;
    }
    return K_OTHER;
#undef IS
}

/* A JSON number at s->p: integer part and up to 9 decimals as ns*1e-3
 * units of its value (us -> ns for ts), or the plain integer. */
static int read_num(struct scan *s, int64_t *ip, int64_t *milli, int *neg)
{
    int64_t v = 0, f = 0;
    int digits = 0, fd = 0;
    *neg = s->p < s->e && *s->p == '-';
    if (*neg)
        s->p++;
    while (s->p < s->e && *s->p >= '0' && *s->p <= '9' && digits < 18) {
        v = v * 10 + (*s->p++ - '0');
        digits++;
    }
    if (s->p < s->e && *s->p == '.') {
        s->p++;
        while (s->p < s->e && *s->p >= '0' && *s->p <= '9') {
            if (fd < 3) {
                f = f * 10 + (*s->p - '0');
                fd++;
            }
            s->p++;
        }
    }
    if (digits == 0 || (s->p < s->e && *s->p && strchr("eE0123456789", *s->p)))
        return -EINVAL;
    while (fd++ < 3)
        f *= 10;
    *ip = v;
    *milli = v < INT64_MAX / 1000 - 1 ? v * 1000 + f : -1; /* -1: too large */
    return 0;
}

static int put_w(struct scan *s, int w)
{
    if (w < 0 || w >= s->oe - s->o)
        return -ENOSPC;
    s->o += w;
    return 0;
}

static int put_u64(struct scan *s, uint64_t v)
{
    return put_w(s, snprintf(s->o, (size_t)(s->oe - s->o), "%" PRIu64, v));
}

/* ns as microseconds with three decimals, as the converter writes them. */
static int put_us(struct scan *s, int64_t ns)
{
    return put_w(s, snprintf(s->o, (size_t)(s->oe - s->o),
                             "%" PRId64 ".%03" PRId64, ns / 1000, ns % 1000));
}

/* The value of a key this rewriter changes, at s->p. */
static int rewrite_value(struct scan *s, int kind)
{
    int64_t ip, ns;
    int neg, rc;
    if (kind == K_NAME) {
        const char *str;
        size_t len;
        if (s->p >= s->e || *s->p != '"')
            return 0; /* not a string: copied as it is */
        if (s->special == S_NONE) {
            /* The event's own name: note what kind of event this is. */
            if ((rc = copy_string(s, &str, &len)) < 0)
                return rc;
            if (len == 12 && memcmp(str, "process_name", 12) == 0)
                s->special = S_PROC_NAME;
            else if (len == 18 && memcmp(str, "process_sort_index", 18) == 0)
                s->special = S_PROC_SORT;
            return rc;
        }
        /* process_name's args.name: the prefix goes after the quote. */
        char *at = s->o + 1;
        if ((rc = copy_string(s, &str, &len)) < 0)
            return rc;
        if ((size_t)(s->oe - s->o) < s->m->prefix_len)
            return -ENOSPC;
        memmove(at + s->m->prefix_len, at, (size_t)(s->o - at));
        if (s->m->prefix_len)
            memcpy(at, s->m->prefix, s->m->prefix_len);
        s->o += s->m->prefix_len;
        return 0;
    }
    if ((rc = read_num(s, &ip, &ns, &neg)) < 0)
        return rc;
    if (kind == K_TS) {
        if (ns < 0 || __builtin_add_overflow(neg ? -ns : ns, s->m->delta_ns, &ns))
            return -EINVAL;
        return put_us(s, ns < 0 ? 0 : ns);
    }
    if (neg)
        return -EINVAL;
    if (kind == K_ID)
        return put_u64(s, (uint64_t)ip + s->m->id_base);
    if (kind == K_PID && (uint64_t)ip >= GPU_PID_BASE) {
        uint64_t d = (uint64_t)ip - GPU_PID_BASE;
        return put_u64(s, (uint64_t)s->m->pid + 1 + (d < 998 ? d : 998));
    }
    return put_u64(s, s->m->pid); /* K_PID, K_SORT */
}

ssize_t gt__mline_rewrite(const struct gt__mline *m, const char *in, size_t n,
                          char *out, size_t cap)
{
    struct scan s = {.p = in, .e = in + n, .o = out, .oe = out + cap, .m = m};
    int depth = 0, rc;

    if (cap < n + m->prefix_len + GT__MLINE_SLACK)
        return -ENOSPC;
    while (s.p < s.e && (*s.p == ' ' || *s.p == '\t'))
        s.p++;
    if (s.p >= s.e || *s.p != '{')
        return -EINVAL;
    while (s.p < s.e) {
        char ch = *s.p;
        if (ch == '"') {
            const char *k;
            size_t kl;
            if ((rc = copy_string(&s, &k, &kl)) < 0)
                return rc;
            if (s.p < s.e && *s.p == ':') {
                int kind = key_kind(k, kl, depth, s.special);
                if (s.o >= s.oe)
                    return -ENOSPC;
                *s.o++ = *s.p++;
                if (kind != K_OTHER && (rc = rewrite_value(&s, kind)) < 0)
                    return rc;
            }
            continue;
        }
        if (s.o >= s.oe)
            return -ENOSPC;
        *s.o++ = *s.p++;
        if (ch == '{' || ch == '[') {
            depth++;
        } else if (ch == '}' || ch == ']') {
            if (--depth == 0)
                return s.o - out;
        }
    }
    return -EINVAL;
}
