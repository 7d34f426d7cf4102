/*
 * A training loop that marks its backward per layer with NVTX ranges and
 * has no autograd nodes at all, as kernels/mlp_train.cu does, but without
 * CUDA (tests/progs/nvtx_client.h): ITERS iterations of `iter <i>` >
 * `forward` | `backward` | `optimizer` > `block.<k>`, four blocks, the
 * backward in reverse order. Each range spins a known time; block.2's
 * backward is the slow one.
 *
 * Usage: nvtx_bwd_layers nvtx OUT (the first argument as the other layer
 * programs take a mode, tests/e2e/layers/lib.sh). Writes one line per backward range to OUT,
 * "<iteration> <block> <begin ns> <end ns>" (CLOCK_MONOTONIC, taken just
 * outside the push and the pop), for tests/e2e/layers/check.py ranges.
 * Nothing on stdout.
 */
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "nvtx_client.h"

#define ITERS 4
#define BLOCKS 4

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Busy for us microseconds: a sleep could be cut short or stretched. */
static void spin_us(uint64_t us)
{
    uint64_t end = now_ns() + us * 1000u;
    while (now_ns() < end)
        ;
}

static void block_range(int k, uint64_t us)
{
    char name[32];
    snprintf(name, sizeof(name), "block.%d", k);
    nvtxRangePushA(name);
    spin_us(us);
    nvtxRangePop();
}

int main(int argc, char **argv)
{
    static const uint64_t bwd_us[BLOCKS] = {2000, 3000, 12000, 4000};
    FILE *out;

    if (argc != 3 || !(out = fopen(argv[2], "w"))) {
        fprintf(stderr, "usage: nvtx_bwd_layers nvtx OUT\n");
        return 2;
    }
    for (int it = 0; it < ITERS; it++) {
        char name[32];
        snprintf(name, sizeof(name), "iter %d", it);
        nvtxRangePushA(name);
        nvtxRangePushA("forward");
        for (int k = 0; k < BLOCKS; k++)
            block_range(k, 1000);
        nvtxRangePop();
        nvtxRangePushA("backward");
        for (int k = BLOCKS - 1; k >= 0; k--) {
            uint64_t b = now_ns();
            block_range(k, bwd_us[k]);
            uint64_t e = now_ns();
            /* b..e encloses the range; the range lasts at least the spin
             * (a thread descheduled between a clock read and the NVTX call
             * makes b..e longer than the range, never shorter). */
            fprintf(out, "%d %d %llu %llu %llu\n", it, k, (unsigned long long)b,
                    (unsigned long long)e, (unsigned long long)bwd_us[k]);
        }
        nvtxRangePop();
        nvtxRangePushA("optimizer");
        block_range(0, 500); /* inside optimizer: no layer */
        nvtxRangePop();
        nvtxRangePop();
    }
    return fclose(out) == 0 ? 0 : 1;
}
