/*
 * The small helpers everybody needs, once: clock reads, write-all, FNV-1a,
 * decimal number parsing and error-message formatting. Used by the agent,
 * the converter, the server and the CLI alike, so it depends on nothing
 * but libc.
 *
 * Async-signal-safe unless a doc block says otherwise: the clocks are
 * clock_gettime, gt__write_all is write/send/poll, the hashes and parsers
 * touch only their arguments. errno is preserved by everything that does
 * not report through it.
 */
#ifndef GRADTRACE_COMMON_UTIL_H
#define GRADTRACE_COMMON_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC and CLOCK_REALTIME in nanoseconds. Any thread, signal
 * handlers included. */
static inline uint64_t gt__mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t gt__real_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* How gt__write_all writes. */
enum {
    GT__WRITE_SOCKET = 1,  /* send(MSG_NOSIGNAL): a closed peer is -EPIPE,
                            * never SIGPIPE in someone else's process */
};

/*
 * Writes all len bytes of buf to fd, looping on EINTR and short writes.
 * On a nonblocking fd that is full, waits in poll(2) for at most
 * timeout_ms in total (0: do not wait).
 * @return 0, -ETIMEDOUT when the wait ran out, or another -errno (-EIO
 *         for a write of 0 bytes). Async-signal-safe.
 */
int gt__write_all(int fd, const void *buf, size_t len, int flags,
                  int timeout_ms) __attribute__((warn_unused_result));

/* 64- and 32-bit FNV-1a of n bytes (the 64-bit one continues from h;
 * start with GT__FNV64_INIT). */
#define GT__FNV64_INIT 14695981039346656037ull
static inline uint64_t gt__fnv1a64(uint64_t h, const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 1099511628211ull;
    return h;
}

static inline uint32_t gt__fnv1a32(const void *p, size_t n)
{
    const unsigned char *s = p;
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 16777619u;
    return h;
}

/*
 * Parses exactly len bytes of s as a decimal number in [lo, hi]: digits
 * only (no sign, space or suffix), at most 20 of them.
 * @return 0 and *out, or -EINVAL (not a number) / -ERANGE (outside
 *         [lo, hi], overflow included).
 */
int gt__parse_u64n(const char *s, size_t len, uint64_t lo, uint64_t hi,
                   uint64_t *out) __attribute__((warn_unused_result));

/* gt__parse_u64n over a NUL-terminated string. */
int gt__parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
    __attribute__((warn_unused_result));

/* The same for a number with an optional leading '-', in [lo, hi]. */
int gt__parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
    __attribute__((warn_unused_result));

/*
 * Length of the valid UTF-8 sequence (RFC 3629: no overlong forms, no
 * UTF-16 surrogates, nothing above U+10FFFF) starting at s, with n bytes
 * left; 1 for ASCII.
 * @return 1 to 4, or 0 when the bytes at s are not valid UTF-8 (or n is 0).
 */
size_t gt__utf8_len(const unsigned char *s, size_t n);

/*
 * Makes the NUL-terminated string s, in place, valid UTF-8 without
 * control characters: every byte that is not part of a valid sequence,
 * and every C0 control, DEL and C1 control (U+0080..U+009F, which some
 * terminals take as CSI and friends), becomes one '?'. The string can
 * only shrink. Agent text goes through it before the daemon logs it,
 * replies with it or a CLI prints it.
 * @return the new length.
 */
size_t gt__text_clean(char *s);

/* Whether gt__text_clean would leave s as it is. */
int gt__text_is_clean(const char *s);

/*
 * Formats a one-line message into err (cap bytes, always NUL-terminated
 * when cap > 0) and returns rc, so that a check reads
 * `return gt__fail(err, cap, -EINVAL, "layer: empty");`.
 * Not async-signal-safe (vsnprintf).
 */
int gt__fail(char *err, size_t cap, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif /* GRADTRACE_COMMON_UTIL_H */
