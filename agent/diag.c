/*
 * Agent diagnostics: GT__DIAG lines to stderr, only with GRADTRACE_LOG
 * (warnings recorded into the trace are agent/warn.c's).
 *
 * gt__diag has its own small formatter because it must work in a signal
 * handler and inside the host's allocator: vsnprintf may allocate or take
 * locale locks. It supports what the agent uses: %s %c %d %i %u %x %p %%
 * with the l, ll and z length modifiers, and %.*s. Output is one line,
 * written with gt__write_all (one write(2) unless interrupted).
 */
#include <errno.h>
#include <stdarg.h>
#include <unistd.h>

#include "agent/internal.h"
#include "common/util.h"

int gt__diag_on;

struct out {
    char *p;
    char *end;
};

static void put(struct out *o, const char *s, size_t n)
{
    while (n-- && o->p < o->end)
        *o->p++ = *s++;
}

static void put_u(struct out *o, unsigned long long v, unsigned base, int neg)
{
    char tmp[24];
    int i = sizeof(tmp);

    do {
        tmp[--i] = "0123456789abcdef"[v % base];
        v /= base;
    } while (v);
    if (neg)
        tmp[--i] = '-';
    put(o, tmp + i, sizeof(tmp) - (size_t)i);
}

void gt__diag(const char *fmt, ...)
{
    int saved = errno;
    char buf[512];
    struct out o = {buf, buf + sizeof(buf) - 1};
    va_list ap;

    put(&o, "gradtrace[", 10);
    put_u(&o, (unsigned long long)getpid(), 10, 0);
    put(&o, "]: ", 3);
    va_start(ap, fmt);
    for (const char *f = fmt; *f; f++) {
        int lng = 0, sz = 0, prec = -1;

        if (*f != '%') {
            put(&o, f, 1);
            continue;
        }
        f++;
        if (f[0] == '.' && f[1] == '*') {
            prec = va_arg(ap, int);
            f += 2;
        }
        while (*f == 'l') {
            lng++;
            f++;
        }
        if (*f == 'z') {
            sz = 1;
            f++;
        }
        switch (*f) {
        case 's': {
            const char *s = va_arg(ap, const char *);
            if (!s)
                s = "(null)";
            put(&o, s, prec >= 0 ? strnlen(s, (size_t)prec) : strlen(s));
            break;
        }
        case 'c': {
            char ch = (char)va_arg(ap, int);
            put(&o, &ch, 1);
            break;
        }
        case 'd':
        case 'i': {
            long long v = sz ? (long long)va_arg(ap, ssize_t)
                          : lng >= 2 ? va_arg(ap, long long)
                          : lng ? va_arg(ap, long) : va_arg(ap, int);
            put_u(&o, v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v,
                  10, v < 0);
            break;
        }
        case 'u':
        case 'x': {
            unsigned long long v = sz ? va_arg(ap, size_t)
                                   : lng >= 2 ? va_arg(ap, unsigned long long)
                                   : lng ? va_arg(ap, unsigned long)
                                   : va_arg(ap, unsigned);
            put_u(&o, v, *f == 'x' ? 16 : 10, 0);
            break;
        }
        case 'p':
            put(&o, "0x", 2);
            put_u(&o, (unsigned long long)(uintptr_t)va_arg(ap, void *), 16, 0);
            break;
        case '%':
            put(&o, "%", 1);
            break;
        case '\0':
            f--;
            break;
        default:
            put(&o, "?", 1);
            break;
        }
    }
    va_end(ap);
    *o.p++ = '\n';
    /* No wait: a full nonblocking stderr loses the line, not our time;
     * and there is nowhere to report that it did. */
    int rc = gt__write_all(STDERR_FILENO, buf, (size_t)(o.p - buf), 0, 0);
    (void)rc;
    errno = saved;
}
