/*
 * Cost of an NVTX push+pop pair as the program sees it: run it plain,
 * with the agent preloaded and capture off, and with capture on, e.g.
 *
 *   build/progs/nvtx_bench
 *   GRADTRACE_CAPTURE=0 GRADTRACE_FILE=/tmp/b.gtr LD_PRELOAD=build/libgradtrace.so build/progs/nvtx_bench
 *   GRADTRACE_FILE=/tmp/b.gtr LD_PRELOAD=build/libgradtrace.so build/progs/nvtx_bench
 *
 * Prints the best of 5 rounds of N pairs (argument, default 200000) on
 * stderr. A benchmark: it never fails on time. Exit 77 without nvtx3.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#if __has_include(<nvtx3/nvToolsExt.h>)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wcast-align"
#pragma GCC diagnostic ignored "-Wshadow"
#include <nvtx3/nvToolsExt.h>
#pragma GCC diagnostic pop

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 200000;
    if (n <= 0)
        n = 200000;
    double best = 1e300;
    nvtxRangePushA("warm-up"); /* NVTX initialises (and injects) here */
    nvtxRangePop();
    for (int round = 0; round < 5; round++) {
        double t0 = now_ns();
        for (long i = 0; i < n; i++) {
            nvtxRangePushA("block.0");
            nvtxRangePop();
        }
        double per = (now_ns() - t0) / (double)n;
        if (per < best)
            best = per;
    }
    fprintf(stderr, "nvtx_bench: %.1f ns per push+pop (best of 5 x %ld)\n", best, n);
    return 0;
}
#else
int main(void)
{
    fprintf(stderr, "built without the nvtx3 headers\n");
    return 77;
}
#endif
