/*
 * `gradtrace record [-o DIR] [--trigger SPEC]... [--raw] -- CMD [ARGS...]`
 *
 * Runs CMD with the agent preloaded and reports the trace files it left.
 *
 * Which daemon: the running one when it answers on the control socket and
 * no option (-o, --raw, --max-file-mb) asks for settings only a fresh
 * daemon can have;
 * otherwise a private daemon with its own runtime directory (mkdtemp,
 * 0700) that lives exactly as long as CMD: after CMD exits it is asked to
 * shut down, which finishes every conversion before it replies, and the
 * directory is removed. No daemon is left behind.
 *
 * Which files: after CMD exits, a "collect" request names CMD's pid and
 * the time it started; the daemon answers with the files of every agent
 * in that process tree (agents report their parent pid, and launchers in
 * between are agents too since LD_PRELOAD is inherited). The daemon reads
 * what exited agents left in their sockets first, so the answer is
 * complete without sleeping.
 *
 * Interrupts: the terminal's ^C (or a SIGINT sent to record's process
 * group) reaches CMD by itself, as CMD shares record's group; record is
 * not in that group's way: it counts the interrupt, forwards nothing, and
 * keeps waiting for CMD, then drains and lists the files. The private
 * daemon runs in a session of its own, so the interrupt never reaches it.
 * A second interrupt stops waiting for CMD: record collects what the
 * daemon has by then (with short timeouts) and lists it.
 *
 * Triggers that never matched: with --trigger, CMD's Python processes
 * write the module paths they ran (GRADTRACE_SEEN_LAYERS_DIR, a private
 * directory); a trigger whose layer matches none of them is reported
 * with the paths closest to it, rather than the run ending silently
 * (record_out.c, which also lists the files or says why there are none).
 *
 * Output discipline: CMD owns stdout; everything record says goes to
 * stderr. The exit status is CMD's (128+N when a signal N ended it), so
 * record drops into scripts transparently.
 */
#include "daemon/cli/record.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/paths.h"
#include "common/util.h"

#define MAX_TRIGGERS 32

static const char record_usage[] =
    "usage: gradtrace record [-o DIR] [--trigger SPEC]... [--ops] [--raw]\n"
    "                        [--max-file-mb N] -- CMD [ARGS...]\n"
    "\n"
    "Runs CMD with the gradtrace agent preloaded and prints (on stderr) the\n"
    "trace files written for it and its child processes.\n"
    "\n"
    "  -o, --output-dir DIR  write traces to DIR (default ./gradtrace-traces);\n"
    "                        uses a private daemon\n"
    "  --trigger SPEC        arm a capture trigger before CMD starts, e.g.\n"
    "                        layer=layers.17,phase=backward,iteration=200\n"
    "                        (add ops=1 for that window's aten operators)\n"
    "  --ops                 record every aten operator (cpu_op events, as\n"
    "                        torch.profiler shows them) in every capture; the\n"
    "                        default captures layers, backward nodes, steps,\n"
    "                        scopes and GPU activity, at a fraction of the cost\n"
    "  --raw                 also keep the raw .gtr streams (private daemon)\n"
    "  --max-file-mb N       start a new trace file past N MB (private daemon)\n"
    "\n"
    "Uses the running daemon when one answers (and none of -o, --raw,\n"
    "--max-file-mb is given), else starts a private one and stops it when\n"
    "CMD exits.\n"
    "Ctrl-C goes to CMD; record waits for it, then lists the files (a second\n"
    "Ctrl-C stops the wait).\n"
    "Environment: GRADTRACE_AGENT overrides the agent library path;\n"
    "GRADTRACE_OPS=1 is --ops.\n"
    "Exit status: CMD's (128+N when killed by signal N); 1 when recording\n"
    "could not start; 2 on bad usage.\n";

struct record {
    const char *out_dir;
    int raw;
    int ops;
    const char *max_file_mb;
    struct gt__trigger trig[MAX_TRIGGERS];
    size_t ntrig;
    char exe_dir[4096];
    char agent_lib[4096 + 32];
    char agent_sock[108];
    char control_sock[108];
    /* private daemon */
    int private_daemon;
    char tmp[64];
    char log[128];
    pid_t daemon_pid;
    /* module paths CMD's Python processes ran (with --trigger) */
    char seen_dir[64];
};

static volatile sig_atomic_t child_pid;
static volatile sig_atomic_t interrupts;

static void count_interrupt(int sig)
{
    (void)sig;
    interrupts++;
}

static void forward_signal(int sig)
{
    if (child_pid > 0)
        kill((pid_t)child_pid, sig);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Arms --trigger SPEC: parsed now, so a bad spec fails before CMD runs. */
static int add_trigger(struct record *r, const char *spec)
{
    char err[256];

    if (r->ntrig == MAX_TRIGGERS) {
        fprintf(stderr, "gradtrace record: more than %d triggers\n", MAX_TRIGGERS);
        return -1;
    }
    if (gt__trigger_parse_spec(spec, &r->trig[r->ntrig], err, sizeof(err)) < 0) {
        fprintf(stderr, "gradtrace record: --trigger '%s': %s\n", spec, err);
        return -1;
    }
    r->ntrig++;
    return 0;
}

/*
 * Options up to CMD: '+' stops getopt at the first operand (or after
 * "--"), so CMD's own options stay CMD's.
 * @return -1 with CMD at argv[*cmd_at], else the exit status (0 after
 *         --help, 2 on bad usage).
 */
static int parse_args(struct record *r, int argc, char **argv, int *cmd_at)
{
    static const struct option longopts[] = {
        {"output-dir", required_argument, NULL, 'o'},
        {"trigger", required_argument, NULL, 't'},
        {"raw", no_argument, NULL, 'r'},
        {"ops", no_argument, NULL, 'O'},
        {"max-file-mb", required_argument, NULL, 'm'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    static const char prog[] = "gradtrace record";
    int c;

    gt__cli_opt_begin(argv, prog);
    while ((c = getopt_long(argc, argv, "+ho:", longopts, NULL)) != -1) {
        switch (c) {
        case 'o': r->out_dir = optarg; break;
        case 'r': r->raw = 1; break;
        case 'O': r->ops = 1; break;
        /* gradtraced validates the number and reports a bad one. */
        case 'm': r->max_file_mb = optarg; break;
        case 't':
            if (add_trigger(r, optarg) < 0)
                return GT__EXIT_USAGE;
            break;
        case 'h': fputs(record_usage, stdout); return GT__EXIT_OK;
        default: return GT__EXIT_USAGE; /* getopt said why */
        }
    }
    if (optind >= argc)
        return gt__cli_usage_error(prog, "no command given");
    *cmd_at = optind;
    return -1;
}

static int find_agent(struct record *r)
{
    const char *env = getenv("GRADTRACE_AGENT");

    if (env && env[0]) {
        snprintf(r->agent_lib, sizeof(r->agent_lib), "%s", env);
    } else {
        snprintf(r->agent_lib, sizeof(r->agent_lib), "%s/libgradtrace.so",
                 r->exe_dir);
        if (access(r->agent_lib, R_OK) != 0)
            snprintf(r->agent_lib, sizeof(r->agent_lib),
                     "%s/../lib/libgradtrace.so", r->exe_dir);
    }
    if (access(r->agent_lib, R_OK) != 0) {
        fprintf(stderr, "gradtrace record: agent library not found: %s "
                "(set GRADTRACE_AGENT)\n", r->agent_lib);
        return -ENOENT;
    }
    return 0;
}

static void print_log(const char *path)
{
    char buf[4096];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n;

    if (fd < 0)
        return;
    while ((n = read(fd, buf, sizeof(buf))) > 0)
        if (gt__write_all(2, buf, (size_t)n, 0, 0) < 0)
            break;
    close(fd);
}

static pid_t spawn_daemon(struct record *r)
{
    char daemon[4096 + 16];
    const char *args[10];
    int n = 0, fd;
    pid_t pid;

    snprintf(daemon, sizeof(daemon), "%s/gradtraced", r->exe_dir);
    if (access(daemon, X_OK) != 0) {
        fprintf(stderr, "gradtrace record: %s not found\n", daemon);
        return -1;
    }
    args[n++] = "gradtraced";
    args[n++] = "--foreground";
    args[n++] = "--output-dir";
    args[n++] = r->out_dir ? r->out_dir : "gradtrace-traces";
    if (r->raw)
        args[n++] = "--raw";
    if (r->max_file_mb) {
        args[n++] = "--max-file-mb";
        args[n++] = r->max_file_mb;
    }
    args[n] = NULL;
    pid = fork();
    if (pid != 0)
        return pid;
    /* Child: the daemon itself is never profiled, talks to nobody's
     * terminal (its own session: the terminal's ^C is CMD's, and the
     * daemon must outlive CMD to drain its stream), and logs into the
     * private directory. */
    setsid();
    signal(SIGINT, SIG_DFL);
    signal(SIGQUIT, SIG_DFL);
    setenv("GRADTRACE_SOCKET", r->agent_sock, 1);
    setenv("GRADTRACE_CONTROL", r->control_sock, 1);
    unsetenv("LD_PRELOAD");
    fd = open(r->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd >= 0)
        dup2(fd, 2);
    fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (fd >= 0) {
        dup2(fd, 0);
        dup2(fd, 1);
    }
    execv(daemon, (char *const *)args);
    _exit(127);
}

static int start_private(struct record *r)
{
    char err[256];
    uint64_t deadline = gt__mono_ns() + 10 * 1000000000ull;

    snprintf(r->tmp, sizeof(r->tmp), "/tmp/gradtrace-rec-XXXXXX");
    if (!mkdtemp(r->tmp)) {
        fprintf(stderr, "gradtrace record: mkdtemp: %s\n", strerror(errno));
        r->tmp[0] = '\0';
        return -errno;
    }
    snprintf(r->agent_sock, sizeof(r->agent_sock), "%s/agent.sock", r->tmp);
    snprintf(r->control_sock, sizeof(r->control_sock), "%s/control.sock", r->tmp);
    snprintf(r->log, sizeof(r->log), "%s/gradtraced.log", r->tmp);
    r->private_daemon = 1;
    r->daemon_pid = spawn_daemon(r);
    if (r->daemon_pid < 0)
        return -ECHILD;
    /* Ready when the control socket answers; gone when the child exits. */
    while (gt__mono_ns() < deadline) {
        cJSON *reply = NULL;
        int status;
        int rc = gt__cli_simple(r->control_sock, "status", 1000, &reply, err,
                                sizeof(err));

        cJSON_Delete(reply);
        if (rc == 0)
            return 0;
        if (waitpid(r->daemon_pid, &status, WNOHANG) == r->daemon_pid) {
            r->daemon_pid = 0;
            fprintf(stderr, "gradtrace record: the private daemon did not start:\n");
            print_log(r->log);
            return -ECHILD;
        }
        sleep_ms(10);
    }
    fprintf(stderr, "gradtrace record: the private daemon did not answer in 10 s\n");
    return -ETIMEDOUT;
}

/*
 * Stops the private daemon (if any) and removes its directory.
 * @return the files its shutdown reply lists (every file it wrote, all of
 *         them CMD's; the caller owns them), or NULL.
 */
static cJSON *stop_private(struct record *r)
{
    char err[256];
    cJSON *files = NULL;
    cJSON *reply = NULL;
    char path[128];
    int status = 0;

    if (r->daemon_pid > 0) {
        /* Shutdown replies only after every conversion is finished. */
        if (gt__cli_simple(r->control_sock, "shutdown",
                           interrupts >= 2 ? 10000 : 600000, &reply, err,
                           sizeof(err)) < 0) {
            fprintf(stderr, "gradtrace record: private daemon: %s\n", err);
            kill(r->daemon_pid, SIGTERM);
        }
        files = cJSON_DetachItemFromObjectCaseSensitive(reply, "files");
        cJSON_Delete(reply);
        while (waitpid(r->daemon_pid, &status, 0) < 0 && errno == EINTR)
            ;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "gradtrace record: private daemon ended badly; its log:\n");
            print_log(r->log);
        }
        r->daemon_pid = 0;
    }
    if (!r->tmp[0])
        return files;
    unlink(r->agent_sock);
    unlink(r->control_sock);
    snprintf(path, sizeof(path), "%s.lock", r->agent_sock);
    unlink(path);
    unlink(r->log);
    if (rmdir(r->tmp) != 0)
        fprintf(stderr, "gradtrace record: cannot remove %s: %s\n", r->tmp,
                strerror(errno));
    return files;
}

/* Prepends value to the colon-separated variable name. */
static int env_prepend(const char *name, const char *value)
{
    const char *old = getenv(name);
    char *buf;
    int rc;

    if (!old || !old[0])
        return setenv(name, value, 1);
    if (asprintf(&buf, "%s:%s", value, old) < 0)
        return -1;
    rc = setenv(name, buf, 1);
    free(buf);
    return rc;
}

static void python_path(const struct record *r)
{
    static const char *const rel[] = {"../python", "../share/gradtrace/python"};
    char path[4096 + 64];
    struct stat st;

    for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", r->exe_dir, rel[i]);
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
            char *abs = realpath(path, NULL);

            env_prepend("PYTHONPATH", abs ? abs : path);
            free(abs);
            return;
        }
    }
}

static pid_t spawn_command(const struct record *r, char **cmd)
{
    pid_t pid = fork();

    if (pid != 0)
        return pid;
    setenv("GRADTRACE_SOCKET", r->agent_sock, 1);
    setenv("GRADTRACE_CONTROL", r->control_sock, 1);
    env_prepend("LD_PRELOAD", r->agent_lib);
    /* With triggers, capture is off outside their windows (the agent
     * turns it on and off); a GRADTRACE_CAPTURE the user set wins. */
    if (r->ntrig)
        setenv("GRADTRACE_CAPTURE", "0", 0);
    if (r->ops)
        setenv("GRADTRACE_OPS", "1", 1);
    if (r->seen_dir[0])
        setenv("GRADTRACE_SEEN_LAYERS_DIR", r->seen_dir, 1);
    python_path(r);
    execvp(cmd[0], cmd);
    fprintf(stderr, "gradtrace record: cannot run %s: %s\n", cmd[0], strerror(errno));
    _exit(errno == ENOENT ? 127 : 126);
}

static int send_triggers(const struct record *r)
{
    char err[256], spec[1024];

    for (size_t i = 0; i < r->ntrig; i++) {
        cJSON *req = gt__trigger_to_json(&r->trig[i]);
        cJSON *reply = NULL;
        int rc = req ? gt__cli_request(r->control_sock, req, 10000, &reply, err,
                                       sizeof(err))
                     : -ENOMEM;

        cJSON_Delete(req);
        cJSON_Delete(reply);
        if (rc < 0) {
            if (gt__trigger_format(&r->trig[i], spec, sizeof(spec)) < 0)
                spec[0] = '\0';
            fprintf(stderr, "gradtrace record: trigger %s: %s\n", spec, err);
            return rc;
        }
    }
    return 0;
}

/*
 * Waits for CMD. Like time(1): the terminal's ^C goes to CMD (same
 * process group); record only counts it (the handlers gt__cmd_record
 * installs), and a second one stops the wait. Termination signals sent
 * to record alone are passed on.
 * @return CMD's exit status (128+N for signal N; 128+SIGINT when the wait
 *         was given up).
 */
static int wait_command(pid_t pid)
{
    struct sigaction fwd = {.sa_handler = forward_signal};
    struct sigaction old_term, old_hup;
    int status = 0, rc;

    child_pid = pid;
    sigaction(SIGTERM, &fwd, &old_term);
    sigaction(SIGHUP, &fwd, &old_hup);
    while ((rc = waitpid(pid, &status, 0)) < 0 && errno == EINTR &&
           interrupts < 2)
        ;
    child_pid = 0;
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGHUP, &old_hup, NULL);
    if (rc < 0) {
        fprintf(stderr, "\ngradtrace record: interrupted again: not waiting "
                "for the command any longer\n");
        return 128 + SIGINT;
    }
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}

/* @return the files of CMD's finished agents; *running counts the others. */
static cJSON *collect(const struct record *r, pid_t pid, uint64_t since,
                      int *running_n, int *agents)
{
    char err[256];
    cJSON *req = cJSON_CreateObject(), *reply = NULL, *files = NULL, *running;

    if (!req)
        return NULL;
    cJSON_AddStringToObject(req, "cmd", "collect");
    cJSON_AddNumberToObject(req, "pid", (double)pid);
    cJSON_AddNumberToObject(req, "since_ns", (double)since);
    if (gt__cli_request(r->control_sock, req, interrupts >= 2 ? 5000 : 600000,
                        &reply, err, sizeof(err)) < 0) {
        fprintf(stderr, "gradtrace record: collecting traces: %s\n", err);
    } else {
        files = cJSON_DetachItemFromObjectCaseSensitive(reply, "files");
        running = cJSON_GetObjectItemCaseSensitive(reply, "running");
        *running_n = cJSON_GetArraySize(running);
        if (cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(reply, "agents")))
            *agents = (int)gt__cli_num(reply, "agents");
        if (*running_n > 0 && !r->private_daemon)
            fprintf(stderr, "gradtrace record: %d process(es) of the command "
                    "are still streaming; their traces are not listed\n",
                    *running_n);
    }
    cJSON_Delete(req);
    cJSON_Delete(reply);
    return files;
}

/* The shared daemon when it answers and no private settings are asked. */
static int use_running_daemon(struct record *r)
{
    char err[256];
    cJSON *reply = NULL;
    const cJSON *sock;
    int ok = 0;

    if (r->out_dir || r->raw || r->max_file_mb)
        return 0;
    if (gt__control_socket_path(r->control_sock, sizeof(r->control_sock)) < 0)
        return 0;
    if (gt__cli_simple(r->control_sock, "status", 2000, &reply, err,
                       sizeof(err)) == 0) {
        sock = cJSON_GetObjectItemCaseSensitive(reply, "agent_socket");
        if (cJSON_IsString(sock) && strlen(sock->valuestring) < sizeof(r->agent_sock)) {
            snprintf(r->agent_sock, sizeof(r->agent_sock), "%s", sock->valuestring);
            ok = 1;
        }
    }
    cJSON_Delete(reply);
    return ok;
}

int gt__cmd_record(int argc, char **argv)
{
    struct record *r = calloc(1, sizeof(*r));
    /* No SA_RESTART: an interrupt must end wait_command's waitpid. */
    struct sigaction count = {.sa_handler = count_interrupt};
    struct sigaction old_int, old_quit;
    cJSON *files = NULL, *all;
    int cmd_at = 0, rc, status = GT__EXIT_ERROR, running = 0, said, agents = -1;
    uint64_t since;
    pid_t pid;

    if (!r)
        return GT__EXIT_ERROR;
    rc = parse_args(r, argc, argv, &cmd_at);
    if (rc >= 0) {
        status = rc;
        goto out_free;
    }
    if (gt__cli_exe_dir(r->exe_dir, sizeof(r->exe_dir)) < 0 || find_agent(r) < 0)
        goto out_free;
    /* From here to the end an interrupt must not kill record: the
     * private daemon would be left behind, CMD's files unlisted. */
    interrupts = 0;
    sigemptyset(&count.sa_mask);
    sigaction(SIGINT, &count, &old_int);
    sigaction(SIGQUIT, &count, &old_quit);
    if (!use_running_daemon(r) && start_private(r) < 0)
        goto out_stop;
    if (send_triggers(r) < 0)
        goto out_stop;
    if (r->ntrig) {
        snprintf(r->seen_dir, sizeof(r->seen_dir), "/tmp/gradtrace-layers-XXXXXX");
        if (!mkdtemp(r->seen_dir))
            r->seen_dir[0] = '\0'; /* no report then, nothing else lost */
    }
    fflush(NULL);
    since = gt__mono_ns();
    pid = spawn_command(r, argv + cmd_at);
    if (pid < 0) {
        fprintf(stderr, "gradtrace record: fork: %s\n", strerror(errno));
        goto out_stop;
    }
    status = wait_command(pid);
    files = collect(r, pid, since, &running, &agents);
out_stop:
    all = stop_private(r);
    /* Processes of CMD still streaming (after a second interrupt): the
     * private daemon's shutdown cut their streams and closed their
     * traces; its reply lists them, and every file it has is CMD's. */
    if (running > 0 && all) {
        cJSON_Delete(files);
        files = all;
        all = NULL;
    }
    cJSON_Delete(all);
    said = gt__record_unmatched(r->seen_dir, r->trig, r->ntrig);
    if (files)
        gt__record_print_files(files, r->ntrig > 0, !said, status, agents,
                               interrupts >= 2);
    cJSON_Delete(files);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGQUIT, &old_quit, NULL);
out_free:
    free(r);
    return status;
}
