/*
 * gradtrace: the one command users type. main finds the subcommand in the
 * command table and hands it argv from the command's name on; each
 * subcommand (one file each, see cli.h) parses its own options with
 * getopt_long. Only --help and --version are options of gradtrace itself.
 */
#include "daemon/cli/cli.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
};

static const struct command commands[] = {
    {"record", gt__cmd_record, "run a command with the agent; print the traces written"},
    {"daemon", gt__cmd_daemon, "start the collecting daemon (gradtraced)"},
    {"status", gt__cmd_status, "the daemon, its agents, triggers and files"},
    {"start", gt__cmd_start, "turn capture on in all or selected agents"},
    {"stop", gt__cmd_stop, "turn capture off in all or selected agents"},
    {"trigger", gt__cmd_trigger, "arm a capture trigger (layer=NAME,...) or --clear them"},
    {"convert", gt__cmd_convert, "convert a recorded stream (.gtr) to Chrome-trace JSON"},
    {"report", gt__cmd_report, "per-layer forward/backward table of a trace or .gtr"},
    {"diff", gt__cmd_diff, "per-layer deltas of two runs, regressions flagged"},
    {"merge", gt__cmd_merge, "several ranks' traces in one, on one clock"},
};

#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static void print_usage(FILE *f)
{
    fputs("usage: gradtrace COMMAND [ARGS...]\n"
          "       gradtrace --help | --version\n"
          "\n"
          "Commands:\n", f);
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].summary);
    fputs("\n"
          "`gradtrace COMMAND --help` describes COMMAND's options. The daemon's\n"
          "sockets are found as the agents find them: $GRADTRACE_CONTROL /\n"
          "$GRADTRACE_SOCKET, else $XDG_RUNTIME_DIR/gradtrace or\n"
          "/tmp/gradtrace-<uid>.\n"
          "\n"
          "Exit status: 0 success; 1 error (no daemon, request refused, I/O);\n"
          "2 bad usage; record exits with CMD's status (128+N for signal N).\n", f);
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    const char *cmd;
    int c;

    /* '+': the options of gradtrace end at the command's name; what
     * follows is the command's, and stays in order. */
    gt__cli_opt_begin(argv, "gradtrace");
    while ((c = getopt_long(argc, argv, "+h", longopts, NULL)) != -1) {
        switch (c) {
        case 'h': print_usage(stdout); return GT__EXIT_OK;
        case 'V': printf("gradtrace %s\n", GT__VERSION); return GT__EXIT_OK;
        default: return GT__EXIT_USAGE; /* getopt said why */
        }
    }
    if (optind >= argc) {
        print_usage(stderr);
        return GT__EXIT_USAGE;
    }
    cmd = argv[optind];
    if (strcmp(cmd, "help") == 0) {
        print_usage(stdout);
        return GT__EXIT_OK;
    }
    for (size_t i = 0; i < NCOMMANDS; i++) {
        if (strcmp(cmd, commands[i].name) == 0) {
            int at = optind;

            /* A command that runs getopt itself starts it afresh. */
            optind = 0;
            return commands[i].run(argc - at, argv + at);
        }
    }
    return gt__cli_usage_error("gradtrace", "unknown command '%s' (see gradtrace --help)",
                               cmd);
}
