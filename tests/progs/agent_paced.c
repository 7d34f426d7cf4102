/*
 * Test workload with known per-thread counts for the kill and disk-full
 * loops: THREADS threads each record instants (name "paced") in bursts of
 * BURST, 1 ms apart, for MS milliseconds or until SIGUSR1, through the
 * dlsym shim. At the end it prints, per thread, "tid=<os tid>
 * produced=<instants>" on stdout.
 *
 *   agent_paced THREADS MS [BURST [LINGER_MS [CHILDREN [LAYER]]]]
 *
 * LINGER_MS: after printing, the process stays LINGER_MS more without
 * recording (its agent may reconnect meanwhile: a stream with nothing but
 * loss counts). CHILDREN: before its threads start, the process forks
 * that many children, each recording in its own main thread like a
 * worker, printing its line and ending with _exit(0), as Python's
 * multiprocessing ends its workers; the parent waits for them. With
 * LAYER, the first thread makes each burst a call of module LAYER (a
 * capture window's forward segment, for triggers naming it; its line says
 * "spans=1") and ends a training step (gt_step) at each SIGUSR2: a window
 * of iteration N is done at the N+1-th signal.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gradtrace/gradtrace_shim.h"

static volatile sig_atomic_t stop, steps;

static void on_usr1(int sig)
{
    (void)sig;
    stop = 1;
}

static void on_usr2(int sig)
{
    (void)sig;
    steps++;
}

struct worker {
    long ms, burst, produced;
    long tid;
    const char *layer;          /* NULL: no module calls */
};

static long now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void *run(void *arg)
{
    struct worker *w = arg;
    uint32_t name = gt_shim_intern("paced");
    long end = now_ms() + w->ms;
    uint32_t layer = w->layer ? gt_shim_intern(w->layer) : 0;
    struct timespec pause = {0, 1000000};
    long stepped = 0;

    w->tid = (long)syscall(SYS_gettid);
    while (!stop && now_ms() < end) {
        if (layer)
            gt_shim_module_begin(layer, layer);
        for (long k = 0; k < w->burst; k++)
            gt_shim_instant(name);
        if (layer)
            gt_shim_module_end();
        w->produced += w->burst;
        while (layer && stepped < steps)
            gt_shim_step((uint64_t)stepped++);
        nanosleep(&pause, NULL);
    }
    return NULL;
}

/* A forked worker: records like a thread, says what it made, _exit(0). */
static void child_run(long ms, long burst)
{
    struct worker w = {.ms = ms, .burst = burst};
    char line[64];
    int n;

    run(&w);
    n = snprintf(line, sizeof(line), "tid=%ld produced=%ld\n", w.tid, w.produced);
    if (write(1, line, (size_t)n) != n)
        _exit(1);
    _exit(0);
}

int main(int argc, char **argv)
{
    struct worker w[64] = {{0}};
    pthread_t th[64];
    pid_t kids[64];
    long linger = argc > 4 ? atol(argv[4]) : 0;
    int n, nkids = argc > 5 ? atoi(argv[5]) : 0, status = 0;

    if (argc < 3 || (n = atoi(argv[1])) < 1 || n > 64 || nkids < 0 ||
        nkids > 64) {
        fprintf(stderr, "usage: %s THREADS MS [BURST [LINGER_MS [CHILDREN "
                "[LAYER]]]]\n", argv[0]);
        return 2;
    }
    signal(SIGUSR1, on_usr1);
    signal(SIGUSR2, on_usr2);
    fflush(stdout);
    for (int i = 0; i < nkids; i++) {
        kids[i] = fork();
        if (kids[i] < 0)
            return 1;
        if (kids[i] == 0)
            child_run(atol(argv[2]), argc > 3 ? atol(argv[3]) : 20);
    }
    for (int i = 0; i < n; i++) {
        w[i].ms = atol(argv[2]);
        w[i].burst = argc > 3 ? atol(argv[3]) : 20;
        w[i].layer = argc > 6 && i == 0 ? argv[6] : NULL;
        if (pthread_create(&th[i], NULL, run, &w[i]) != 0)
            return 1;
    }
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < n; i++)
        printf("tid=%ld produced=%ld%s\n", w[i].tid, w[i].produced,
               w[i].layer ? " spans=1" : "");
    fflush(stdout);
    for (int i = 0; i < nkids; i++) {
        int st;
        if (waitpid(kids[i], &st, 0) != kids[i] || !WIFEXITED(st) ||
            WEXITSTATUS(st) != 0)
            status = 1;
    }
    if (linger > 0) {
        struct timespec ts = {linger / 1000, (linger % 1000) * 1000000};
        while (nanosleep(&ts, &ts) != 0)
            ;
    }
    return status;
}
