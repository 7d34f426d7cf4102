/*
 * gradtrace: the one command users type.
 *
 *   daemon    exec gradtraced (beside this binary) with the same options
 *   status    query the daemon; a table, or the raw reply with --json
 *   start     capture on  (all agents, or --pid/--rank selections)
 *   stop      capture off
 *   trigger   arm a capture trigger from the CLI spelling of a spec
 *   convert   .gtr -> Chrome JSON (daemon/cmd_convert.c)
 *   record    run a command under the agent (daemon/cli_record.c)
 *
 * Requests are built with the same validation the daemon applies
 * (daemon/control.c), so a bad spec is reported here with the field it
 * names, before anything is sent.
 */
#include "daemon/cli/cli.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/paths.h"

static const char main_usage[] =
    "usage: gradtrace COMMAND [ARGS...]\n"
    "\n"
    "Commands:\n"
    "  record [-o DIR] [--trigger SPEC]... [--raw] -- CMD [ARGS...]\n"
    "                      run CMD with the agent; print the traces written\n"
    "  daemon [--output-dir D] [--foreground] [--raw] [--max-file-mb N]\n"
    "                      start the collecting daemon (gradtraced)\n"
    "  status [--json]     the daemon, its agents, triggers and files\n"
    "  start [--pid N]... [--rank N]... [--duration-ms N | --iterations N]\n"
    "  stop [--pid N]... [--rank N]...\n"
    "                      turn capture on/off in all or selected agents\n"
    "  trigger SPEC | --clear\n"
    "                      SPEC: layer=NAME[,phase=forward|backward|both]\n"
    "                      [,iteration=N|next][,count=N][,ranks=0,3][,pids=..]\n"
    "  convert IN.gtr [-o OUT.json]\n"
    "                      convert a recorded stream to Chrome-trace JSON\n"
    "  report [--sort model|fwd|bwd|name] [--csv] TRACE...\n"
    "                      per-layer forward/backward table of a trace or .gtr\n"
    "\n"
    "Every command takes --help. The daemon's sockets are found as the\n"
    "agents find them: $GRADTRACE_CONTROL / $GRADTRACE_SOCKET, else\n"
    "$XDG_RUNTIME_DIR/gradtrace or /tmp/gradtrace-<uid>.\n"
    "\n"
    "Exit status: 0 success; 1 error (no daemon, request refused, I/O);\n"
    "2 bad usage; record exits with CMD's status (128+N for signal N).\n";

static const char status_usage[] =
    "usage: gradtrace status [--json]\n"
    "Shows the daemon (version, uptime, output directory), connected agents\n"
    "(pid, rank, capture state, data received, losses), armed triggers and\n"
    "recently finished agents with their files. --json prints the daemon's\n"
    "reply as is (schema/control.md).\n";

static const char capture_usage[] =
    "usage: gradtrace start [--pid N]... [--rank N]... [--duration-ms N | --iterations N]\n"
    "       gradtrace stop [--pid N]... [--rank N]...\n"
    "Turns capture on or off in every connected agent, or in those whose pid\n"
    "or rank is listed (both lists given: both must match).\n";

static const char trigger_usage[] =
    "usage: gradtrace trigger layer=NAME[,phase=P][,iteration=N|next][,count=N]\n"
    "                         [,ranks=R1,R2...][,pids=P1,P2...]\n"
    "       gradtrace trigger --clear\n"
    "Arms a capture window in matching agents (present and future): NAME is\n"
    "a module path or glob (layers.1?.mlp); phase forward, backward (default)\n"
    "or both; iteration a number or next (default); count windows (default\n"
    "1). --clear disarms every trigger.\n";

static int want_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return 1;
    return 0;
}

static int control_path(char *buf, size_t cap)
{
    if (gt__control_socket_path(buf, cap) < 0) {
        fprintf(stderr, "gradtrace: control socket path too long\n");
        return -ENAMETOOLONG;
    }
    return 0;
}

static int cmd_daemon(int argc, char **argv)
{
    char dir[PATH_MAX], path[PATH_MAX + 16];

    if (gt__cli_exe_dir(dir, sizeof(dir)) < 0) {
        fprintf(stderr, "gradtrace: cannot find my own directory\n");
        return GT__EXIT_ERROR;
    }
    snprintf(path, sizeof(path), "%s/gradtraced", dir);
    argv[0] = "gradtraced";
    (void)argc;
    execv(path, argv);
    fprintf(stderr, "gradtrace: cannot run %s: %s\n", path, strerror(errno));
    return GT__EXIT_ERROR;
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

/*
 * A string member for the terminal. Agents supply command lines and host
 * names, so control bytes (escape sequences) are replaced in place: the
 * reply is ours to modify and is printed only once.
 */
static const char *str(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

    if (!cJSON_IsString(v))
        return "";
    for (char *p = v->valuestring; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
    return v->valuestring;
}

/* The triggers an agent was sent and the windows it fired. */
static void print_agent_triggers(const cJSON *a)
{
    const cJSON *trig = cJSON_GetObjectItemCaseSensitive(a, "triggers");
    const cJSON *fired = cJSON_GetObjectItemCaseSensitive(a, "fired");
    const cJSON *t;

    if (cJSON_GetArraySize(trig) == 0 && cJSON_GetArraySize(fired) == 0)
        return;
    printf("  pid %.0f:\n", num(a, "pid"));
    cJSON_ArrayForEach(t, trig)
        printf("    trigger #%.0f %s: %s (%.0f of %.0f windows)\n", num(t, "id"),
               str(t, "spec"), str(t, "state"), num(t, "windows"), num(t, "count"));
    /* The last 10 windows; a count=1000 trigger must not flood the table. */
    int skip = cJSON_GetArraySize(fired) - 10;
    if (skip > 0)
        printf("    ... %d earlier windows (status --json lists them)\n", skip);
    cJSON_ArrayForEach(t, fired)
        if (skip-- <= 0)
            printf("    window %.0f iteration %.0f %s %s: %s, %s\n", num(t, "id"),
                   num(t, "iteration"), str(t, "layer"), str(t, "phase"),
                   str(t, "state"), *str(t, "file") ? str(t, "file") : "no file yet");
}

static void print_status(const cJSON *r)
{
    const cJSON *agents = cJSON_GetObjectItemCaseSensitive(r, "agents");
    const cJSON *trig = cJSON_GetObjectItemCaseSensitive(r, "triggers");
    const cJSON *fin = cJSON_GetObjectItemCaseSensitive(r, "finished");
    const cJSON *tot = cJSON_GetObjectItemCaseSensitive(r, "totals");
    const cJSON *a;
    long up = (long)num(r, "uptime_s");

    printf("gradtraced %s  pid %.0f  up %ldh%02ldm%02lds\n", str(r, "version"),
           num(r, "pid"), up / 3600, up / 60 % 60, up % 60);
    printf("output   %s%s\n", str(r, "output_dir"),
           cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "raw")) ? " (raw .gtr kept)" : "");
    printf("sockets  %s, %s\n", str(r, "agent_socket"), str(r, "control_socket"));
    printf("\nagents: %d\n", cJSON_GetArraySize(agents));
    if (cJSON_GetArraySize(agents) > 0) {
        printf("  %-8s %-5s %-7s %10s %12s %10s %7s %7s  %s\n", "PID", "RANK",
               "CAPTURE", "BYTES", "RECORDS", "LOST-EV", "LOST-CH", "WINDOWS",
               "COMMAND");
        cJSON_ArrayForEach(a, agents) {
            char rank[16];

            if (num(a, "rank") >= 0)
                snprintf(rank, sizeof(rank), "%.0f", num(a, "rank"));
            else
                snprintf(rank, sizeof(rank), "-");
            printf("  %-8.0f %-5s %-7s %10.0f %12.0f %10.0f %7.0f %7.0f  %.60s\n",
                   num(a, "pid"), rank,
                   cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(a, "capture")) ? "on" : "off",
                   num(a, "bytes"), num(a, "records"), num(a, "lost_events"),
                   num(a, "lost_chunks"), num(a, "windows"), str(a, "command"));
        }
        cJSON_ArrayForEach(a, agents)
            print_agent_triggers(a);
    }
    printf("\ntriggers armed: %d\n", cJSON_GetArraySize(trig));
    cJSON_ArrayForEach(a, trig)
        printf("  #%.0f %s (sent to %.0f agent(s))\n", num(a, "id"), str(a, "spec"),
               num(a, "sent_to"));
    if (cJSON_GetArraySize(fin) > 0) {
        printf("\nfinished (most recent first):\n");
        cJSON_ArrayForEach(a, fin) {
            const cJSON *files = cJSON_GetObjectItemCaseSensitive(a, "files");
            const cJSON *f;

            printf("  pid %.0f %.40s: %s, %.0f records, %.0f events lost, "
                   "%.0f chunks lost\n", num(a, "pid"), str(a, "command"),
                   str(a, "end"), num(a, "records"), num(a, "lost_events"),
                   num(a, "lost_chunks"));
            cJSON_ArrayForEach(f, files)
                if (cJSON_IsString(f))
                    printf("      %s\n", f->valuestring); /* sanitized stems */
            print_agent_triggers(a);
        }
    }
    if (tot)
        printf("\ntotals: %.0f connections (%.0f refused, %.0f bad streams), "
               "%.0f bytes, %.0f records, %.0f files written\n",
               num(tot, "connections"), num(tot, "refused"), num(tot, "bad_streams"),
               num(tot, "bytes"), num(tot, "records"), num(tot, "files_written"));
}

static int cmd_status(int argc, char **argv)
{
    char path[108], err[256];
    cJSON *reply = NULL;
    int json = 0;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(status_usage, stdout);
            return GT__EXIT_OK;
        }
        if (strcmp(argv[i], "--json") != 0) {
            fprintf(stderr, "gradtrace status: unknown argument '%s'\n%s", argv[i],
                    status_usage);
            return GT__EXIT_USAGE;
        }
        json = 1;
    }
    if (control_path(path, sizeof(path)) < 0)
        return GT__EXIT_ERROR;
    if (gt__cli_simple(path, "status", 10000, &reply, err, sizeof(err)) < 0) {
        fprintf(stderr, "gradtrace status: %s\n", err);
        cJSON_Delete(reply);
        return GT__EXIT_ERROR;
    }
    if (json) {
        char *text = cJSON_Print(reply);

        if (text)
            printf("%s\n", text);
        cJSON_free(text);
    } else {
        print_status(reply);
    }
    cJSON_Delete(reply);
    return GT__EXIT_OK;
}

static int parse_count(const char *opt, const char *s, double min, double max,
                       double *out)
{
    char *end;
    double v;

    errno = 0;
    v = strtod(s, &end);
    if (errno || end == s || *end || v != (double)(long long)v || v < min || v > max) {
        fprintf(stderr, "gradtrace: %s: '%s' is not an integer from %.0f\n", opt,
                s, min);
        return -EINVAL;
    }
    *out = v;
    return 0;
}

static int cmd_capture(int argc, char **argv)
{
    int start = strcmp(argv[0], "start") == 0;
    cJSON *req = cJSON_CreateObject(), *pids, *ranks, *reply = NULL;
    char path[108], err[256];
    int rc = GT__EXIT_USAGE;

    if (!req)
        return GT__EXIT_ERROR;
    cJSON_AddStringToObject(req, "cmd", argv[0]);
    pids = cJSON_CreateArray();
    ranks = cJSON_CreateArray();
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        double v;

        if (strcmp(o, "--help") == 0 || strcmp(o, "-h") == 0) {
            fputs(capture_usage, stdout);
            rc = GT__EXIT_OK;
            goto out;
        }
        if (i + 1 >= argc || (strcmp(o, "--pid") && strcmp(o, "--rank") &&
                              (!start || (strcmp(o, "--duration-ms") &&
                                          strcmp(o, "--iterations"))))) {
            fprintf(stderr, "gradtrace %s: bad argument '%s'\n%s", argv[0], o,
                    capture_usage);
            goto out;
        }
        if (parse_count(o, argv[++i], strcmp(o, "--rank") == 0 ? 0 : 1, 9e15, &v) < 0)
            goto out;
        if (strcmp(o, "--pid") == 0)
            cJSON_AddItemToArray(pids, cJSON_CreateNumber(v));
        else if (strcmp(o, "--rank") == 0)
            cJSON_AddItemToArray(ranks, cJSON_CreateNumber(v));
        else
            cJSON_AddNumberToObject(req, o[2] == 'd' ? "duration_ms" : "iterations", v);
    }
    if (cJSON_GetArraySize(pids)) {
        cJSON_AddItemToObject(req, "pids", pids);
        pids = NULL;
    }
    if (cJSON_GetArraySize(ranks)) {
        cJSON_AddItemToObject(req, "ranks", ranks);
        ranks = NULL;
    }
    rc = GT__EXIT_ERROR;
    if (control_path(path, sizeof(path)) < 0)
        goto out;
    if (gt__cli_request(path, req, 10000, &reply, err, sizeof(err)) < 0) {
        fprintf(stderr, "gradtrace %s: %s\n", argv[0], err);
        goto out;
    }
    {
        char *text = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(reply, "pids"));

        printf("capture %s: pids %s\n", start ? "on" : "off", text ? text : "?");
        cJSON_free(text);
    }
    rc = GT__EXIT_OK;
out:
    cJSON_Delete(pids);
    cJSON_Delete(ranks);
    cJSON_Delete(req);
    cJSON_Delete(reply);
    return rc;
}

static int cmd_trigger(int argc, char **argv)
{
    struct gt__trigger t;
    char path[108], err[256];
    cJSON *req, *reply = NULL;
    int rc = GT__EXIT_ERROR;

    if (want_help(argc, argv)) {
        fputs(trigger_usage, stdout);
        return GT__EXIT_OK;
    }
    if (argc != 2) {
        fprintf(stderr, "gradtrace trigger: expected one SPEC\n%s", trigger_usage);
        return GT__EXIT_USAGE;
    }
    if (strcmp(argv[1], "--clear") == 0) {
        req = cJSON_CreateObject();
        if (req)
            cJSON_AddStringToObject(req, "cmd", "trigger_clear");
    } else {
        if (gt__trigger_parse_spec(argv[1], &t, err, sizeof(err)) < 0) {
            fprintf(stderr, "gradtrace trigger: %s\n", err);
            return GT__EXIT_USAGE;
        }
        req = gt__trigger_to_json(&t);
    }
    if (!req || control_path(path, sizeof(path)) < 0)
        goto out;
    if (gt__cli_request(path, req, 10000, &reply, err, sizeof(err)) < 0) {
        fprintf(stderr, "gradtrace trigger: %s\n", err);
        goto out;
    }
    if (strcmp(argv[1], "--clear") == 0) {
        printf("cleared %.0f trigger(s)\n", num(reply, "cleared"));
    } else {
        char *pids = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(reply, "pids"));

        printf("trigger #%.0f armed: %s\nsent to pids %s (and to matching agents "
               "that connect later)\n", num(reply, "trigger_id"), str(reply, "spec"),
               pids ? pids : "[]");
        cJSON_free(pids);
    }
    rc = GT__EXIT_OK;
out:
    cJSON_Delete(req);
    cJSON_Delete(reply);
    return rc;
}

int main(int argc, char **argv)
{
    const char *cmd = argc > 1 ? argv[1] : NULL;

    if (!cmd) {
        fputs(main_usage, stderr);
        return GT__EXIT_USAGE;
    }
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        fputs(main_usage, stdout);
        return GT__EXIT_OK;
    }
    if (strcmp(cmd, "--version") == 0) {
        printf("gradtrace %s\n", GT__VERSION);
        return GT__EXIT_OK;
    }
    if (strcmp(cmd, "record") == 0)
        return gt__cmd_record(argc - 1, argv + 1);
    if (strcmp(cmd, "daemon") == 0)
        return cmd_daemon(argc - 1, argv + 1);
    if (strcmp(cmd, "status") == 0)
        return cmd_status(argc - 1, argv + 1);
    if (strcmp(cmd, "start") == 0 || strcmp(cmd, "stop") == 0)
        return cmd_capture(argc - 1, argv + 1);
    if (strcmp(cmd, "trigger") == 0)
        return cmd_trigger(argc - 1, argv + 1);
    if (strcmp(cmd, "convert") == 0)
        return gt__cmd_convert(argc - 1, argv + 1);
    if (strcmp(cmd, "report") == 0)
        return gt__cmd_report(argc - 1, argv + 1);
    fprintf(stderr, "gradtrace: unknown command '%s'\n%s", cmd, main_usage);
    return GT__EXIT_USAGE;
}
