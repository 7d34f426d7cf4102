/*
 * The `gradtrace` CLI's internals: the control client (cli_client.c) and
 * the subcommands (main_gradtrace.c, cli_record.c). Plain blocking code:
 * the CLI talks to one daemon at a time.
 */
#ifndef GRADTRACE_DAEMON_CLI_INTERNAL_H
#define GRADTRACE_DAEMON_CLI_INTERNAL_H

#include <stddef.h>

#include "daemon/internal.h"

/* Exit statuses of `gradtrace` (record returns the command's instead). */
#define GT_EXIT_OK 0
#define GT_EXIT_ERROR 1
#define GT_EXIT_USAGE 2

struct cJSON;

/* Connects to a unix socket. @return the fd or -errno. */
int gt__cli_connect(const char *path) GT_WUR;

/*
 * Sends req as one line to the control socket at path and waits at most
 * timeout_ms for the reply line. *reply receives the parsed reply whenever
 * one arrived (also with "ok": false; the caller frees it).
 * @return 0 when ok is true; -EINVAL when the daemon refused (its error
 *         text in err); another -errno when no reply came (text in err).
 */
int gt__cli_request(const char *path, const struct cJSON *req, int timeout_ms,
                    struct cJSON **reply, char *err, size_t errcap) GT_WUR;

/* gt__cli_request for a request that is just {"cmd": cmd}. */
int gt__cli_simple(const char *path, const char *cmd, int timeout_ms,
                   struct cJSON **reply, char *err, size_t errcap) GT_WUR;

/* Directory holding the running executable (no trailing slash). */
int gt__cli_exe_dir(char *buf, size_t cap) GT_WUR;

/* `gradtrace record ...`: argv[0] is "record". */
int gt__cmd_record(int argc, char **argv);

#endif
