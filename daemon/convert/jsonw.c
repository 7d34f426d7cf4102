/*
 * Streaming JSON writer; see jsonw.h for the design.
 *
 * The escaper is the only part that looks at untrusted bytes. It copies runs
 * of plain ASCII in one memcpy and decodes UTF-8 by hand so that it can
 * reject exactly what RFC 3629 forbids (overlong encodings, UTF-16
 * surrogates, code points above U+10FFFF), replacing each offending byte
 * with U+FFFD: a viewer then shows a visible marker instead of refusing the
 * whole file.
 */
#include "daemon/convert/jsonw.h"

#include <errno.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/util.h"

const char gt__digits2[200] =
    "00010203040506070809"
    "10111213141516171819"
    "20212223242526272829"
    "30313233343536373839"
    "40414243444546474849"
    "50515253545556575859"
    "60616263646566676869"
    "70717273747576777879"
    "80818283848586878889"
    "90919293949596979899";

int gt__jw_init(struct gt__jw *w, size_t cap)
{
    if (cap < 2 * (size_t)GT__JW_MAX_RESERVE)
        cap = 2 * (size_t)GT__JW_MAX_RESERVE;
    memset(w, 0, sizeof(*w));
    w->fd = -1;
    w->buf = gt__malloc(cap);
    if (!w->buf)
        return -ENOMEM;
    w->cap = cap;
    return 0;
}

void gt__jw_close(struct gt__jw *w)
{
    gt__free(w->buf);
    w->buf = NULL;
    w->cap = w->len = 0;
}

int gt__jw_flush(struct gt__jw *w)
{
    if (w->len > 0 && w->fd >= 0 && w->err == 0)
        w->err = gt__write_all(w->fd, w->buf, w->len, 0, 0);
    w->len = 0;
    return w->err;
}

char *gt__jw_reserve_slow(struct gt__jw *w, size_t n)
{
    /* On failure the output is discarded (len is 0 either way) and the
     * error stays sticky in w->err for the caller's next flush. */
    if (gt__jw_flush(w) != 0)
        w->len = 0;
    (void)n; /* n <= GT__JW_MAX_RESERVE <= cap / 2 by contract */
    return w->buf;
}

void gt__jw_put(struct gt__jw *w, const void *data, size_t n)
{
    const char *s = data;
    while (n > 0) {
        size_t k = n < GT__JW_MAX_RESERVE ? n : GT__JW_MAX_RESERVE;
        char *p = gt__jw_reserve(w, k);
        memcpy(p, s, k);
        gt__jw_commit(w, p + k);
        s += k;
        n -= k;
    }
}

void gt__jw_str(struct gt__jw *w, const char *s, size_t n)
{
    /* Escape in slices so that each fits one reservation. */
    size_t slice = GT__JW_MAX_RESERVE / 6 - 8;
    char *p = gt__jw_reserve(w, 1);
    *p++ = '"';
    gt__jw_commit(w, p);
    while (n > 0) {
        size_t k = n < slice ? n : slice;
        /* Do not cut a UTF-8 sequence in two: back up over continuation
         * bytes (at most 3) when the slice ends inside one. */
        if (k < n) {
            size_t back = 0;
            while (back < 3 && ((unsigned char)s[k - back] & 0xc0) == 0x80)
                back++;
            k -= back;
        }
        p = gt__jw_reserve(w, GT__JSON_ESCAPED_MAX(k));
        p += gt__json_escape(p, s, k);
        gt__jw_commit(w, p);
        s += k;
        n -= k;
    }
    p = gt__jw_reserve(w, 1);
    *p++ = '"';
    gt__jw_commit(w, p);
}

void gt__jw_u64(struct gt__jw *w, uint64_t v)
{
    char *p = gt__jw_reserve(w, 24);
    gt__jw_commit(w, gt__fmt_u64(p, v));
}

void gt__jw_i64(struct gt__jw *w, int64_t v)
{
    char *p = gt__jw_reserve(w, 24);
    gt__jw_commit(w, gt__fmt_i64(p, v));
}

/* 1: the byte needs more than a copy (escape or UTF-8 check). */
static const unsigned char special[256] = {
    [0x00 ... 0x1f] = 1, ['"'] = 1, ['\\'] = 1, [0x7f] = 0,
    [0x80 ... 0xff] = 1,
};

size_t gt__json_escape(char *out, const char *in, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *s = (const unsigned char *)in;
    char *p = out;
    size_t i = 0;
    while (i < n) {
        size_t run = i;
        while (run < n && !special[s[run]])
            run++;
        memcpy(p, s + i, run - i);
        p += run - i;
        i = run;
        if (i >= n)
            break;
        unsigned c = s[i];
        if (c >= 0x80) {
            size_t k = gt__utf8_len(s + i, n - i);
            if (k) {
                memcpy(p, s + i, k);
                p += k;
                i += k;
            } else {
                p = GT__LIT(p, "\xef\xbf\xbd");
                i++;
            }
            continue;
        }
        *p++ = '\\';
        switch (c) {
        case '"': *p++ = '"'; break;
        case '\\': *p++ = '\\'; break;
        case '\n': *p++ = 'n'; break;
        case '\r': *p++ = 'r'; break;
        case '\t': *p++ = 't'; break;
        case '\b': *p++ = 'b'; break;
        case '\f': *p++ = 'f'; break;
        default:
            p = GT__LIT(p, "u00");
            *p++ = hex[c >> 4];
            *p++ = hex[c & 15];
            break;
        }
        i++;
    }
    return (size_t)(p - out);
}

size_t gt__json_text(char *out, const char *in, size_t n)
{
    const unsigned char *s = (const unsigned char *)in;
    char *p = out;
    size_t i = 0;
    while (i < n) {
        size_t k = gt__utf8_len(s + i, n - i);
        if (k) {
            memcpy(p, s + i, k);
            p += k;
            i += k;
        } else {
            p = GT__LIT(p, "\xef\xbf\xbd");
            i++;
        }
    }
    return (size_t)(p - out);
}
