/*
 * What a test wrote to stderr, for tests that cr_redirect_stderr() (shared
 * by the CLI and agent-configuration tests).
 */
#ifndef GRADTRACE_TESTS_STDERR_FIXTURE_H
#define GRADTRACE_TESTS_STDERR_FIXTURE_H

#include <criterion/redirect.h>
#include <stdio.h>

/* Everything written to the redirected stderr so far, NUL-terminated. */
static inline size_t read_stderr(char *buf, size_t cap)
{
    FILE *f;
    size_t n;

    fflush(stderr);
    f = cr_get_redirected_stderr();
    n = fread(buf, 1, cap - 1, f);
    buf[n] = '\0';
    return n;
}

#endif
