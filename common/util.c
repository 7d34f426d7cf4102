/*
 * The common helpers of util.h that are not inline. Everything but
 * gt__fail is async-signal-safe: the agent calls them from its crash
 * handler and its streamer alike.
 */
#include "common/util.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int gt__write_all(int fd, const void *buf, size_t len, int flags,
                  int timeout_ms)
{
    const unsigned char *p = buf;
    int saved = errno, waited = 0, rc = 0;

    while (len) {
        ssize_t n = (flags & GT__WRITE_SOCKET) ? send(fd, p, len, MSG_NOSIGNAL)
                                               : write(fd, p, len);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd pfd = {.fd = fd, .events = POLLOUT};
            int step = timeout_ms - waited > 100 ? 100 : timeout_ms - waited;
            if (step <= 0) {
                rc = -ETIMEDOUT;
                break;
            }
            if (poll(&pfd, 1, step) == 0)
                waited += step;
            continue;
        }
        rc = n < 0 ? -errno : -EIO;
        break;
    }
    errno = saved;
    return rc;
}

int gt__parse_u64n(const char *s, size_t len, uint64_t lo, uint64_t hi,
                   uint64_t *out)
{
    uint64_t v = 0;
    int over = 0;

    if (len == 0 || len > 20)
        return len > 20 ? -ERANGE : -EINVAL;
    for (size_t i = 0; i < len; i++) {
        unsigned d = (unsigned char)s[i] - '0';
        if (d > 9)
            return -EINVAL;
        if (v > (UINT64_MAX - d) / 10)
            over = 1;
        else
            v = v * 10 + d;
    }
    if (over || v < lo || v > hi)
        return -ERANGE;
    *out = v;
    return 0;
}

static size_t text_len(const char *s)
{
    size_t n = 0;
    while (s[n])
        n++;
    return n;
}

int gt__parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    return gt__parse_u64n(s, text_len(s), lo, hi, out);
}

int gt__parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    uint64_t mag;
    int neg = s[0] == '-';
    int rc = gt__parse_u64n(s + neg, text_len(s + neg), 0,
                            neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX,
                            &mag);
    if (rc)
        return rc;
    int64_t v = neg ? (mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag)
                    : (int64_t)mag;
    if (v < lo || v > hi)
        return -ERANGE;
    *out = v;
    return 0;
}

int gt__fail(char *err, size_t cap, int rc, const char *fmt, ...)
{
    va_list ap;

    if (cap) {
        va_start(ap, fmt);
        vsnprintf(err, cap, fmt, ap);
        va_end(ap);
    }
    return rc;
}

size_t gt__utf8_len(const unsigned char *s, size_t n)
{
    unsigned c;

    if (n == 0)
        return 0;
    c = s[0];
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        return n >= 2 && (s[1] & 0xc0) == 0x80 ? 2 : 0;
    if (c >= 0xe0 && c <= 0xef) {
        if (n < 3 || (s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80)
            return 0;
        if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] >= 0xa0))
            return 0; /* overlong, or a UTF-16 surrogate */
        return 3;
    }
    if (c >= 0xf0 && c <= 0xf4) {
        if (n < 4 || (s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80 ||
            (s[3] & 0xc0) != 0x80)
            return 0;
        if ((c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] >= 0x90))
            return 0; /* overlong, or above U+10FFFF */
        return 4;
    }
    return 0; /* 0x80..0xc1 (continuation, overlong lead), 0xf5.. */
}

/* Length of the character at s (n bytes left) when it is valid UTF-8 and
 * no C0 control, DEL or C1 control (U+0080..U+009F, 0xc2 0x80..0x9f in
 * UTF-8); 0 otherwise. */
static size_t clean_char_len(const unsigned char *s, size_t n)
{
    size_t k = gt__utf8_len(s, n);

    if (k == 1 && (s[0] < 0x20 || s[0] == 0x7f))
        return 0;
    if (k == 2 && s[0] == 0xc2 && s[1] < 0xa0)
        return 0;
    return k;
}

int gt__text_is_clean(const char *s)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t n = strlen(s), i = 0, k;

    while (i < n) {
        if ((k = clean_char_len(u + i, n - i)) == 0)
            return 0;
        i += k;
    }
    return 1;
}

size_t gt__text_clean(char *s)
{
    unsigned char *u = (unsigned char *)s;
    size_t n = strlen(s), i = 0, o = 0;

    while (i < n) {
        size_t k = clean_char_len(u + i, n - i);

        if (k == 0) {
            /* A control or an invalid byte: one '?' for the whole
             * character (a C1 control is two bytes). */
            size_t len = gt__utf8_len(u + i, n - i);
            u[o++] = '?';
            i += len ? len : 1;
            continue;
        }
        memmove(u + o, u + i, k);
        o += k;
        i += k;
    }
    u[o] = '\0';
    return o;
}
