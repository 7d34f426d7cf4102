/*
 * gradtraced: the collecting daemon (see daemon/server.c for the sockets,
 * daemon/ingest.c for agents, daemon/dispatch.c for the control protocol).
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

static const char usage[] =
    "usage: gradtraced [--output-dir DIR] [--foreground] [--raw]\n"
    "                  [--max-file-mb N] [--log FILE]\n"
    "\n"
    "Collects what gradtrace agents stream and writes Chrome-trace JSON.\n"
    "\n"
    "  -o, --output-dir DIR  where traces go (default ./gradtrace-traces)\n"
    "  -f, --foreground      stay attached; log to stderr\n"
    "      --raw             also keep each agent's stream as <stem>.gtr\n"
    "      --max-file-mb N   start a new JSON file past N MB (default: the\n"
    "                        converter's, sized for trace viewers)\n"
    "      --log FILE        log file when detached (default: gradtraced.log\n"
    "                        beside the agent socket)\n"
    "\n"
    "Sockets: $GRADTRACE_SOCKET and $GRADTRACE_CONTROL, else agent.sock and\n"
    "control.sock in $XDG_RUNTIME_DIR/gradtrace or /tmp/gradtrace-<uid>.\n"
    "Exit status: 0 after a clean shutdown, 1 when it cannot start (another\n"
    "daemon running, unsafe directory), 2 on bad usage.\n";

static int parse_mb(const char *s, uint64_t *out)
{
    char *end;
    unsigned long long v;

    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno || end == s || *end || v == 0 || v > (1ull << 20))
        return -EINVAL;
    *out = (uint64_t)v << 20;
    return 0;
}

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

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"output-dir", required_argument, NULL, 'o'},
        {"foreground", no_argument, NULL, 'f'},
        {"raw", no_argument, NULL, 'r'},
        {"max-file-mb", required_argument, NULL, 'm'},
        {"log", required_argument, NULL, 'l'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    struct gt__daemon_opts o = {.out_dir = "gradtrace-traces"};
    const char *log_path = NULL;
    struct gt__server srv;
    uv_loop_t loop;
    int foreground = 0, ready[2] = {-1, -1}, c, rc;
    pid_t child;
    char status = 1;

    while ((c = getopt_long(argc, argv, "o:fh", longopts, NULL)) != -1) {
        switch (c) {
        case 'o': o.out_dir = optarg; break;
        case 'f': foreground = 1; break;
        case 'r': o.raw = 1; break;
        case 'm':
            if (parse_mb(optarg, &o.max_file_bytes) < 0) {
                fprintf(stderr, "gradtraced: --max-file-mb: bad size '%s'\n", optarg);
                return 2;
            }
            break;
        case 'l': log_path = optarg; break;
        case 'h': fputs(usage, stdout); return 0;
        case 'V': printf("gradtraced %s\n", GT__VERSION); return 0;
        default: fputs(usage, stderr); return 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "gradtraced: unexpected argument '%s'\n%s", argv[optind], usage);
        return 2;
    }
    /* Writes to a departed agent or control client must fail with EPIPE,
     * not kill the daemon. */
    signal(SIGPIPE, SIG_IGN);

    if (!foreground) {
        if (pipe2(ready, O_CLOEXEC) != 0) {
            perror("gradtraced: pipe");
            return 1;
        }
        child = fork();
        if (child < 0) {
            perror("gradtraced: fork");
            return 1;
        }
        if (child > 0) {
            /* Parent: report the child's start, then leave it running. */
            close(ready[1]);
            if (read(ready[0], &status, 1) != 1)
                status = 1;
            if (status == 0)
                fprintf(stderr, "gradtraced: running as pid %d\n", (int)child);
            return status ? 1 : 0;
        }
        close(ready[0]);
        setsid();
    }

    if (uv_loop_init(&loop) != 0) {
        fprintf(stderr, "gradtraced: cannot create the event loop\n");
        return 1;
    }
    rc = gt__server_init(&srv, &loop, &o);
    if (rc < 0) {
        fprintf(stderr, "gradtraced: not started: %s\n",
                rc == -EADDRINUSE ? "another gradtraced is running" : strerror(-rc));
        goto out_close_loop;
    }
    if (!foreground) {
        int fd = open_log(&srv, log_path);

        if (fd < 0 || detach_stdio(fd) < 0) {
            gt__server_shutdown(&srv);
            uv_run(&loop, UV_RUN_DEFAULT);
            gt__server_cleanup(&srv);
            rc = -EIO;
            goto out_close_loop;
        }
        status = 0;
        if (write(ready[1], &status, 1) != 1)
            gt__log("start notification lost");
        close(ready[1]);
        ready[1] = -1;
        if (chdir("/") != 0)
            gt__log("chdir /: %s", strerror(errno));
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    gt__server_cleanup(&srv);
    rc = 0;
out_close_loop:
    uv_loop_close(&loop);
    if (ready[1] >= 0) {
        status = 1;
        if (write(ready[1], &status, 1) != 1)
            rc = rc ? rc : -EIO;
    }
    return rc < 0 ? 1 : 0;
}
