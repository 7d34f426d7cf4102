/*
 * What every subcommand's option parsing shares. Each subcommand runs its
 * own getopt_long loop over its own option table; these helpers keep the
 * parts that must look alike (how getopt is started, how bad usage is
 * reported, how a number option is read) in one place.
 */
#include "daemon/cli/cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>

#include "common/util.h"

/* The subcommand being parsed, for the messages below. */
static const char *cur_prog = "gradtrace";

void gt__cli_opt_begin(char **argv, const char *prog)
{
    cur_prog = prog;
    /* The subcommands take argv by value from main and own its slots, as
     * execv's callers do; the strings stay untouched. */
    argv[0] = (char *)prog;
    optind = 0;
}

int gt__cli_usage_error(const char *prog, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "%s: ", prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return GT__EXIT_USAGE;
}

int gt__cli_parse_count(const char *opt, const char *s, uint64_t lo,
                        uint64_t hi, uint64_t *out)
{
    if (gt__parse_u64(s, lo, hi, out) < 0) {
        fprintf(stderr, "%s: %s: '%s' is not an integer from %llu to %llu\n",
                cur_prog, opt, s, (unsigned long long)lo, (unsigned long long)hi);
        return -EINVAL;
    }
    return 0;
}
