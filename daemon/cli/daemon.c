/*
 * `gradtrace daemon [OPTIONS]`: runs gradtraced, the collecting daemon,
 * from the directory of this binary, with the options as given.
 *
 * The options are not parsed here: gradtraced owns them and parses them
 * with getopt_long itself (--help included, on stdout with exit 0; a bad
 * option is one line and exit 2), so the two can never disagree about
 * what a daemon accepts.
 */
#include "daemon/cli/cli.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int gt__cmd_daemon(int argc, char **argv)
{
    char dir[PATH_MAX], path[PATH_MAX + 16];

    (void)argc; /* argv is NULL-terminated, as execv wants it */
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
