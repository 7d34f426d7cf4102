/*
 * Test workload with known per-thread counts for the kill loops: THREADS
 * threads each record instants (name "paced") in bursts of BURST, 1 ms
 * apart, for MS milliseconds or until SIGUSR1, through the dlsym shim. At the end it
 * prints, per thread, "tid=<os tid> produced=<instants>" on stdout.
 *
 *   agent_paced THREADS MS [BURST]
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "gradtrace/gradtrace_shim.h"

static volatile sig_atomic_t stop;

static void on_usr1(int sig)
{
    (void)sig;
    stop = 1;
}

struct worker {
    long ms, burst, produced;
    long tid;
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
    struct timespec pause = {0, 1000000};

    w->tid = (long)syscall(SYS_gettid);
    while (!stop && now_ms() < end) {
        for (long k = 0; k < w->burst; k++)
            gt_shim_instant(name);
        w->produced += w->burst;
        nanosleep(&pause, NULL);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    struct worker w[64] = {{0}};
    pthread_t th[64];
    int n;

    if (argc < 3 || (n = atoi(argv[1])) < 1 || n > 64) {
        fprintf(stderr, "usage: %s THREADS MS [BURST]\n", argv[0]);
        return 2;
    }
    signal(SIGUSR1, on_usr1);
    for (int i = 0; i < n; i++) {
        w[i].ms = atol(argv[2]);
        w[i].burst = argc > 3 ? atol(argv[3]) : 20;
        if (pthread_create(&th[i], NULL, run, &w[i]) != 0)
            return 1;
    }
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < n; i++)
        printf("tid=%ld produced=%ld\n", w[i].tid, w[i].produced);
    return 0;
}
