/*
 * fake_recfn: a program without torch that plays libtorch's
 * RecordFunction for the agent's operator callback (agent/ops.c), for
 * tests/e2e/t_agent_ops_pause.sh. It defines, and exports (-rdynamic),
 * the four libtorch functions the agent looks up in the global scope at
 * start (at::addGlobalCallback, at::disableCallback,
 * at::reenableCallback, at::RecordFunction::name), with the same C++ ABI
 * agent/recordfn.c describes, and runs "operators" the way libtorch does:
 * each takes the enabled FUNCTION-scope callbacks at its start and runs
 * exactly those at its end.
 *
 * Three phases of OPS operators each: capture on, capture off
 * (gt_capture_stop), capture on again (gt_capture_start); then, still
 * capturing, OPS pairs of operators whose names are built in one reused
 * buffer, as libtorch's "autograd::engine::evaluate_function: <node>"
 * names are (the same pointer, a long common prefix, different texts).
 * It writes "registered R disables D reenables E starts S" to
 * RESULT_FILE: with a pausing agent, R 1, D 1, E 1 and S = 4 * OPS + 1
 * (the first operator after the stop runs the callback, which pauses
 * it). Nothing on stdout.
 *
 * Usage: fake_recfn RESULT_FILE. Exit 0; 2 on bad usage; 3 without the
 * agent.
 *
 * fake_recfn --bench N: runs N operators (64 distinct names) three times
 * and prints the thread CPU time per operator of each run (the agent's
 * own part of an operator's cost: start and end callbacks, two records,
 * with capture on; without the agent, the bare loop), for
 * tests/bench/bench_opcb.sh.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAXCB 4
#define OPS 5
#define SCOPE_FUNCTION 0

struct rf_callback {
    void **(*start)(void **ctx_out, const void *rf);
    void (*end)(const void *rf, void *ctx);
    double sampling_prob;
    _Bool scopes[10];
    _Bool needs_inputs, needs_outputs, needs_ids;
};

struct fake_rf {
    const char *name;
};

static struct rf_callback g_cb[MAXCB];
static int g_enabled[MAXCB];
static int g_ncb, g_disables, g_reenables, g_starts;

uint64_t _ZN2at17addGlobalCallbackENS_22RecordFunctionCallbackE(
    struct rf_callback cb)
{
    if (g_ncb == MAXCB)
        return 0;
    g_cb[g_ncb] = cb;
    g_enabled[g_ncb] = 1;
    return (uint64_t)++g_ncb; /* handle: index + 1 */
}

void _ZN2at15disableCallbackEm(uint64_t h)
{
    g_disables++;
    if (h >= 1 && h <= (uint64_t)g_ncb)
        g_enabled[h - 1] = 0;
}

void _ZN2at16reenableCallbackEm(uint64_t h)
{
    g_reenables++;
    if (h >= 1 && h <= (uint64_t)g_ncb)
        g_enabled[h - 1] = 1;
}

const char *_ZNK2at14RecordFunction4nameEv(const struct fake_rf *rf)
{
    return rf->name;
}

static void op(const char *name)
{
    struct fake_rf rf = {name};
    void *ctx[MAXCB];
    int ran[MAXCB], n = g_ncb;

    for (int i = 0; i < n; i++) {
        ran[i] = g_enabled[i] && g_cb[i].scopes[SCOPE_FUNCTION];
        if (ran[i]) {
            g_starts++;
            g_cb[i].start(&ctx[i], &rf);
        }
    }
    for (int i = n - 1; i >= 0; i--)
        if (ran[i])
            g_cb[i].end(&rf, ctx[i]);
}

static double thread_ns(void)
{
    struct timespec t;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int bench(long n)
{
    static char text[64][32];
    const char *names[64];

    for (int i = 0; i < 64; i++) {
        snprintf(text[i], sizeof(text[i]), "aten::op%d", i);
        names[i] = text[i];
    }
    /* In batches of 8192 operators (about 0.5 MiB of records, a quarter
     * of a thread's ring) with a 2 ms pause after each, so that the
     * streamer keeps up and every record is kept, as in a training step,
     * where operators are a microsecond or more apart. Unpaced, the ring
     * fills and the agent drops records: a cheaper path than keeping
     * them. The pauses are not in the thread's CPU time. */
    for (int r = 0; r < 3; r++) {
        double spent = 0;
        for (long done = 0; done < n;) {
            long b = n - done < 8192 ? n - done : 8192;
            double t0 = thread_ns();
            for (long i = 0; i < b; i++)
                op(names[(done + i) & 63]);
            spent += thread_ns() - t0;
            done += b;
            nanosleep(&(struct timespec){0, 2000000}, NULL);
        }
        printf("%.1f\n", spent / (double)n);
    }
    return 0;
}

int main(int argc, char **argv)
{
    void (*start)(void), (*stop)(void);

    if (argc == 3 && strcmp(argv[1], "--bench") == 0)
        return bench(atol(argv[2]));
    if (argc != 2) {
        fprintf(stderr, "usage: fake_recfn RESULT_FILE\n");
        return 2;
    }
    *(void **)&start = dlsym(RTLD_DEFAULT, "gt_capture_start");
    *(void **)&stop = dlsym(RTLD_DEFAULT, "gt_capture_stop");
    if (!start || !stop) {
        fprintf(stderr, "fake_recfn: the agent is not loaded\n");
        return 3;
    }
    for (int i = 0; i < OPS; i++)
        op("fake::captured_first");
    stop();
    for (int i = 0; i < OPS; i++)
        op("fake::idle");
    start();
    for (int i = 0; i < OPS; i++)
        op("fake::captured_again");
    static char built[64];
    for (int i = 0; i < 2 * OPS; i++) {
        snprintf(built, sizeof(built), "%s%s",
                 "autograd::engine::evaluate_function: ",
                 i % 2 ? "TBackward0" : "AddmmBackward0");
        op(built);
    }
    FILE *f = fopen(argv[1], "w");
    if (!f)
        return 1;
    fprintf(f, "registered %d disables %d reenables %d starts %d\n", g_ncb,
            g_disables, g_reenables, g_starts);
    return fclose(f) != 0;
}
