/*
 * `gradtrace daemon [OPTIONS]`: runs gradtraced, the collecting daemon,
 * from the directory of this binary, with the options as given.
 *
 * The options are not parsed here: gradtraced owns them and parses them
 * with getopt_long itself (--help included, on stdout with exit 0; a bad
 * option is one line and exit 2), so the two can never disagree about
 * what a daemon accepts.
 *
 * `gradtrace daemon --stop` is the exception, since it starts nothing: it
 * asks the running daemon (the control socket of GRADTRACE_CONTROL or
 * the default runtime directory) to shut down, which finishes every
 * conversion before the reply, then waits until its process is gone.
 */
#include "daemon/cli/cli.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/paths.h"
#include "common/util.h"

/* The shutdown request may wait for long conversions. */
#define STOP_REPLY_MS (10 * 60 * 1000)
/* After the reply the daemon only closes its sockets and exits. */
#define STOP_EXIT_NS (10 * 1000000000ull)

static int stop_daemon(void)
{
    char sock[108], err[256];
    cJSON *reply = NULL;
    const cJSON *pid;
    pid_t daemon_pid = 0;
    uint64_t deadline;
    int rc = GT__EXIT_ERROR;

    if (gt__control_socket_path(sock, sizeof(sock)) < 0) {
        fprintf(stderr, "gradtrace daemon --stop: no control socket path\n");
        return GT__EXIT_ERROR;
    }
    if (gt__cli_simple(sock, "status", 5000, &reply, err, sizeof(err)) < 0) {
        fprintf(stderr, "gradtrace daemon --stop: %s\n", err);
        goto out_free;
    }
    pid = cJSON_GetObjectItemCaseSensitive(reply, "pid");
    if (cJSON_IsNumber(pid))
        daemon_pid = (pid_t)pid->valuedouble;
    cJSON_Delete(reply);
    reply = NULL;
    if (gt__cli_simple(sock, "shutdown", STOP_REPLY_MS, &reply, err,
                       sizeof(err)) < 0) {
        fprintf(stderr, "gradtrace daemon --stop: %s\n", err);
        goto out_free;
    }
    /* A daemon of another user (or in another pid namespace) cannot be
     * watched: the reply is then all there is to wait for. */
    deadline = gt__mono_ns() + STOP_EXIT_NS;
    while (daemon_pid > 0 && kill(daemon_pid, 0) == 0) {
        struct timespec ts = {.tv_nsec = 10 * 1000000};

        if (gt__mono_ns() > deadline) {
            fprintf(stderr, "gradtrace daemon --stop: daemon %d still running "
                    "10 s after its shutdown reply\n", (int)daemon_pid);
            goto out_free;
        }
        nanosleep(&ts, NULL);
    }
    fprintf(stderr, "gradtrace: daemon %d stopped\n", (int)daemon_pid);
    rc = GT__EXIT_OK;
out_free:
    cJSON_Delete(reply);
    return rc;
}

int gt__cmd_daemon(int argc, char **argv)
{
    char dir[PATH_MAX], path[PATH_MAX + 16];

    /* --stop alone is ours; anything else is gradtraced's to parse. */
    static const struct option stop_opt[] = {{"stop", no_argument, NULL, 's'},
                                             {NULL, 0, NULL, 0}};
    opterr = 0;
    optind = 1;
    if (argc == 2 && getopt_long(argc, argv, "+", stop_opt, NULL) == 's')
        return stop_daemon();
    optind = 1;
    /* argv is NULL-terminated, as execv wants it */
    if (gt__cli_exe_dir(dir, sizeof(dir)) < 0) {
        fprintf(stderr, "gradtrace: cannot find my own directory\n");
        return GT__EXIT_ERROR;
    }
    snprintf(path, sizeof(path), "%s/gradtraced", dir);
    argv[0] = "gradtraced";
    execv(path, argv);
    fprintf(stderr, "gradtrace: cannot run %s: %s\n", path, strerror(errno));
    return GT__EXIT_ERROR;
}
