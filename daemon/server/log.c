/*
 * The daemon's log: one line per event, wall-clock timestamp first, written
 * with a single write(2) so lines from a crash or a signal stay whole. The
 * daemon logs to stderr in the foreground and to a file when detached.
 * Control bytes are replaced, since lines quote untrusted agent text.
 */
#include "daemon/server/server.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static int log_fd = 2;

void gt__log_set_fd(int fd)
{
    log_fd = fd;
}

void gt__log(const char *fmt, ...)
{
    char line[1024];
    struct timespec ts;
    struct tm tm;
    size_t n;
    va_list ap;
    int saved = errno;

    clock_gettime(CLOCK_REALTIME, &ts);
    localtime_r(&ts.tv_sec, &tm);
    n = strftime(line, sizeof(line), "%Y-%m-%d %H:%M:%S", &tm);
    n += (size_t)snprintf(line + n, sizeof(line) - n, ".%03ld gradtraced: ",
                          ts.tv_nsec / 1000000);
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
    va_end(ap);
    n = strlen(line);
    /* Agent text (command lines, host names) appears in log lines: a
     * control byte must not forge a line or drive a terminal. */
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)line[i] < 0x20 || line[i] == 0x7f)
            line[i] = '?';
    line[n++] = '\n';
    /* A log line that cannot be written is dropped: there is nowhere
     * else to report it. */
    while (write(log_fd, line, n) < 0 && errno == EINTR)
        ;
    errno = saved;
}
