/*
 * Test workload for the agent e2e tests: T threads each record E scope
 * events (E/2 begin/end pairs) through the public API via the dlsym shim,
 * so the same binary runs with and without the agent preloaded.
 *
 * Thread i names its scopes "t<i>.s<k mod 16>" for pair k: the checker
 * (agent_check) recovers the thread index and the order from the names.
 *
 *   agent_threads THREADS EVENTS [--fork CHILD_EVENTS] [--crash | --abort]
 *                 [--exit-from-thread] [--print-pids]
 *
 * --fork: after the threads finish, the main thread forks; the child
 *   records CHILD_EVENTS events as thread 100 and exits, the parent waits
 *   for it, then records another EVENTS as thread 101.
 * --crash: after the threads finish, the main thread records EVENTS as
 *   thread 200, then dereferences NULL (dies by SIGSEGV).
 * --abort: the same, then calls abort() (dies by SIGABRT).
 * --exit-from-thread: thread 0 calls exit(0) while others may still record.
 * --waves W: runs the THREADS threads W times over, each wave new threads
 *   (indexes wave * THREADS + i): exercises thread exit and state reuse.
 * --then-sleep MS: after the threads (and a fork), sleeps MS ms, then the
 *   main thread records EVENTS as thread 102.
 * --print-pids: prints "pid=<pid> child=<pid>" on stdout (fork mode).
 * Nothing else is printed.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gradtrace/gradtrace_shim.h"

struct worker {
    int index;
    long events;
    int exit_early;
};

static void record(int index, long events)
{
    uint32_t names[16];
    char buf[32];

    for (int k = 0; k < 16; k++) {
        snprintf(buf, sizeof(buf), "t%d.s%d", index, k);
        names[k] = gt_shim_intern(buf);
    }
    for (long k = 0; k < events / 2; k++) {
        gt_shim_scope_begin(names[k & 15]);
        gt_shim_scope_end();
    }
}

static void *run(void *arg)
{
    struct worker *w = arg;

    record(w->index, w->events);
    if (w->exit_early)
        exit(0);
    return NULL;
}

int main(int argc, char **argv)
{
    int threads, crash = 0, print = 0, exit_thread = 0, waves = 1;
    long events, child_events = -1, sleep_ms = -1;
    pthread_t *th;
    struct worker *w;

    if (argc < 3) {
        fprintf(stderr, "usage: %s THREADS EVENTS [--fork N] [--crash] "
                        "[--exit-from-thread] [--then-sleep MS] [--waves W]\n"
                        "       [--print-pids]\n", argv[0]);
        return 2;
    }
    threads = atoi(argv[1]);
    events = atol(argv[2]);
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--fork") && i + 1 < argc)
            child_events = atol(argv[++i]);
        else if (!strcmp(argv[i], "--crash"))
            crash = 1;
        else if (!strcmp(argv[i], "--abort"))
            crash = 2;
        else if (!strcmp(argv[i], "--print-pids"))
            print = 1;
        else if (!strcmp(argv[i], "--exit-from-thread"))
            exit_thread = 1;
        else if (!strcmp(argv[i], "--then-sleep") && i + 1 < argc)
            sleep_ms = atol(argv[++i]);
        else if (!strcmp(argv[i], "--waves") && i + 1 < argc)
            waves = atoi(argv[++i]);
    }
    th = calloc((size_t)threads, sizeof(*th));
    w = calloc((size_t)threads, sizeof(*w));
    if (!th || !w)
        return 1;
    for (int wave = 0; wave < waves; wave++) {
        for (int i = 0; i < threads; i++) {
            w[i] = (struct worker){wave * threads + i, events, exit_thread && i == 0};
            if (pthread_create(&th[i], NULL, run, &w[i]))
                return 1;
        }
        for (int i = 0; i < threads; i++)
            pthread_join(th[i], NULL);
    }
    if (child_events >= 0) {
        pid_t pid = fork();
        int st;
        if (pid < 0)
            return 1;
        if (pid == 0) {
            record(100, child_events);
            exit(0);
        }
        if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
            return 1;
        record(101, events);
        if (print)
            printf("pid=%d child=%d\n", (int)getpid(), (int)pid);
    }
    if (sleep_ms >= 0) {
        usleep((useconds_t)sleep_ms * 1000);
        record(102, events);
    }
    /* Fresh records in the main thread right before dying: these are still
     * in its buffer (the streamer runs every 20 ms), so the crash path is
     * what writes them. */
    if (crash)
        record(200, events);
    if (crash == 1) {
        volatile int *volatile p = NULL;
        *p = 1;
    }
    if (crash == 2)
        abort();
    free(th);
    free(w);
    return 0;
}
