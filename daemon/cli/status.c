/*
 * `gradtrace status [--json]`: asks the daemon for its state and prints it
 * as a table (or the reply as is with --json, schema/control.md).
 */
#include "daemon/cli/cli.h"

#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdio.h>

static const char status_usage[] =
    "usage: gradtrace status [--json]\n"
    "Shows the daemon (version, uptime, output directory), connected agents\n"
    "(pid, rank, capture state, data received, losses), armed triggers and\n"
    "recently finished agents with their files. --json prints the daemon's\n"
    "reply as is (schema/control.md).\n";

/* The triggers an agent was sent and the windows it fired. */
static void print_agent_triggers(const cJSON *a)
{
    const cJSON *trig = cJSON_GetObjectItemCaseSensitive(a, "triggers");
    const cJSON *fired = cJSON_GetObjectItemCaseSensitive(a, "fired");
    const cJSON *t;

    if (cJSON_GetArraySize(trig) == 0 && cJSON_GetArraySize(fired) == 0)
        return;
    printf("  pid %.0f:\n", gt__cli_num(a, "pid"));
    cJSON_ArrayForEach(t, trig)
        printf("    trigger #%.0f %s: %s (%.0f of %.0f windows)\n",
               gt__cli_num(t, "id"), gt__cli_str(t, "spec"), gt__cli_str(t, "state"),
               gt__cli_num(t, "windows"), gt__cli_num(t, "count"));
    /* The last 10 windows; a count=1000 trigger must not flood the table. */
    int skip = cJSON_GetArraySize(fired) - 10;
    if (skip > 0)
        printf("    ... %d earlier windows (status --json lists them)\n", skip);
    cJSON_ArrayForEach(t, fired) {
        const char *file = gt__cli_str(t, "file");

        if (skip-- <= 0)
            printf("    window %.0f iteration %.0f %s %s: %s, %s\n",
                   gt__cli_num(t, "id"), gt__cli_num(t, "iteration"),
                   gt__cli_str(t, "layer"), gt__cli_str(t, "phase"),
                   gt__cli_str(t, "state"), *file ? file : "no file yet");
    }
}

static int is_true(const cJSON *o, const char *k)
{
    return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, k));
}

/* The connected agents, one row each, then their triggers. */
static void print_agents(const cJSON *agents)
{
    const cJSON *a;

    printf("\nagents: %d\n", cJSON_GetArraySize(agents));
    if (cJSON_GetArraySize(agents) == 0)
        return;
    printf("  %-8s %-5s %-7s %10s %12s %10s %7s %7s  %s\n", "PID", "RANK",
           "CAPTURE", "BYTES", "RECORDS", "LOST-EV", "LOST-CH", "WINDOWS",
           "COMMAND");
    cJSON_ArrayForEach(a, agents) {
        char rank[16], capture[16];

        snprintf(capture, sizeof(capture), "%s%s", is_true(a, "capture") ? "on" : "off",
                 is_true(a, "ops") ? "+ops" : "");
        if (gt__cli_num(a, "rank") >= 0)
            snprintf(rank, sizeof(rank), "%.0f", gt__cli_num(a, "rank"));
        else
            snprintf(rank, sizeof(rank), "-");
        printf("  %-8.0f %-5s %-7s %10.0f %12.0f %10.0f %7.0f %7.0f  %.60s\n",
               gt__cli_num(a, "pid"), rank, capture,
               gt__cli_num(a, "bytes"), gt__cli_num(a, "records"),
               gt__cli_num(a, "lost_events"), gt__cli_num(a, "lost_chunks"),
               gt__cli_num(a, "windows"), gt__cli_str(a, "command"));
    }
    cJSON_ArrayForEach(a, agents)
        print_agent_triggers(a);
}

/* Agents that ended recently, most recent first, with their files. */
static void print_finished(const cJSON *fin)
{
    const cJSON *a;

    if (cJSON_GetArraySize(fin) == 0)
        return;
    printf("\nfinished (most recent first):\n");
    cJSON_ArrayForEach(a, fin) {
        const cJSON *files = cJSON_GetObjectItemCaseSensitive(a, "files");
        const cJSON *f;

        printf("  pid %.0f %.40s: %s, %.0f records, %.0f events lost, "
               "%.0f chunks lost\n", gt__cli_num(a, "pid"), gt__cli_str(a, "command"),
               gt__cli_str(a, "end"), gt__cli_num(a, "records"),
               gt__cli_num(a, "lost_events"), gt__cli_num(a, "lost_chunks"));
        cJSON_ArrayForEach(f, files)
            if (cJSON_IsString(f))
                printf("      %s\n", f->valuestring); /* sanitized stems */
        print_agent_triggers(a);
    }
}

static void print_status(const cJSON *r)
{
    const cJSON *trig = cJSON_GetObjectItemCaseSensitive(r, "triggers");
    const cJSON *tot = cJSON_GetObjectItemCaseSensitive(r, "totals");
    const cJSON *a;
    long up = (long)gt__cli_num(r, "uptime_s");

    printf("gradtraced %s  pid %.0f  up %ldh%02ldm%02lds\n", gt__cli_str(r, "version"),
           gt__cli_num(r, "pid"), up / 3600, up / 60 % 60, up % 60);
    printf("output   %s%s\n", gt__cli_str(r, "output_dir"),
           is_true(r, "raw") ? " (raw .gtr kept)" : "");
    printf("sockets  %s, %s\n", gt__cli_str(r, "agent_socket"),
           gt__cli_str(r, "control_socket"));
    print_agents(cJSON_GetObjectItemCaseSensitive(r, "agents"));
    printf("\ntriggers armed: %d\n", cJSON_GetArraySize(trig));
    cJSON_ArrayForEach(a, trig)
        printf("  #%.0f %s (%s: sent to %.0f agent(s), held by %d, %.0f window(s))\n",
               gt__cli_num(a, "id"), gt__cli_str(a, "spec"), gt__cli_str(a, "state"),
               gt__cli_num(a, "sent_to"),
               cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(a, "agents")),
               gt__cli_num(a, "fired"));
    trig = cJSON_GetObjectItemCaseSensitive(r, "retired");
    if (cJSON_GetArraySize(trig) > 0)
        printf("triggers retired (newest first):\n");
    cJSON_ArrayForEach(a, trig)
        printf("  #%.0f %s (%s: sent to %.0f agent(s), %.0f window(s))\n",
               gt__cli_num(a, "id"), gt__cli_str(a, "spec"), gt__cli_str(a, "why"),
               gt__cli_num(a, "sent_to"), gt__cli_num(a, "fired"));
    print_finished(cJSON_GetObjectItemCaseSensitive(r, "finished"));
    if (tot)
        printf("\ntotals: %.0f connections (%.0f refused, %.0f bad streams), "
               "%.0f bytes, %.0f records, %.0f files written\n",
               gt__cli_num(tot, "connections"), gt__cli_num(tot, "refused"),
               gt__cli_num(tot, "bad_streams"), gt__cli_num(tot, "bytes"),
               gt__cli_num(tot, "records"), gt__cli_num(tot, "files_written"));
}

int gt__cmd_status(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static const char prog[] = "gradtrace status";
    char path[108], err[256];
    cJSON *reply = NULL;
    int json = 0, c;

    gt__cli_opt_begin(argv, prog);
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'j': json = 1; break;
        case 'h': fputs(status_usage, stdout); return GT__EXIT_OK;
        default: return GT__EXIT_USAGE; /* getopt said why */
        }
    }
    if (optind < argc)
        return gt__cli_usage_error(prog, "unexpected argument '%s'", argv[optind]);
    if (gt__cli_control_path(path, sizeof(path)) < 0)
        return GT__EXIT_ERROR;
    if (gt__cli_simple(path, "status", 10000, &reply, err, sizeof(err)) < 0) {
        fprintf(stderr, "%s: %s\n", prog, err);
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
