/*
 * `gradtrace start` and `gradtrace stop`: capture on or off in every
 * connected agent, or in those selected by --pid/--rank. Both share the
 * parsing and the request; start alone may bound the capture by time
 * (--duration-ms, which the daemon ends) or by iterations (--iterations,
 * training steps, which the agents end by themselves; they begin every
 * capture at the next iteration boundary: schema/control.md).
 */
#include "daemon/cli/cli.h"

#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdio.h>

static const char capture_usage[] =
    "usage: gradtrace start [--pid N]... [--rank N]... [--duration-ms N | --iterations N]\n"
    "       gradtrace stop [--pid N]... [--rank N]...\n"
    "Turns capture on or off in every connected agent, or in those whose pid\n"
    "or rank is listed (both lists given: both must match). start begins at\n"
    "each job's next iteration (training step), so it is whole; --iterations N\n"
    "captures exactly N of them, then stops.\n";

/* The largest count a JSON number (a double) carries exactly, rounded
 * down to a round figure. */
#define COUNT_MAX 9000000000000000ull

enum { OPT_PID = 1, OPT_RANK, OPT_DURATION, OPT_ITERATIONS };

static const struct option start_opts[] = {
    {"pid", required_argument, NULL, OPT_PID},
    {"rank", required_argument, NULL, OPT_RANK},
    {"duration-ms", required_argument, NULL, OPT_DURATION},
    {"iterations", required_argument, NULL, OPT_ITERATIONS},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* stop takes the selections only: the bounds make no sense for it. */
static const struct option stop_opts[] = {
    {"pid", required_argument, NULL, OPT_PID},
    {"rank", required_argument, NULL, OPT_RANK},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* Adds the value of option c (its text in arg) to the request. */
static int add_option(cJSON *req, cJSON *pids, cJSON *ranks, int c, const char *arg)
{
    static const char *const name[] = {
        [OPT_PID] = "--pid", [OPT_RANK] = "--rank",
        [OPT_DURATION] = "--duration-ms", [OPT_ITERATIONS] = "--iterations",
    };
    uint64_t v;

    if (gt__cli_parse_count(name[c], arg, c == OPT_RANK ? 0 : 1, COUNT_MAX, &v) < 0)
        return -1;
    if (c == OPT_PID)
        cJSON_AddItemToArray(pids, cJSON_CreateNumber((double)v));
    else if (c == OPT_RANK)
        cJSON_AddItemToArray(ranks, cJSON_CreateNumber((double)v));
    else
        cJSON_AddNumberToObject(req, c == OPT_DURATION ? "duration_ms" : "iterations",
                                (double)v);
    return 0;
}

/*
 * Builds {"cmd": "start"|"stop", "pids": [...], "ranks": [...], ...} from
 * the command line; the lists only when given.
 * @return -1 when the request is built, else the exit status (0 after
 *         --help, 2 on bad usage).
 */
static int parse_request(int argc, char **argv, int start, const char *prog,
                         cJSON *req)
{
    cJSON *pids = cJSON_CreateArray(), *ranks = cJSON_CreateArray();
    int rc = -1, c;

    cJSON_AddStringToObject(req, "cmd", start ? "start" : "stop");
    gt__cli_opt_begin(argv, prog);
    while (rc < 0 &&
           (c = getopt_long(argc, argv, "h", start ? start_opts : stop_opts, NULL)) != -1) {
        if (c == 'h') {
            fputs(capture_usage, stdout);
            rc = GT__EXIT_OK;
        } else if (c == '?' || add_option(req, pids, ranks, c, optarg) < 0) {
            rc = GT__EXIT_USAGE; /* getopt or the number parser said why */
        }
    }
    if (rc < 0 && optind < argc)
        rc = gt__cli_usage_error(prog, "unexpected argument '%s'", argv[optind]);
    if (rc < 0 && cJSON_GetArraySize(pids)) {
        cJSON_AddItemToObject(req, "pids", pids);
        pids = NULL;
    }
    if (rc < 0 && cJSON_GetArraySize(ranks)) {
        cJSON_AddItemToObject(req, "ranks", ranks);
        ranks = NULL;
    }
    cJSON_Delete(pids);
    cJSON_Delete(ranks);
    return rc;
}

/* start and stop: parse, send, print the pids the daemon reached. */
static int capture(int argc, char **argv, int start)
{
    const char *prog = start ? "gradtrace start" : "gradtrace stop";
    cJSON *req = cJSON_CreateObject(), *reply = NULL;
    char path[108], err[256], *text;
    int rc;

    if (!req)
        return GT__EXIT_ERROR;
    rc = parse_request(argc, argv, start, prog, req);
    if (rc >= 0)
        goto out;
    rc = GT__EXIT_ERROR;
    if (gt__cli_control_path(path, sizeof(path)) < 0)
        goto out;
    if (gt__cli_request(path, req, 10000, &reply, err, sizeof(err)) < 0) {
        fprintf(stderr, "%s: %s\n", prog, err);
        goto out;
    }
    text = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(reply, "pids"));
    printf("capture %s: pids %s\n", start ? "on" : "off", text ? text : "?");
    cJSON_free(text);
    rc = GT__EXIT_OK;
out:
    cJSON_Delete(req);
    cJSON_Delete(reply);
    return rc;
}

int gt__cmd_start(int argc, char **argv)
{
    return capture(argc, argv, 1);
}

int gt__cmd_stop(int argc, char **argv)
{
    return capture(argc, argv, 0);
}
