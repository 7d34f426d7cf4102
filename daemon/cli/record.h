/*
 * The parts of `gradtrace record` (record.c runs the command and its
 * daemon; record_out.c says what came of it). CLI-internal.
 */
#ifndef GRADTRACE_DAEMON_CLI_RECORD_H
#define GRADTRACE_DAEMON_CLI_RECORD_H

#include <stddef.h>

#include "daemon/cli/cli.h"

struct cJSON;

/*
 * For each of the ntrig triggers whose layer matches no module path the
 * run's Python processes wrote into seen_dir ("" when none was made),
 * prints the closest paths on stderr; reads and removes seen_dir. Silent
 * when no process reported paths.
 * @return 1 when it printed, else 0.
 */
int gt__record_unmatched(const char *seen_dir, const struct gt__trigger *trig,
                         size_t ntrig);

/*
 * Prints the trace files (a JSON array of strings) on stderr, or, when
 * there are none, why: triggers (whether any was armed), status (CMD's
 * exit status), agents (streams of CMD's processes the daemon saw, -1
 * unknown) and cut (a second interrupt cut the wait) tell which reason
 * holds. fresh: record's output so far may not end a line.
 */
void gt__record_print_files(const struct cJSON *files, int triggers, int fresh,
                            int status, int agents, int cut);

#endif /* GRADTRACE_DAEMON_CLI_RECORD_H */
