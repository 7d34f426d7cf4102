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
#include <time.h>

static const char trigger_usage[] =
    "usage: gradtrace trigger layer=NAME[,phase=P][,iteration=N|next][,count=N]\n"
    "                         [,pass=K][,ops=1][,ranks=R1,R2...][,pids=P1,P2...]\n"
    "       gradtrace trigger --job SPEC\n"
    "       gradtrace trigger --clear\n"
    "Arms a capture window in matching agents (present and future): NAME is\n"
    "a module path or glob (layers.1?.mlp); phase forward, backward (default)\n"
    "or both; iteration a number or next (default); count windows (default\n"
    "1); pass only the K-th backward pass of the step (from 0; default every\n"
    "pass); ops=1 records the window's aten operators too (cpu_op events).\n"
    "--clear disarms every trigger.\n"
    "--job: for every rank of the job, on every host, at the same iteration:\n"
    "this daemon hands the spec to one of its agents, whose Python side\n"
    "writes it into the job's torch.distributed store; every rank arms it\n"
    "for a common iteration a few steps ahead (iteration=N: N itself). Needs\n"
    "the gradtrace Python package in the job (gradtrace record) and a\n"
    "process group that uses MASTER_ADDR/MASTER_PORT's store.\n";

static const char prog[] = "gradtrace trigger";

/* How long a job trigger waits for an agent whose job route is up. */
#define JOB_WAIT_MS 5000

/*
 * The request for the command line: trigger_clear, or the parsed spec.
 * @return -1 with *req set (NULL when out of memory), else the exit
 *         status (0 after --help, 2 on bad usage).
 */
static int parse_request(int argc, char **argv, int *clear, cJSON **req)
{
    static const struct option longopts[] = {
        {"clear", no_argument, NULL, 'c'},
        {"job", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct gt__trigger t;
    char err[256];
    int c, job = 0;

    gt__cli_opt_begin(argv, prog);
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'c': *clear = 1; break;
        case 'j': job = 1; break;
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
    if (*req && job) {
        cJSON_ReplaceItemInObjectCaseSensitive(*req, "cmd", cJSON_CreateString("job_trigger"));
        *clear = -1; /* the reply is a job trigger's */
    }
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
    /* A job trigger sent as the job starts may find no agent with its job
     * route up yet ("pending"): ask again for up to JOB_WAIT_MS. */
    for (int waited = 0;; waited += 100) {
        cJSON_Delete(reply);
        if (gt__cli_request(path, req, 10000, &reply, err, sizeof(err)) == 0)
            break;
        if (clear >= 0 || waited >= JOB_WAIT_MS || !reply ||
            !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(reply, "pending"))) {
            fprintf(stderr, "%s: %s\n", prog, err);
            goto out;
        }
        nanosleep(&(struct timespec){.tv_nsec = 100000000}, NULL);
    }
    if (clear < 0) {
        printf("job-wide trigger handed to pid %.0f (rank %.0f): %s\n"
               "every rank arms it through the job's store\n",
               gt__cli_num(reply, "pid"), gt__cli_num(reply, "rank"),
               gt__cli_str(reply, "spec"));
    } else if (clear) {
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
