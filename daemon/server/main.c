/*
 * gradtraced: the collecting daemon (see server.c beside this file for the
 * sockets, ingest.c for agents, dispatch.c for the control protocol).
 *
 * Without --foreground it detaches only after its sockets are listening,
 * so `gradtraced && gradtrace status` never races the start; errors found
 * while starting are printed on the terminal, later ones go to the log
 * file beside the sockets.
 */
#include "daemon/server/server.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"

static const char usage[] =
    "usage: gradtraced [--output-dir DIR] [--foreground] [--raw]\n"
    "                  [--max-file-mb N] [--control-idle-s N] [--log FILE]\n"
    "                  [--workers N] [--queue-kb N]\n"
    "\n"
    "Collects what gradtrace agents stream and writes Chrome-trace JSON.\n"
    "\n"
    "  -o, --output-dir DIR  where traces go (default ./gradtrace-traces)\n"
    "  -f, --foreground      stay attached; log to stderr\n"
    "      --raw             also keep each agent's stream as <stem>.gtr\n"
    "      --max-file-mb N   start a new JSON file past N MB (default: the\n"
    "                        converter's, sized for trace viewers)\n"
    "      --control-idle-s N  close control connections idle for N s\n"
    "                        (default 30)\n"
    "      --workers N       conversion threads (1-8; default: one fewer\n"
    "                        than the cores, at least 1)\n"
    "      --queue-kb N      unconverted KB per agent at which its socket is\n"
    "                        no longer read (default 4096)\n"
    "      --log FILE        log file when detached (default: gradtraced.log\n"
    "                        beside the agent socket)\n"
    "\n"
    "`gradtrace daemon --stop` stops the running daemon: it finishes every\n"
    "conversion (each trace closed as valid JSON) and exits.\n"
    "\n"
    "Sockets: $GRADTRACE_SOCKET and $GRADTRACE_CONTROL, else agent.sock and\n"
    "control.sock in $XDG_RUNTIME_DIR/gradtrace or /tmp/gradtrace-<uid>.\n"
    "Exit status: 0 after a clean shutdown, 1 when it cannot start (another\n"
    "daemon running, unsafe directory), 2 on bad usage.\n";

static int open_log(const struct gt__server *s, const char *log_path)
{
    char dir[sizeof(s->agent_path)], buf[sizeof(s->agent_path) + 32];
    int fd;

    if (!log_path) {
        snprintf(dir, sizeof(dir), "%s", s->agent_path);
        snprintf(buf, sizeof(buf), "%s/gradtraced.log", dirname(dir));
        log_path = buf;
    }
    fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW,
              0600);
    if (fd < 0)
        fprintf(stderr, "gradtraced: cannot open log %s: %s\n", log_path,
                strerror(errno));
    return fd;
}

/* Detached child: stdio away from the terminal, own session. */
static int detach_stdio(int log_fd)
{
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);

    if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(log_fd, 2) < 0)
        return -errno;
    close(null);
    close(log_fd);
    return 0;
}

/* What the command line asks for. */
struct args {
    struct gt__daemon_opts o;
    const char *log_path;
    int foreground;
};

/*
 * Parses the command line with getopt_long; getopt itself reports an
 * unknown option or a missing value on one line.
 * @return -1 to go on, else the exit status (0 after --help/--version,
 *         2 on bad usage).
 */
static int parse_args(int argc, char **argv, struct args *a)
{
    static const struct option longopts[] = {
        {"output-dir", required_argument, NULL, 'o'},
        {"foreground", no_argument, NULL, 'f'},
        {"raw", no_argument, NULL, 'r'},
        {"max-file-mb", required_argument, NULL, 'm'},
        {"log", required_argument, NULL, 'l'},
        {"control-idle-s", required_argument, NULL, 'i'},
        {"workers", required_argument, NULL, 'w'},
        {"queue-kb", required_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    uint64_t mb;
    int c;

    argv[0] = "gradtraced"; /* getopt's messages name the program */
    while ((c = getopt_long(argc, argv, "o:fh", longopts, NULL)) != -1) {
        switch (c) {
        case 'o': a->o.out_dir = optarg; break;
        case 'f': a->foreground = 1; break;
        case 'r': a->o.raw = 1; break;
        case 'm':
            if (gt__parse_u64(optarg, 1, 1u << 20, &mb) < 0) {
                fprintf(stderr, "gradtraced: --max-file-mb: bad size '%s'\n", optarg);
                return 2;
            }
            a->o.max_file_bytes = mb << 20;
            break;
        case 'l': a->log_path = optarg; break;
        case 'i':
            if (gt__parse_u64(optarg, 1, 86400, &a->o.ctl_idle_s) < 0) {
                fprintf(stderr, "gradtraced: --control-idle-s: bad value '%s'\n", optarg);
                return 2;
            }
            break;
        case 'w':
            if (gt__parse_u64(optarg, 1, 8, &a->o.workers) < 0) {
                fprintf(stderr, "gradtraced: --workers: bad value '%s'\n", optarg);
                return 2;
            }
            break;
        case 'q':
            if (gt__parse_u64(optarg, 64, 1u << 20, &a->o.queue_kb) < 0) {
                fprintf(stderr, "gradtraced: --queue-kb: bad value '%s'\n", optarg);
                return 2;
            }
            break;
        case 'h': fputs(usage, stdout); return 0;
        case 'V': printf("gradtraced %s\n", GT__VERSION); return 0;
        default: return 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "gradtraced: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    return -1;
}

/*
 * Forks the daemon off the terminal. The parent waits for the child's
 * one-byte start report on a pipe, so it exits only once the sockets
 * listen (or the start failed), and says which.
 * @return -1 in the child, with the pipe's write end in *ready_fd; in the
 *         parent, or when the fork fails, the exit status.
 */
static int fork_daemon(int *ready_fd)
{
    int ready[2];
    char status = 1;
    pid_t child;

    if (pipe2(ready, O_CLOEXEC) != 0) {
        perror("gradtraced: pipe");
        return 1;
    }
    child = fork();
    if (child < 0) {
        perror("gradtraced: fork");
        return 1;
    }
    if (child == 0) {
        close(ready[0]);
        setsid();
        *ready_fd = ready[1];
        return -1;
    }
    close(ready[1]);
    if (read(ready[0], &status, 1) != 1)
        status = 1;
    if (status == 0)
        fprintf(stderr, "gradtraced: running as pid %d\n", (int)child);
    return status ? 1 : 0;
}

/*
 * Detached start: the log replaces the terminal, then the parent learns
 * that the sockets listen. A start that fails here shuts the server down
 * again before anything ran.
 * @return 0 or -EIO.
 */
static int finish_detach(struct gt__server *srv, uv_loop_t *loop,
                         const char *log_path, int *ready_fd)
{
    char status = 0;
    int fd = open_log(srv, log_path);

    if (fd < 0 || detach_stdio(fd) < 0) {
        gt__server_shutdown(srv);
        uv_run(loop, UV_RUN_DEFAULT);
        gt__server_cleanup(srv);
        return -EIO;
    }
    if (write(*ready_fd, &status, 1) != 1)
        gt__log("start notification lost");
    close(*ready_fd);
    *ready_fd = -1;
    if (chdir("/") != 0)
        gt__log("chdir /: %s", strerror(errno));
    return 0;
}

/*
 * Runs the server until a shutdown request or signal ends the loop.
 * ready_fd (-1 in the foreground) gets the start report; a failed start
 * reports 1 there so the waiting parent exits 1 too.
 * @return the exit status.
 */
static int serve(const struct args *a, int ready_fd)
{
    struct gt__server srv;
    uv_loop_t loop;
    char status = 1;
    int rc;

    if (uv_loop_init(&loop) != 0) {
        fprintf(stderr, "gradtraced: cannot create the event loop\n");
        return 1;
    }
    rc = gt__server_init(&srv, &loop, &a->o);
    if (rc < 0) {
        fprintf(stderr, "gradtraced: not started: %s\n",
                rc == -EADDRINUSE ? "another gradtraced is running" : strerror(-rc));
        goto out_close_loop;
    }
    if (ready_fd >= 0) {
        rc = finish_detach(&srv, &loop, a->log_path, &ready_fd);
        if (rc < 0)
            goto out_close_loop;
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    gt__server_cleanup(&srv);
    rc = 0;
out_close_loop:
    uv_loop_close(&loop);
    if (ready_fd >= 0 && write(ready_fd, &status, 1) != 1)
        rc = rc ? rc : -EIO;
    return rc < 0 ? 1 : 0;
}

int main(int argc, char **argv)
{
    struct args a = {.o = {.out_dir = "gradtrace-traces"}};
    int rc = parse_args(argc, argv, &a), ready_fd = -1;

    if (rc >= 0)
        return rc;
    /* Writes to a departed agent or control client must fail with EPIPE,
     * not kill the daemon. */
    signal(SIGPIPE, SIG_IGN);
    if (!a.foreground) {
        rc = fork_daemon(&ready_fd);
        if (rc >= 0)
            return rc;
    }
    return serve(&a, ready_fd);
}
