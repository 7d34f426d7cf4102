/*
 * Synthetic gradtrace streams for the converter's tests and benchmark
 * (included by tests/progs/gen_gtr.c and tests/bench/bench_convert.c).
 *
 * The stream imitates a training job the way the agent records it: a
 * model "Net" with L blocks "layers.i" (Block), each with children fc1
 * (Linear), act (GELU), fc2 (Linear); per iteration a forward on the main
 * thread creating one autograd node per child, a backward pass whose nodes
 * run in reverse order on an engine worker thread (or the main thread),
 * optionally CUDA launches with kernels on device 0 stream 7, external
 * correlations naming the layer and phase, and a step mark. Records of a
 * thread are preceded by GT_R_THREAD in every chunk, and GPU records come
 * late, in a batch after the iteration (as CUPTI delivers them), with API
 * records before or after their kernels on alternate iterations, so both
 * orders of the launch->kernel pairing are exercised.
 *
 * gen_run also returns the counts the converted trace must show, which is
 * what the e2e test checks the trace against.
 */
#ifndef GRADTRACE_TESTS_GEN_CORE_H
#define GRADTRACE_TESTS_GEN_CORE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "common/codec.h"

struct gen_opts {
    uint64_t iterations;
    uint32_t layers;
    int worker;    /* backward on a separate engine thread */
    int gpu;       /* CUDA API calls, kernels, external correlation */
    int steps;     /* GT_R_STEP after each iteration */
    int ops;       /* an aten operator around each forward launch/creation */
    uint64_t window; /* 1 + the iteration whose backward is a capture
                      * window (WINDOW_BEGIN/END around it, DONE after
                      * its GPU records); 0 none */
    uint32_t scale; /* every duration times this (0: 1); 1000 makes every
                     * time a whole microsecond, as HTA rounds them */
    int level;     /* zstd level, <= 0 raw chunks */
    uint32_t chunk_kb;
};

struct gen_counts {
    uint64_t iterations, module_scopes, nodes, kernels, api_calls, ops;
    uint64_t layer_spans_per_pass, chunks, records, bytes, raw_bytes;
};

typedef int (*gen_sink)(void *ud, const void *data, size_t len);

struct gen {
    const struct gen_opts *o;
    struct gt__recbuf b;   /* current chunk */
    struct gt__recbuf gpu; /* GPU records of the current iteration */
    ZSTD_CCtx *cctx;
    uint8_t *out;
    size_t out_cap;
    uint64_t seq, now, first_ns;
    uint32_t cur_tid;
    uint32_t corr;
    uint64_t iter;
    uint64_t op_id;
    gen_sink sink;
    void *ud;
    struct gen_counts *n;
    int err;
};

enum {
    S_NET = 1, S_NETCLS, S_BLOCK, S_LINEAR, S_GELU, S_ADDMM, S_GELUB,
    S_LAUNCH, S_GEMM, S_GELUK, S_MAIN, S_WORKER, S_HOST, S_CMD, S_WARN,
    S_OP_ADDMM, S_OP_GELU, S_WSPEC, S_WLAYER,
    S_FIRST_PATH /* then 4 per layer: layers.i, .fc1, .act, .fc2 */
};

#define GEN_PID 4242u
#define GEN_WORKER 4243u
#define GEN_T0 1000000000000ull /* 1000 s of CLOCK_MONOTONIC */

static uint32_t gen_path(uint32_t layer, uint32_t child)
{
    return S_FIRST_PATH + 4 * layer + child; /* child 0: the block */
}

static int gen_flush(struct gen *g)
{
    if (g->err || g->b.len == 0)
        return g->err;
    size_t need = gt__chunk_bound(g->b.len);
    if (need > g->out_cap) {
        free(g->out);
        g->out = malloc(need);
        g->out_cap = g->out ? need : 0;
        if (!g->out)
            return g->err = -1;
    }
    ssize_t k = gt__chunk_encode(g->cctx, g->o->level, g->b.data, g->b.len,
                                g->b.count, g->seq++, g->first_ns, g->out,
                                g->out_cap);
    if (k < 0)
        return g->err = (int)k;
    g->n->chunks++;
    g->n->records += g->b.count;
    g->n->raw_bytes += g->b.len;
    g->n->bytes += (uint64_t)k;
    if (g->sink(g->ud, g->out, (size_t)k))
        return g->err = -1;
    gt__recbuf_reset(&g->b);
    g->first_ns = 0;
    return 0;
}

static void gen_rec(struct gen *g, const void *rec, size_t size)
{
    if (g->err)
        return;
    /* A new chunk names the current thread again before anything else. */
    if (g->b.len == 0 && g->cur_tid) {
        struct gt_r_thread t = {{GT_R_THREAD, sizeof(t)}, g->cur_tid};
        if (gt__recbuf_append(&g->b, &t, sizeof(t)))
            g->err = -1;
    }
    if (gt__recbuf_append(&g->b, rec, size))
        g->err = -1;
    if (g->b.len >= (size_t)g->o->chunk_kb * 1024)
        gen_flush(g);
}

static void gen_thread(struct gen *g, uint32_t tid)
{
    if (g->cur_tid == tid)
        return;
    struct gt_r_thread r = {{GT_R_THREAD, sizeof(r)}, tid};
    g->cur_tid = tid;
    if (g->b.len)
        gen_rec(g, &r, sizeof(r)); /* else gen_rec adds it with the next */
}

static uint64_t gen_scaled(const struct gen *g, uint64_t ns)
{
    return ns * (g->o->scale ? g->o->scale : 1);
}

static uint64_t gen_tick(struct gen *g, uint64_t ns)
{
    ns = gen_scaled(g, ns);
    g->now += ns;
    if (!g->first_ns)
        g->first_ns = g->now;
    return g->now;
}

static void gen_string(struct gen *g, uint32_t id, const char *s)
{
    if (gt__recbuf_string(&g->b, id, s, strlen(s)))
        g->err = -1;
}

static void gen_scope(struct gen *g, int begin, uint32_t path, uint32_t cls)
{
    if (begin) {
        struct gt_r_scope_begin r = {{GT_R_SCOPE_BEGIN, sizeof(r)},
                                     GT_SCOPE_MODULE, 0, path, cls,
                                     gen_tick(g, 700)};
        gen_rec(g, &r, sizeof(r));
        g->n->module_scopes++;
    } else {
        struct gt_r_scope_end r = {{GT_R_SCOPE_END, sizeof(r)},
                                   GT_SCOPE_MODULE, 0, path,
                                   gen_tick(g, 300)};
        gen_rec(g, &r, sizeof(r));
    }
}

/* An operator begins (op != 0) or ends on the current thread. */
static void gen_op(struct gen *g, uint32_t name, int begin)
{
    if (begin) {
        struct gt_r_op_begin r = {{GT_R_OP_BEGIN, sizeof(r)}, name, 0,
                                  gen_tick(g, 200), ++g->op_id, UINT64_MAX,
                                  1};
        gen_rec(g, &r, sizeof(r));
        g->n->ops++;
    } else {
        struct gt_r_op_end r = {{GT_R_OP_END, sizeof(r)}, name,
                                gen_tick(g, 100), g->op_id};
        gen_rec(g, &r, sizeof(r));
    }
}

/* A launch on thread tid now, its kernel later on the GPU (batched); op:
 * the id of the operator launching it, or 0. */
static void gen_launch(struct gen *g, uint32_t tid, uint32_t path, int bwd,
                       uint32_t kname, uint64_t op)
{
    uint32_t corr = ++g->corr;
    uint64_t s = gen_tick(g, 100), e = gen_tick(g, 2500);
    struct gt_r_ext_corr x = {{GT_R_EXT_CORR, sizeof(x)},
                              bwd ? GT_EXT_LAYER_BWD : GT_EXT_LAYER_FWD, 0,
                              corr, path};
    struct gt_r_cuda_api a = {{GT_R_CUDA_API, sizeof(a)}, tid, 211, corr,
                              S_LAUNCH, s, e};
    struct gt_r_gpu_kernel k = {{GT_R_GPU_KERNEL, sizeof(k)}, 0, 7, kname,
                                corr, e + gen_scaled(g, 3000),
                                e + gen_scaled(g, 3000 + 1800),
                                {64, 1, 1}, {256, 1, 1}, 4096, 32};
    if (gt__recbuf_append(&g->gpu, &x, sizeof(x)))
        g->err = -1;
    struct gt_r_ext_corr xo = {{GT_R_EXT_CORR, sizeof(xo)}, GT_EXT_OP, 0,
                               corr, op};
    if (op && gt__recbuf_append(&g->gpu, &xo, sizeof(xo)))
        g->err = -1;
    /* Alternate: API before kernel on even iterations, after on odd. */
    if (g->iter % 2 == 0) {
        if (gt__recbuf_append(&g->gpu, &a, sizeof(a)) ||
            gt__recbuf_append(&g->gpu, &k, sizeof(k)))
            g->err = -1;
    } else {
        if (gt__recbuf_append(&g->gpu, &k, sizeof(k)) ||
            gt__recbuf_append(&g->gpu, &a, sizeof(a)))
            g->err = -1;
    }
    g->n->kernels++;
    g->n->api_calls++;
}

static void gen_gpu_batch(struct gen *g)
{
    /* CUPTI records carry their own thread or device: no THREAD record
     * needed, but they must not inherit a stale one either. */
    struct gt__rec_iter it;
    uint16_t type, size;
    const uint8_t *rec;
    gt__rec_iter_init(&it, g->gpu.data, g->gpu.len);
    while (gt__rec_next(&it, &type, &size, &rec) == 1)
        gen_rec(g, rec, size);
    gt__recbuf_reset(&g->gpu);
}

/* WINDOW_BEGIN/END/DONE of window 1 in iteration it, now. */
static void gen_window(struct gen *g, uint16_t type, uint64_t it)
{
    struct gt_r_window w = {{type, sizeof(w)}, 1, S_WSPEC, S_WLAYER,
                            gen_tick(g, 10), it};
    gen_rec(g, &w, sizeof(w));
}

static void gen_iteration(struct gen *g, uint64_t it)
{
    const struct gen_opts *o = g->o;
    uint64_t seq0 = it * o->layers * 3;
    uint32_t bwd_tid = o->worker ? GEN_WORKER : GEN_PID;
    g->iter = it;
    gen_thread(g, GEN_PID);
    gen_scope(g, 1, S_NET, S_NETCLS);
    for (uint32_t l = 0; l < o->layers; l++) {
        gen_scope(g, 1, gen_path(l, 0), S_BLOCK);
        for (uint32_t ch = 1; ch <= 3; ch++) {
            gen_thread(g, GEN_PID);
            gen_scope(g, 1, gen_path(l, ch), ch == 2 ? S_GELU : S_LINEAR);
            uint32_t opn = ch == 2 ? S_OP_GELU : S_OP_ADDMM;
            if (o->ops)
                gen_op(g, opn, 1);
            if (o->gpu)
                gen_launch(g, GEN_PID, gen_path(l, ch), 0,
                           ch == 2 ? S_GELUK : S_GEMM, o->ops ? g->op_id : 0);
            gen_thread(g, GEN_PID);
            struct gt_r_node_created r = {{GT_R_NODE_CREATED, sizeof(r)},
                                          gen_path(l, ch), gen_tick(g, 900),
                                          seq0 + l * 3 + ch - 1, 1};
            gen_rec(g, &r, sizeof(r));
            if (o->ops)
                gen_op(g, opn, 0);
            gen_scope(g, 0, gen_path(l, ch), 0);
        }
        gen_scope(g, 0, gen_path(l, 0), 0);
    }
    gen_scope(g, 0, S_NET, 0);
    int win = o->window && o->window - 1 == it;
    if (win)
        gen_window(g, GT_R_WINDOW_BEGIN, it);
    struct gt_r_mark m = {{GT_R_BWD_PASS_BEGIN, sizeof(m)}, 0,
                          gen_tick(g, 5000), it};
    gen_rec(g, &m, sizeof(m));
    for (uint64_t i = (uint64_t)o->layers * 3; i-- > 0;) {
        uint32_t ch = (uint32_t)(i % 3) + 1;
        gen_thread(g, bwd_tid);
        struct gt_r_bwd_node_begin b = {{GT_R_BWD_NODE_BEGIN, sizeof(b)},
                                        ch == 2 ? S_GELUB : S_ADDMM,
                                        gen_tick(g, 400), seq0 + i, 1};
        gen_rec(g, &b, sizeof(b));
        if (o->gpu)
            gen_launch(g, bwd_tid, gen_path((uint32_t)(i / 3), ch), 1,
                       ch == 2 ? S_GELUK : S_GEMM, 0);
        gen_thread(g, bwd_tid);
        struct gt_r_bwd_node_end e = {{GT_R_BWD_NODE_END, sizeof(e)}, 0,
                                      gen_tick(g, 1500), seq0 + i, 1};
        gen_rec(g, &e, sizeof(e));
        g->n->nodes++;
    }
    gen_thread(g, GEN_PID);
    m.h.type = GT_R_BWD_PASS_END;
    m.ts = gen_tick(g, 800);
    gen_rec(g, &m, sizeof(m));
    if (win)
        gen_window(g, GT_R_WINDOW_END, it);
    if (o->steps) {
        m.h.type = GT_R_STEP;
        m.ts = gen_tick(g, 20000);
        m.value = it;
        gen_rec(g, &m, sizeof(m));
    }
    if (o->gpu)
        gen_gpu_batch(g);
    if (win)
        gen_window(g, GT_R_WINDOW_DONE, it);
    g->n->iterations++;
}

/* Writes the whole stream to sink. @return 0 or -1. */
static int gen_run(const struct gen_opts *o, gen_sink sink, void *ud,
                   struct gen_counts *n)
{
    struct gen g;
    char path[64];
    memset(&g, 0, sizeof(g));
    memset(n, 0, sizeof(*n));
    g.o = o;
    g.sink = sink;
    g.ud = ud;
    g.n = n;
    g.now = GEN_T0 + 5000000;
    g.cctx = ZSTD_createCCtx();
    if (!g.cctx)
        return -1;

    struct gt_hello h;
    memset(&h, 0, sizeof(h));
    h.pid = GEN_PID;
    h.ppid = 1;
    h.rank = 0;
    h.local_rank = 0;
    h.world_size = 1;
    h.flags = GT_HELLO_FILE | GT_HELLO_CAPTURE;
    h.start_mono_ns = GEN_T0;
    h.start_real_ns = 1700000000000000000ull;
    static const char cmd[] = "/usr/bin/python3\0train.py\0--epochs=1";
    uint8_t hb[GT_HELLO_MAX_SIZE];
    ssize_t hl = gt__hello_encode(&h, "genhost", cmd, sizeof(cmd) - 1, hb,
                                 sizeof(hb));
    if (hl < 0 || sink(ud, hb, (size_t)hl))
        goto out;
    n->bytes += (uint64_t)hl;

    static const char *const names[] = {
        NULL, "Net", "Net", "Block", "Linear", "GELU", "AddmmBackward0",
        "GeluBackward0", "cudaLaunchKernel", "gemm_kernel<float, 128>",
        "gelu_kernel", "MainThread", "pt_autograd_0", "genhost",
        "python3 train.py", "synthetic \"warning\"\n", "aten::addmm",
        "aten::gelu", "layer=layers.*,phase=backward", "layers.*"};
    for (uint32_t i = 1; i < S_FIRST_PATH; i++)
        gen_string(&g, i, names[i]);
    for (uint32_t l = 0; l < o->layers; l++) {
        static const char *const child[] = {"", ".fc1", ".act", ".fc2"};
        for (uint32_t ch = 0; ch < 4; ch++) {
            snprintf(path, sizeof(path), "layers.%u%s", l, child[ch]);
            gen_string(&g, gen_path(l, ch), path);
        }
    }
    struct gt_r_process_info pi = {{GT_R_PROCESS_INFO, sizeof(pi)}, GEN_PID,
                                   1, 0, 0, 1, S_HOST, S_CMD, GEN_T0,
                                   h.start_real_ns};
    gen_rec(&g, &pi, sizeof(pi));
    struct gt_r_thread_info ti = {{GT_R_THREAD_INFO, sizeof(ti)}, GEN_PID,
                                  S_MAIN};
    gen_rec(&g, &ti, sizeof(ti));
    if (o->worker) {
        ti.tid = GEN_WORKER;
        ti.name = S_WORKER;
        gen_rec(&g, &ti, sizeof(ti));
    }
    struct gt_r_clock_sync cs = {{GT_R_CLOCK_SYNC, sizeof(cs)}, -1,
                                 GEN_T0, h.start_real_ns, 0, 0};
    gen_rec(&g, &cs, sizeof(cs));
    if (o->gpu) {
        cs.device = 0;
        cs.device_ts = 123456789;
        cs.uncertainty_ns = 250;
        gen_rec(&g, &cs, sizeof(cs));
    }
    struct gt_r_warning w = {{GT_R_WARNING, sizeof(w)}, 7, S_WARN,
                             gen_tick(&g, 10)};
    gen_rec(&g, &w, sizeof(w));

    for (uint64_t it = 0; it < o->iterations && !g.err; it++)
        gen_iteration(&g, it);

    struct gt_r_lost lost = {{GT_R_LOST, sizeof(lost)}, GEN_PID,
                             GT_LOST_EVENTS, 7};
    gen_rec(&g, &lost, sizeof(lost));
    /* It ends as an agent that exits does: with its goodbye. */
    struct gt_r_goodbye bye = {{GT_R_GOODBYE, sizeof(bye)}, 0, gen_tick(&g, 10)};
    gen_rec(&g, &bye, sizeof(bye));
    gen_flush(&g);
    n->layer_spans_per_pass = 2 + 4ull * o->layers; /* Net, layers, ... */
out:
    gt__recbuf_free(&g.b);
    gt__recbuf_free(&g.gpu);
    ZSTD_freeCCtx(g.cctx);
    free(g.out);
    return g.err ? -1 : 0;
}

#endif /* GRADTRACE_TESTS_GEN_CORE_H */
