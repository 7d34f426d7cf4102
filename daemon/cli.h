/*
 * Subcommands of the `gradtrace` CLI implemented outside its main file.
 * Each takes the arguments after the program name (argv[0] is the
 * subcommand's own name) and returns the process exit status.
 */
#ifndef GRADTRACE_DAEMON_CLI_H
#define GRADTRACE_DAEMON_CLI_H

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
int gt_cmd_convert(int argc, char **argv);

/*
 * `gradtrace report [--sort model|fwd|bwd|name] [--csv] TRACE...`: the
 * per-layer table (forward calls and time, backward spans, time and nodes)
 * from gradtrace trace files or a .gtr recording (converted on the fly).
 * Memory bounded by the number of layers.
 * @return 0, 1 when the input is unreadable or holds no layer spans, 2 on
 *         a usage error.
 */
int gt_cmd_report(int argc, char **argv);

#endif
