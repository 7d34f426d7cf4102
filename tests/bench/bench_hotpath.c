/*
 * Agent hot-path benchmark. Prints figures; never passes or fails on time.
 *
 *   bench_hotpath [events_per_thread] [max_threads]
 *
 * In one run, side by side:
 *   - one clock_gettime(CLOCK_MONOTONIC), one rdtsc, and one gt__now() (the
 *     event timestamp: the TSC map once fitted), ns per call;
 *   - a captured event (half gt_scope_begin, half gt_scope_end) while the
 *     streamer writes to a file: ns per event, p50 and p99 over batches of
 *     1000 events;
 *   - the same calls while capture is off, and gt_module_begin/end pairs
 *     off (they keep the layer stack): ns per call;
 *   - 1..max_threads threads recording into a file: events/s end to end
 *     (until the final flush has written everything), recorded and lost.
 * DESIGN.md budgets: <= 10 ns per captured event at p50, <= 1 ns idle.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <x86intrin.h>

#include "agent/core.h"
#include "agent/ring.h"

#define BATCH 1000
#define NBATCH 4000

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double samples[NBATCH];

static void report(const char *what)
{
    qsort(samples, NBATCH, sizeof(double), cmp_double);
    printf("%-44s p50 %6.2f ns   p99 %6.2f ns   min %6.2f ns\n", what,
           samples[NBATCH / 2], samples[NBATCH * 99 / 100], samples[0]);
}

/* Each sample: ns per operation over one batch of BATCH operations. */
#define MEASURE(what, body)                                                   \
    do {                                                                      \
        for (int b_ = 0; b_ < NBATCH; b_++) {                                 \
            double t0_ = now_s();                                             \
            for (int i_ = 0; i_ < BATCH / 2; i_++) {                          \
                body;                                                         \
            }                                                                 \
            samples[b_] = (now_s() - t0_) * 1e9 / BATCH;                      \
        }                                                                     \
        report(what);                                                      \
    } while (0)

static volatile uint64_t sink;

struct worker {
    long events;
    uint32_t name;
};

static void *record(void *arg)
{
    struct worker *w = arg;

    for (long i = 0; i < w->events / 2; i++) {
        gt_scope_begin(w->name);
        gt_scope_end();
    }
    return NULL;
}

static uint64_t lost_total(void)
{
    uint64_t lost = 0;

    for (struct gt__thread *t = atomic_load(&gt__threads); t; t = t->next)
        lost += atomic_load(&t->lost);
    return lost;
}

/* The streamer has taken everything committed (a racy read of rd_off is
 * fine for a benchmark's stopping condition). */
static int drained(void)
{
    for (struct gt__thread *t = atomic_load(&gt__threads); t; t = t->next) {
        struct gt__block *b = atomic_load(&t->blocks);
        uint64_t rd = atomic_load(&t->rd);

        if (!b)
            continue;
        if (rd != atomic_load(&t->wr) ||
            *(volatile uint32_t *)&t->rd_off != atomic_load(&b[rd % t->nblocks].used))
            return 0;
    }
    return 1;
}

int main(int argc, char **argv)
{
    long events = argc > 1 ? atol(argv[1]) : 2000000;
    int max_threads = argc > 2 ? atoi(argv[2]) : 4;
    char dir[] = "/tmp/gt-bench-hotpath.XXXXXX", path[128];
    struct gt__config c;
    uint32_t name;
    struct stat st;

    if (!mkdtemp(dir))
        return 1;
    snprintf(path, sizeof(path), "%s/bench.gtr", dir);
    memset(&c, 0, sizeof(c));
    snprintf(c.file_path, sizeof(c.file_path), "%s", path);
    c.capture = 1;
    c.tsc = 1;
    c.block_kb = 1024;
    c.blocks = 64;
    if (gt__agent_start(&c) < 0)
        return 1;
    name = gt_intern("bench.scope");
    /* The streamer fits the TSC map ~50 ms after start. */
    for (int i = 0; i < 100 && !atomic_load(&gt__tsc_map); i++)
        usleep(10000);

    printf("== single thread, %d batches of %d\n", NBATCH, BATCH);
    printf("(on %ld online CPUs, shared)\n", sysconf(_SC_NPROCESSORS_ONLN));
    MEASURE("clock_gettime(CLOCK_MONOTONIC), per call", {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        sink += (uint64_t)ts.tv_nsec;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        sink += (uint64_t)ts.tv_nsec;
    });
    MEASURE("rdtsc, per call", {
        sink += __rdtsc();
        sink += __rdtsc();
    });
    MEASURE("gt__now() (event timestamp), per call", {
        sink += gt__now();
        sink += gt__now();
    });
    printf("time base: %s\n", atomic_load(&gt__tsc_map) ? "TSC mapped to CLOCK_MONOTONIC"
                                                        : "clock_gettime");
    /* First pass through fresh ring memory pays page faults (~1 per 180
     * events): measured once, then the steady state after a warm-up pass
     * over the whole ring (64 MiB). */
    MEASURE("captured event, first touch of ring pages", {
        gt_scope_begin(name);
        gt_scope_end();
    });
    for (long i = 0; i < 3000000; i++) {
        gt_scope_begin(name);
        gt_scope_end();
    }
    usleep(200000);
    MEASURE("captured event (scope begin/end), per event", {
        gt_scope_begin(name);
        gt_scope_end();
    });
    MEASURE("captured instant (no scope stack), per event", {
        gt_instant(name);
        gt_instant(name);
    });
    gt_capture_stop();
    MEASURE("capture off: scope begin/end, per call", {
        gt_scope_begin(name);
        gt_scope_end();
    });
    MEASURE("capture off: module begin/end (layer stack)", {
        gt_module_begin(name, 0);
        gt_module_end();
    });
    MEASURE("capture off: node created, per call", {
        gt_node_created((uint64_t)i_, 1);
        gt_node_created((uint64_t)i_, 1);
    });
    gt_capture_start();

    printf("== threads recording into %s (1 MiB x 64 blocks per thread)\n", path);
    for (int n = 1; n <= max_threads; n *= 2) {
        pthread_t th[64];
        struct worker w = {events, name};
        uint64_t lost0 = lost_total(), lost;
        double t0, t1, t2, total = (double)n * (double)events;

        t0 = now_s();
        for (int i = 0; i < n; i++)
            pthread_create(&th[i], NULL, record, &w);
        for (int i = 0; i < n; i++)
            pthread_join(th[i], NULL);
        t1 = now_s();
        while (!drained())
            usleep(1000);
        t2 = now_s();
        lost = lost_total() - lost0;
        printf("%2d thread(s) x %ld events: producers %6.1f M ev/s, end to end "
               "(compressed and written) %6.1f M ev/s, lost %llu (%.2f%%)\n",
               n, events, total / (t1 - t0) / 1e6, (total - (double)lost) / (t2 - t0) / 1e6,
               (unsigned long long)lost, 100.0 * (double)lost / total);
    }
    {
        double t0 = now_s();
        gt__agent_stop();
        printf("final flush: %.1f ms\n", (now_s() - t0) * 1e3);
    }
    if (stat(path, &st) == 0)
        printf("file: %.1f MB\n", (double)st.st_size / 1e6);
    unlink(path);
    rmdir(dir);
    return 0;
}
