/*
 * The `gradtrace` CLI's internals: the control client (client.c) and the
 * subcommands (main.c, record.c, convert.c, report.c). Plain blocking
 * code: the CLI talks to one daemon at a time. It links the converter and
 * the control protocol, never the server or libuv.
 */
#ifndef GRADTRACE_DAEMON_CLI_H
#define GRADTRACE_DAEMON_CLI_H

#include <stddef.h>

#include "common/codec.h"
#include "common/version.h"
#include "daemon/control/control.h"

/* Exit statuses of `gradtrace` (record returns the command's instead). */
#define GT__EXIT_OK 0
#define GT__EXIT_ERROR 1
#define GT__EXIT_USAGE 2

struct cJSON;

/* Connects to a unix socket. @return the fd or -errno. */
int gt__cli_connect(const char *path) GT__WUR;

/*
 * Sends req as one line to the control socket at path and waits at most
 * timeout_ms for the reply line. *reply receives the parsed reply whenever
 * one arrived (also with "ok": false; the caller frees it).
 * @return 0 when ok is true; -EINVAL when the daemon refused (its error
 *         text in err); another -errno when no reply came (text in err).
 */
int gt__cli_request(const char *path, const struct cJSON *req, int timeout_ms,
                    struct cJSON **reply, char *err, size_t errcap) GT__WUR;

/* gt__cli_request for a request that is just {"cmd": cmd}. */
int gt__cli_simple(const char *path, const char *cmd, int timeout_ms,
                   struct cJSON **reply, char *err, size_t errcap) GT__WUR;

/* Directory holding the running executable (no trailing slash). */
int gt__cli_exe_dir(char *buf, size_t cap) GT__WUR;

/* `gradtrace record ...`: argv[0] is "record". */
int gt__cmd_record(int argc, char **argv);

/*
 * `gradtrace convert IN.gtr [-o OUT.json] [--max-file-mb N]
 * [--max-file-events N] [--quiet]`: converts a recorded stream (written with
 * GRADTRACE_FILE or kept raw by the daemon) to Chrome-trace JSON, rotating
 * files at the limits. Reads truncated and partly corrupt files (framer in
 * resync mode) and says so in the trace's metadata. Prints a progress bar
 * on stderr only when stderr is a terminal, and one summary line.
 * @return 0 when something was converted, 1 when nothing was readable or
 *         output failed, 2 on a usage error.
 */
int gt__cmd_convert(int argc, char **argv);

/*
 * `gradtrace report [--sort model|fwd|bwd|name] [--csv] TRACE...`: the
 * per-layer table (forward calls and time, backward spans, time and nodes)
 * from gradtrace trace files or a .gtr recording (decoded straight into
 * the aggregation sink, daemon/convert/agg.h).
 * Memory bounded by the number of layers.
 * @return 0, 1 when the input is unreadable or holds no layer spans, 2 on
 *         a usage error.
 */
int gt__cmd_report(int argc, char **argv);

struct gt__agg;

/*
 * Adds the layer and iteration spans of the trace file at path (as
 * gradtrace writes it, or any Chrome-trace JSON) to the table a.
 * @return 0, or a negative errno (message printed on stderr).
 */
int gt__report_read_json(struct gt__agg *a, const char *path) GT__WUR;


#endif
