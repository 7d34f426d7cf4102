/*
 * daemon/cli/opt.c and the reply readers of daemon/cli/client.c: what the
 * subcommands share for their options, their usage errors and printing
 * what the daemon replies. The subcommands themselves run as processes in
 * tests/e2e/t_cli_*.sh.
 */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "daemon/cli/cli.h"
#include "tests/unit/stderr_fixture.h"


static size_t count_lines(const char *s)
{
    size_t n = 0;

    for (; (s = strchr(s, '\n')); s++)
        n++;
    return n;
}

Test(cli_opt, begin_restarts_getopt_with_the_new_ordering)
{
    static const struct option none[] = {{NULL, 0, NULL, 0}};
    char *top[] = {"gradtrace", "convert", "in.gtr", "-o", "out.json", NULL};
    char **sub = top + 1;

    /* main's parse: '+' stops at the command's name. */
    cr_assert_eq(getopt_long(5, top, "+h", none, NULL), -1);
    cr_assert_eq(optind, 1);
    /* The subcommand permutes: -o after the operand must still be seen,
     * which glibc does only when told to start afresh. */
    gt__cli_opt_begin(sub, "gradtrace convert");
    cr_assert_str_eq(sub[0], "gradtrace convert");
    cr_assert_eq(getopt_long(4, sub, "o:", none, NULL), 'o');
    cr_assert_str_eq(optarg, "out.json");
    cr_assert_eq(getopt_long(4, sub, "o:", none, NULL), -1);
    cr_assert_eq(optind, 3, "the operand is permuted after the options");
    cr_assert_str_eq(sub[optind], "in.gtr");
}

Test(cli_opt, begin_lets_a_plus_parse_stop_at_the_command)
{
    static const struct option longopts[] = {
        {"raw", no_argument, NULL, 'r'},
        {NULL, 0, NULL, 0},
    };
    char *first[] = {"status", "x", "--raw", NULL};
    char *rec[] = {"record", "--raw", "--", "cmd", "--raw", NULL};

    /* A permuting parse first, as a previous subcommand might run. */
    gt__cli_opt_begin(first, "gradtrace status");
    cr_assert_eq(getopt_long(3, first, "", longopts, NULL), 'r');
    cr_assert_eq(getopt_long(3, first, "", longopts, NULL), -1);
    gt__cli_opt_begin(rec, "gradtrace record");
    cr_assert_eq(getopt_long(5, rec, "+", longopts, NULL), 'r');
    cr_assert_eq(getopt_long(5, rec, "+", longopts, NULL), -1);
    cr_assert_eq(optind, 3, "\"--\" is consumed, CMD's own --raw is not");
    cr_assert_str_eq(rec[optind], "cmd");
    cr_assert_str_eq(rec[4], "--raw");
}

Test(cli_opt, usage_error_is_one_line_and_exit_2, .init = cr_redirect_stderr)
{
    char err[256];

    cr_assert_eq(gt__cli_usage_error("gradtrace status", "unexpected argument '%s'", "x"),
                 GT__EXIT_USAGE);
    read_stderr(err, sizeof(err));
    cr_assert_str_eq(err, "gradtrace status: unexpected argument 'x'\n");
}

Test(cli_opt, parse_count_accepts_plain_integers_in_range, .init = cr_redirect_stderr)
{
    uint64_t v = 7;
    char err[256];

    cr_assert_eq(gt__cli_parse_count("--rank", "0", 0, 10, &v), 0);
    cr_assert_eq(v, 0);
    cr_assert_eq(gt__cli_parse_count("--pid", "9000000000000000", 1,
                                     9000000000000000ull, &v), 0);
    cr_assert_eq(v, 9000000000000000ull);
    cr_assert_eq(read_stderr(err, sizeof(err)), 0, "stderr must stay clean: %s", err);
}

Test(cli_opt, parse_count_rejects_and_says_why_on_one_line, .init = cr_redirect_stderr)
{
    static const char *const bad[] = {"abc", "", "5.0", "1e3", " 5", "+5", "-1", "0", "11"};
    static const char first[] = "gradtrace start: --pid: 'abc' is not an integer from 1 to 10\n";
    char prog0[] = "x", *argv[] = {prog0, NULL};
    uint64_t v = 7;
    char err[2048];

    gt__cli_opt_begin(argv, "gradtrace start"); /* messages name the command */
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        cr_assert_eq(gt__cli_parse_count("--pid", bad[i], 1, 10, &v), -EINVAL,
                     "'%s' accepted", bad[i]);
    cr_assert_eq(v, 7, "a refused value leaves *out alone");
    read_stderr(err, sizeof(err));
    cr_assert_eq(count_lines(err), sizeof(bad) / sizeof(bad[0]), "%s", err);
    cr_assert(strncmp(err, first, strlen(first)) == 0, "%s", err);
}

Test(cli_reply, str_replaces_control_bytes_for_the_terminal)
{
    cJSON *o = cJSON_CreateObject();

    cJSON_AddStringToObject(o, "command", "a\x1b[31mb\x7f\tc");
    cJSON_AddNumberToObject(o, "pid", 12);
    cr_assert_str_eq(gt__cli_str(o, "command"), "a?[31mb??c");
    cr_assert_str_eq(gt__cli_str(o, "pid"), "", "a number is not a string");
    cr_assert_str_eq(gt__cli_str(o, "absent"), "");
    cJSON_Delete(o);
}

Test(cli_reply, num_is_zero_when_absent_or_not_a_number)
{
    cJSON *o = cJSON_CreateObject();

    cJSON_AddNumberToObject(o, "pid", 12);
    cJSON_AddStringToObject(o, "rank", "3");
    cr_assert_eq(gt__cli_num(o, "pid"), 12);
    cr_assert_eq(gt__cli_num(o, "rank"), 0);
    cr_assert_eq(gt__cli_num(o, "absent"), 0);
    cJSON_Delete(o);
}
