/*
 * `gradtrace trigger SPEC | --clear`: arms a capture trigger in matching
 * agents, present and future, or disarms every trigger.
 *
 * The spec is parsed here with the parser the daemon and the agent use
 * (common/trigspec.c), so a bad spec is reported with the field it names,
 * as bad usage, before anything is sent.
 */
#include "daemon/cli/cli.h"

#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdio.h>

static const char trigger_usage[] =
    "usage: gradtrace trigger layer=NAME[,phase=P][,iteration=N|next][,count=N]\n"
    "                         [,ranks=R1,R2...][,pids=P1,P2...]\n"
    "       gradtrace trigger --clear\n"
    "Arms a capture window in matching agents (present and future): NAME is\n"
    "a module path or glob (layers.1?.mlp); phase forward, backward (default)\n"
    "or both; iteration a number or next (default); count windows (default\n"
    "1). --clear disarms every trigger.\n";

static const char prog[] = "gradtrace trigger";

/*
 * The request for the command line: trigger_clear, or the parsed spec.
 * @return -1 with *req set (NULL when out of memory), else the exit
 *         status (0 after --help, 2 on bad usage).
 */
static int parse_request(int argc, char **argv, int *clear, cJSON **req)
{
    static const struct option longopts[] = {
        {"clear", no_argument, NULL, 'c'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct gt__trigger t;
    char err[256];
    int c;

    gt__cli_opt_begin(argv, prog);
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'c': *clear = 1; break;
        case 'h': fputs(trigger_usage, stdout); return GT__EXIT_OK;
        default: return GT__EXIT_USAGE; /* getopt said why */
        }
    }
    if (argc - optind != !*clear)
        return gt__cli_usage_error(prog, *clear ? "--clear takes no SPEC"
                                                : "expected one SPEC");
    if (*clear) {
        *req = cJSON_CreateObject();
        if (*req && !cJSON_AddStringToObject(*req, "cmd", "trigger_clear")) {
            cJSON_Delete(*req);
            *req = NULL;
        }
        return -1;
    }
    if (gt__trigger_parse_spec(argv[optind], &t, err, sizeof(err)) < 0)
        return gt__cli_usage_error(prog, "%s", err);
    *req = gt__trigger_to_json(&t);
    return -1;
}

int gt__cmd_trigger(int argc, char **argv)
{
    char path[108], err[256];
    cJSON *req = NULL, *reply = NULL;
    int clear = 0, rc = parse_request(argc, argv, &clear, &req);

    if (rc >= 0)
        return rc;
    rc = GT__EXIT_ERROR;
    if (!req || gt__cli_control_path(path, sizeof(path)) < 0)
        goto out;
    if (gt__cli_request(path, req, 10000, &reply, err, sizeof(err)) < 0) {
        fprintf(stderr, "%s: %s\n", prog, err);
        goto out;
    }
    if (clear) {
        printf("cleared %.0f trigger(s)\n", gt__cli_num(reply, "cleared"));
    } else {
        char *pids = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(reply, "pids"));

        printf("trigger #%.0f armed: %s\nsent to pids %s (and to matching agents "
               "that connect later)\n", gt__cli_num(reply, "trigger_id"),
               gt__cli_str(reply, "spec"), pids ? pids : "[]");
        cJSON_free(pids);
    }
    rc = GT__EXIT_OK;
out:
    cJSON_Delete(req);
    cJSON_Delete(reply);
    return rc;
}
