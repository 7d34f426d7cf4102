/*
 * capi_layers: a C "training program" without libtorch, for
 * tests/e2e/t_capi_layers.sh. It plays autograd through the gradtrace C
 * API (the header-only shim): four blocks, each creating three nodes in
 * its forward (one in a sub-layer "fc1", one in "fc2", one in the block
 * itself) and running them in reverse order in a backward pass, for a few
 * iterations.
 *
 * Usage: capi_layers MODE STRUCTURE_FILE [STEPS [PAUSE_MS]]
 *   MODE capi: layers are gt_module_begin/end with full paths;
 *   MODE nvtx: layers are NVTX ranges "blocks.<i>" > "fc1" | "fc2" in the
 *        forward, and each block's backward is a range "blocks.<i>
 *        backward" (a backward range: no forward layer call).
 * PAUSE_MS: a pause after every step, so that a control sent from outside
 * (tests/e2e/t_cli_start_steps.sh) lands while the program runs.
 * As tests/progs/torch_layers.cpp, it writes "<path> <first seq> <end
 * seq>" per layer call to STRUCTURE_FILE. Nothing on stdout. Exit 0, 2 on
 * bad usage. NVTX: tests/progs/nvtx_client.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gradtrace/gradtrace_shim.h"
#include "tests/progs/nvtx_client.h"

#define BLOCKS 4
#define NODES 3   /* per block and iteration */

static int g_nvtx;
static FILE *g_structure;
static uint64_t g_seq;

struct call {
    char path[64];
    uint64_t first;
};

static void layer_open(struct call *c, const char *path, const char *name)
{
    snprintf(c->path, sizeof(c->path), "%s", path);
    c->first = g_seq;
    if (g_nvtx) {
        nvtxRangePushA(name);
        return;
    }
    gt_shim_module_begin(gt_shim_intern(path), gt_shim_intern("Block"));
}

static void layer_close(const struct call *c)
{
    if (g_nvtx)
        nvtxRangePop();
    else
        gt_shim_module_end();
    fprintf(g_structure, "%s %llu %llu\n", c->path,
            (unsigned long long)c->first, (unsigned long long)g_seq);
}

static void node(void)
{
    gt_shim_node_created(g_seq++, 1);
}

static void block_forward(int i)
{
    char path[64], sub[80];
    struct call blk, fc;

    snprintf(path, sizeof(path), "blocks.%d", i);
    layer_open(&blk, path, path);
    snprintf(sub, sizeof(sub), "%s.fc1", path);
    layer_open(&fc, sub, "fc1");
    node();
    layer_close(&fc);
    snprintf(sub, sizeof(sub), "%s.fc2", path);
    layer_open(&fc, sub, "fc2");
    node();
    layer_close(&fc);
    node();
    layer_close(&blk);
}

static void block_backward(int i, uint64_t first, uint32_t name)
{
    char label[64];
    if (g_nvtx) {
        snprintf(label, sizeof(label), "blocks.%d backward", i);
        nvtxRangePushA(label);
    }
    for (int k = NODES - 1; k >= 0; k--) {
        uint64_t seq = first + (uint64_t)(i * NODES + k);
        gt_shim_bwd_node_begin(name, seq, 1);
        gt_shim_bwd_node_end(seq, 1);
    }
    if (g_nvtx)
        nvtxRangePop();
}

int main(int argc, char **argv)
{
    if (argc < 3 || (strcmp(argv[1], "capi") && strcmp(argv[1], "nvtx"))) {
        fprintf(stderr, "usage: capi_layers capi|nvtx STRUCTURE_FILE [STEPS [PAUSE_MS]]\n");
        return 2;
    }
    g_nvtx = !strcmp(argv[1], "nvtx");
    g_structure = fopen(argv[2], "w");
    if (!g_structure) {
        perror(argv[2]);
        return 1;
    }
    int steps = argc > 3 ? atoi(argv[3]) : 3;
    int pause_ms = argc > 4 ? atoi(argv[4]) : 0;
    struct timespec pause = {pause_ms / 1000, (long)(pause_ms % 1000) * 1000000L};
    uint32_t name = gt_shim_intern("BlockBackward");
    for (int step = 0; step < steps; step++) {
        uint64_t first = g_seq;
        for (int i = 0; i < BLOCKS; i++)
            block_forward(i);
        gt_shim_bwd_pass_begin();
        for (int i = BLOCKS - 1; i >= 0; i--)
            block_backward(i, first, name);
        gt_shim_bwd_pass_end();
        gt_shim_step((uint64_t)step + 1);
        if (pause_ms > 0)
            nanosleep(&pause, NULL);
    }
    fclose(g_structure);
    return 0;
}
