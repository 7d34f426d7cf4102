/*
 * A strict JSON checker (RFC 8259), fed a byte at a time: the converter's
 * readers of untrusted trace files (`gradtrace merge`, repair) use it to
 * tell JSON from what only looks like it before they pass bytes on, so
 * that no file they write is invalid. Strings must be valid UTF-8 (no
 * overlong forms, no UTF-16 surrogates, raw or escaped as a lone
 * \uD800..\uDFFF) without raw control characters; numbers follow the
 * grammar (no leading zeros, no '+', no NaN); nesting deeper than
 * GT__JCHK_DEPTH is refused. Internal to the converter library; pure, no
 * I/O, no allocation.
 */
#ifndef GRADTRACE_DAEMON_CONV_JSONCHK_H
#define GRADTRACE_DAEMON_CONV_JSONCHK_H

#include <stddef.h>
#include <stdint.h>

#define GT__JCHK_DEPTH 64

struct gt__jchk {
    uint8_t st;                    /* what the next byte may be */
    uint8_t utf8_left;             /* continuation bytes still due */
    uint8_t utf8_lo, utf8_hi;      /* range of the next continuation */
    uint8_t hex_left;              /* \uXXXX digits still due */
    uint16_t hex;                  /* the escape's value so far */
    uint8_t high_surrogate;        /* an escaped high surrogate awaits its low */
    uint8_t key;                   /* the string being read is a key */
    const char *lit;               /* true / false / null: bytes still due */
    int depth;
    int done;                      /* a whole top-level value was read */
    int bad;                       /* a byte was refused */
    uint8_t stack[GT__JCHK_DEPTH]; /* '{' or '[' per open container */
};

void gt__jchk_init(struct gt__jchk *j);

/*
 * Feeds one byte. After the top-level value only whitespace may follow.
 * @return 0 while the text can still be JSON, -EINVAL at the first byte
 *         that makes it not JSON (and for every byte after it).
 */
int gt__jchk_byte(struct gt__jchk *j, unsigned char c);

/* Whether the bytes fed so far are one whole JSON value (whitespace
 * around it allowed). */
static inline int gt__jchk_whole(const struct gt__jchk *j)
{
    return j->done && !j->bad;
}

/* Whether s[0..n) is one JSON value and nothing else but whitespace. */
int gt__json_check(const char *s, size_t n);

#endif /* GRADTRACE_DAEMON_CONV_JSONCHK_H */
