/*
 * The `gradtrace` CLI's internals: the control client (client.c), what
 * every subcommand shares for its options (opt.c), and the subcommands,
 * one file each (status.c, capture.c, trigger.c, daemon.c, record.c,
 * convert.c, report.c) behind main.c's command table; a subcommand too
 * large for one file has a header for its parts (record.h, report.h,
 * merge.h). Plain blocking
 * code: the CLI talks to one daemon at a time. It links the converter and
 * the control protocol, never the server or libuv.
 *
 * Every subcommand gets argv[0] = its name and answers --help/-h with its
 * usage on stdout (exit 0); bad usage is one line on stderr and exit 2.
 */
#ifndef GRADTRACE_DAEMON_CLI_H
#define GRADTRACE_DAEMON_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "common/codec.h"
#include "common/version.h"
#include "daemon/control/control.h"

/* Exit statuses of `gradtrace` (record returns the command's instead). */
#define GT__EXIT_OK 0
#define GT__EXIT_ERROR 1
#define GT__EXIT_USAGE 2

struct cJSON;

/*
 * Connects to the daemon's unix socket at path, only once its directory
 * is this user's and closed to others and the listener runs as this
 * user (gt__socket_dir_check, gt__peer_uid_check): another user's
 * "daemon" must get neither our requests nor a chance to forge replies.
 * @return the fd, or -errno with the reason in why (cap bytes).
 */
int gt__cli_connect(const char *path, char *why, size_t cap) GT__WUR;

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

/*
 * The daemon's control socket path, found as the agents find it
 * (common/paths.h). Prints why on stderr when it does not fit.
 * @return 0 or -ENAMETOOLONG.
 */
int gt__cli_control_path(char *buf, size_t cap) GT__WUR;

/* Member k of reply object o as a number; 0 when absent or not a number. */
double gt__cli_num(const struct cJSON *o, const char *k);

/*
 * Member k of reply object o as a string for the terminal, "" when absent
 * or not a string. Agents supply command lines and host names, so control
 * bytes (escape sequences) are replaced by '?' in place: the reply is the
 * caller's to modify and is printed once.
 */
const char *gt__cli_str(const struct cJSON *o, const char *k);

/* ------------------------------------------------ inputs (input.c) */

struct gt__convert_info;

/*
 * Why the recording at path could not be read (gt__convert_file returned
 * rc with info): one clause for "gradtrace CMD: PATH: <why>", naming a
 * JSON trace given where a recording was expected. buf (cap bytes) may
 * hold the text. @return the text, static or buf.
 */
const char *gt__cli_gtr_why(const char *path, int rc,
                            const struct gt__convert_info *info, char *buf,
                            size_t cap);

/* ------------------------------------------------ options (opt.c) */

/*
 * Prepares argv for a subcommand's getopt_long loop: argv[0] becomes prog
 * ("gradtrace status"), so getopt's own one-line messages about unknown
 * options and missing values name the subcommand, and optind is set to 0,
 * which makes glibc's getopt start afresh: it would otherwise keep the
 * ordering ('+': stop at the first operand) of the previous parse.
 * prog must outlive the parse (a string literal).
 */
void gt__cli_opt_begin(char **argv, const char *prog);

/*
 * Prints "prog: MESSAGE" as one line on stderr.
 * @return GT__EXIT_USAGE, so that a check reads
 *         `return gt__cli_usage_error(prog, "unexpected argument '%s'", a);`.
 */
int gt__cli_usage_error(const char *prog, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/*
 * Parses the value s of option opt as a decimal integer in [lo, hi]
 * (digits only). Prints "gradtrace: OPT: 'S' is not an integer from LO"
 * on stderr when it is not.
 * @return 0 and *out, or -EINVAL.
 */
int gt__cli_parse_count(const char *opt, const char *s, uint64_t lo,
                        uint64_t hi, uint64_t *out) GT__WUR;

/* ------------------------------------------------ subcommands */

/* `gradtrace status [--json]`: the daemon, its agents, triggers, files. */
int gt__cmd_status(int argc, char **argv);

/* `gradtrace start [--pid N]... [--rank N]... [--duration-ms N |
 * --iterations N]`: capture on in all or the selected agents. */
int gt__cmd_start(int argc, char **argv);

/* `gradtrace stop [--pid N]... [--rank N]...`: capture off. */
int gt__cmd_stop(int argc, char **argv);

/* `gradtrace trigger SPEC | --clear`: arms (or disarms all) triggers. */
int gt__cmd_trigger(int argc, char **argv);

/* `gradtrace daemon [OPTIONS]`: execs gradtraced beside this binary with
 * the same options. Returns only when the exec failed (1). */
int gt__cmd_daemon(int argc, char **argv);

/* `gradtrace record [OPTIONS] -- CMD [ARGS...]` (record.c says how). */
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
 * `gradtrace report [OPTIONS] TRACE...`: the per-layer table (forward,
 * recompute, backward, GPU, per-iteration statistics, ranks), hints, as
 * text, CSV or JSON (schema/report.md) and optionally an SVG, from
 * gradtrace trace files or .gtr recordings (decoded straight into the
 * aggregation consumer, daemon/convert/agg.h); report.h holds its parts.
 * Memory bounded by the number of layers.
 * @return 0, 1 when the input is unreadable or holds no layer spans, 2 on
 *         a usage error.
 */
int gt__cmd_report(int argc, char **argv);

/*
 * `gradtrace merge TRACE... -o OUT` (merge.c): several ranks' traces in
 * one Chrome-trace file, on one clock. Memory bounded by one line and the
 * inputs' collectives. @return 0, 1 bad input, 2 usage.
 */
int gt__cmd_merge(int argc, char **argv);

/*
 * `gradtrace diff [OPTIONS] BASE NEW` (diff.c): per-layer deltas of two
 * runs with a noise-aware verdict per row. @return 0, 1 unreadable input,
 * 2 usage, 3 when --fail-above is exceeded.
 */
int gt__cmd_diff(int argc, char **argv);

struct gt__agg;

/*
 * Adds the layer and iteration spans of the trace file at path (as
 * gradtrace writes it, or any Chrome-trace JSON) to the table a.
 * @return 0, or a negative errno (message printed on stderr).
 */
int gt__report_read_json(struct gt__agg *a, const char *path) GT__WUR;

#endif /* GRADTRACE_DAEMON_CLI_H */
