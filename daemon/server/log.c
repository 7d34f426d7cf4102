/*
 * The daemon's log: one line per event, wall-clock timestamp first, formatted
 * into one buffer and written with gt__write_all so lines from a crash or a
 * signal stay whole. The daemon logs to stderr in the foreground and to a
 * file when detached. Control bytes are replaced, since lines quote
 * untrusted agent text.
 */
#include "daemon/server/server.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/util.h"

static int log_fd = 2;

void gt__log_set_fd(int fd)
{
    log_fd = fd;
}

void gt__log(const char *fmt, ...)
{
    char line[1024];
    uint64_t now = gt__real_ns();
    time_t sec = (time_t)(now / 1000000000u);
    struct tm tm;
    size_t n;
    va_list ap;
    int saved = errno;

    localtime_r(&sec, &tm);
    n = strftime(line, sizeof(line), "%Y-%m-%d %H:%M:%S", &tm);
    n += (size_t)snprintf(line + n, sizeof(line) - n, ".%03ld gradtraced: ",
                          (long)(now % 1000000000u / 1000000));
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
    va_end(ap);
    /* Agent text (command lines, host names) appears in log lines: a
     * control byte (C0, DEL or C1) must not forge a line or drive a
     * terminal, and the log stays valid UTF-8. */
    n = gt__text_clean(line);
    line[n++] = '\n';
    /* gt__write_all leaves errno alone, so it can be restored first. A
     * log line that cannot be written is dropped: there is nowhere else
     * to report it. */
    errno = saved;
    if (gt__write_all(log_fd, line, n, 0, 0) < 0)
        return;
}
