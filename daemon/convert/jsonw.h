/*
 * Streaming JSON writer for the converter's bulk output.
 *
 * Design: the converter writes millions of small events, so this is not a
 * tree builder (cJSON) but a byte buffer with a reserve/commit interface:
 * the caller asks for room for one whole event (gt__jw_reserve), formats
 * straight into the buffer with the gt__fmt_* helpers (no printf on the hot
 * path) and commits the bytes it used. The buffer goes out with write(2)
 * when full and at gt__jw_flush. Strings are escaped once (gt__json_escape)
 * and the escaped form is cached by the caller, so emitting a name is a
 * memcpy.
 *
 * Errors are sticky: the first failed write is kept in w->err, later output
 * is discarded, and gt__jw_flush returns it. Callers check once per event
 * batch instead of after every byte.
 *
 * Not thread-safe: one writer per output file, one thread.
 */
#ifndef GRADTRACE_DAEMON_JSONW_H
#define GRADTRACE_DAEMON_JSONW_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/codec.h"

/* Largest single reservation a caller may ask for. */
#define GT__JW_MAX_RESERVE (1u << 20)

struct gt__jw {
    char *buf;
    size_t len;      /* bytes buffered, not yet written */
    size_t cap;
    int fd;          /* -1: no file; output is counted and discarded */
    int err;         /* first write error (negative errno), sticky */
    uint64_t bytes;  /* bytes produced since the last gt__jw_reset_count */
};

/*
 * Allocates a buffer of cap bytes (at least 2 * GT__JW_MAX_RESERVE is used
 * when cap is smaller). The writer starts with no file (fd -1).
 * @return 0 or -ENOMEM.
 */
GT__WUR int gt__jw_init(struct gt__jw *w, size_t cap);

/* Frees the buffer (does not flush, does not close the fd). */
void gt__jw_close(struct gt__jw *w);

/*
 * Writes out buffered bytes. The fd is left open.
 * @return 0 or the sticky negative errno of the first failed write.
 */
GT__WUR int gt__jw_flush(struct gt__jw *w);

/* Slow path of gt__jw_reserve: flushes to make room. */
char *gt__jw_reserve_slow(struct gt__jw *w, size_t n);

/*
 * Returns a pointer to at least n (<= GT__JW_MAX_RESERVE) free bytes at the
 * end of the buffer. Write into it, then call gt__jw_commit with the end.
 */
static inline char *gt__jw_reserve(struct gt__jw *w, size_t n)
{
    if (w->cap - w->len >= n)
        return w->buf + w->len;
    return gt__jw_reserve_slow(w, n);
}

/* Marks the bytes up to end (inside the last reservation) as written. */
static inline void gt__jw_commit(struct gt__jw *w, char *end)
{
    size_t n = (size_t)(end - (w->buf + w->len));
    w->len += n;
    w->bytes += n;
}

/* Appends n bytes of any size (copied in pieces when large). */
void gt__jw_put(struct gt__jw *w, const void *data, size_t n);

static inline void gt__jw_puts(struct gt__jw *w, const char *s)
{
    gt__jw_put(w, s, strlen(s));
}

/*
 * Appends s (n bytes, any content) as a JSON string literal with quotes,
 * escaping as gt__json_escape does.
 */
void gt__jw_str(struct gt__jw *w, const char *s, size_t n);

/* Appends a decimal unsigned / signed integer. */
void gt__jw_u64(struct gt__jw *w, uint64_t v);
void gt__jw_i64(struct gt__jw *w, int64_t v);

/* ------------------------------------------------------ formatting */

/* Worst-case escaped size of n input bytes (without quotes). */
#define GT__JSON_ESCAPED_MAX(n) ((n) * 6)

/*
 * Escapes n bytes of s into out (room for GT__JSON_ESCAPED_MAX(n) bytes) as
 * the inside of a JSON string: '"' and '\\' get a backslash, control
 * characters become \n, \t, ... or \u00XX, valid UTF-8 is copied as is and
 * every byte of an invalid UTF-8 sequence (overlong forms, surrogates, code
 * points above U+10FFFF, truncated sequences) becomes U+FFFD.
 * @return bytes written to out.
 */
size_t gt__json_escape(char *out, const char *s, size_t n);

/*
 * The text a JSON reader gets back from gt__json_escape(in): in itself,
 * with each byte that is not valid UTF-8 replaced by U+FFFD. out needs
 * 3 * n bytes. @return the bytes written (not NUL-terminated).
 */
size_t gt__json_text(char *out, const char *in, size_t n);

extern const char gt__digits2[200];

/* The number of decimal digits of v. */
static inline unsigned gt__dec_len(uint64_t v)
{
    unsigned n = 1;
    for (;;) {
        if (v < 10)
            return n;
        if (v < 100)
            return n + 1;
        if (v < 1000)
            return n + 2;
        if (v < 10000)
            return n + 3;
        v /= 10000;
        n += 4;
    }
}

/* Writes v in decimal at p, two digits at a time from its end, in place.
 * @return the end of what was written. */
static inline char *gt__fmt_u64(char *p, uint64_t v)
{
    char *end = p + gt__dec_len(v), *t = end;
    while (v >= 100) {
        unsigned i = (unsigned)(v % 100) * 2;
        v /= 100;
        t -= 2;
        t[0] = gt__digits2[i];
        t[1] = gt__digits2[i + 1];
    }
    if (v >= 10) {
        t -= 2;
        t[0] = gt__digits2[v * 2];
        t[1] = gt__digits2[v * 2 + 1];
    } else {
        *--t = (char)('0' + v);
    }
    return end;
}

static inline char *gt__fmt_i64(char *p, int64_t v)
{
    if (v < 0) {
        *p++ = '-';
        return gt__fmt_u64(p, (uint64_t)0 - (uint64_t)v);
    }
    return gt__fmt_u64(p, (uint64_t)v);
}

/*
 * Writes ns nanoseconds as microseconds with exactly three decimals
 * ("1234.567", "0.042"), the Chrome trace unit with full ns precision.
 * @return the end of what was written.
 */
static inline char *gt__fmt_us(char *p, uint64_t ns)
{
    uint64_t us = ns / 1000;
    unsigned frac = (unsigned)(ns - us * 1000);
    p = gt__fmt_u64(p, us);
    p[0] = '.';
    p[1] = (char)('0' + frac / 100);
    p[2] = gt__digits2[(frac % 100) * 2];
    p[3] = gt__digits2[(frac % 100) * 2 + 1];
    return p + 4;
}

/* Copies a literal (compile-time string) at p. */
#define GT__LIT(p, s) (memcpy((p), (s), sizeof(s) - 1), (p) + sizeof(s) - 1)

#endif /* GRADTRACE_DAEMON_JSONW_H */
