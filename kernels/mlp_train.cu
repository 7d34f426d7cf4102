/*
 * mlp_train: a CUDA C training workload for gradtrace's GPU paths.
 *
 * Model: a stack of B blocks, each Linear(D->H) -> GELU -> Linear(H->D),
 * trained with plain SGD on a fixed random batch, loss = 0.5 * mean over
 * the batch of |y|^2 (so dL/dy = y / N). Every kernel is hand-written:
 * one shared-memory tiled GEMM (16x16 tiles) in three transpose variants,
 * GELU forward/backward, bias gradient reduction and the SGD update. The
 * kernels are extern "C" so CUPTI reports their plain names.
 *
 * Annotations, so a profiler can attribute every kernel:
 *   - NVTX ranges: "iter <i>" > "forward" | "backward" | "optimizer" >
 *     "block.<k>" (per block and per phase);
 *   - the gradtrace C API through the header-only shim (no-ops without the
 *     agent): each block's forward is a module scope "blocks.<k>" of class
 *     "MLPBlock" that creates one autograd-style node (seq = i * B + k),
 *     and each block's backward is that node's execution
 *     ("MLPBlockBackward"), which is how the agent tags kernels with layer
 *     and phase through CUPTI external correlation.
 *
 * --devices N: pipeline parallel. The blocks are split into N contiguous
 * stages, stage s on device s; activations go forward and gradients
 * backward between stages with peer copies (staged through the host when
 * peer access is unavailable). Chosen over data parallel because it needs
 * no collective library, keeps the arithmetic (and so the results)
 * identical for any N, and makes cross-device causality visible: a stage's
 * first kernel must start after the previous stage's last kernel ended,
 * which tests the clock alignment of the devices.
 *
 * --check runs a small size and compares loss, output and gradients with a
 * double-precision host reference (exit 1 on mismatch). Results are
 * deterministic: each output element is summed in a fixed order.
 *
 * Usage: mlp_train [--blocks B] [--dim D] [--hidden H] [--batch N]
 *                  [--iters I] [--devices N] [--lr X] [--check]
 * Prints one summary line per run on stdout; exit 0 ok, 1 check failed or
 * CUDA error, 2 usage.
 */
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include "gradtrace/gradtrace_shim.h"

#define TILE 16

#define CK(x)                                                                 \
    do {                                                                      \
        cudaError_t e_ = (x);                                                 \
        if (e_ != cudaSuccess) {                                              \
            fprintf(stderr, "mlp_train: %s failed at %s:%d: %s\n", #x,        \
                    __FILE__, __LINE__, cudaGetErrorString(e_));              \
            exit(1);                                                          \
        }                                                                     \
    } while (0)

/* ------------------------------------------------------------ kernels */

/*
 * C[M,N] = op(A)[M,K] * op(B)[K,N] (+ bias[N] when bias != NULL), row-major.
 * TA: A is stored [K,M]; TB: B is stored [N,K]. accumulate adds into C.
 */
template <bool TA, bool TB>
__device__ void gemm_tile(const float *A, const float *B, const float *bias,
                          float *C, int M, int N, int K, int accumulate)
{
    __shared__ float as[TILE][TILE];
    __shared__ float bs[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        int ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
        as[threadIdx.y][threadIdx.x] =
            (row < M && ka < K) ? (TA ? A[(size_t)ka * M + row] : A[(size_t)row * K + ka]) : 0.0f;
        bs[threadIdx.y][threadIdx.x] =
            (kb < K && col < N) ? (TB ? B[(size_t)col * K + kb] : B[(size_t)kb * N + col]) : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; k++)
            acc += as[threadIdx.y][k] * bs[k][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N) {
        if (bias)
            acc += bias[col];
        float *c = &C[(size_t)row * N + col];
        *c = accumulate ? *c + acc : acc;
    }
}

extern "C" __global__ void gemm_nn(const float *A, const float *B, const float *bias,
                                   float *C, int M, int N, int K, int acc)
{
    gemm_tile<false, false>(A, B, bias, C, M, N, K, acc);
}

extern "C" __global__ void gemm_nt(const float *A, const float *B, const float *bias,
                                   float *C, int M, int N, int K, int acc)
{
    gemm_tile<false, true>(A, B, bias, C, M, N, K, acc);
}

extern "C" __global__ void gemm_tn(const float *A, const float *B, const float *bias,
                                   float *C, int M, int N, int K, int acc)
{
    gemm_tile<true, false>(A, B, bias, C, M, N, K, acc);
}

__device__ __host__ inline float gelu_f(float x)
{
    return 0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x)));
}

__device__ __host__ inline float gelu_grad_f(float x)
{
    float u = 0.7978845608f * (x + 0.044715f * x * x * x);
    float t = tanhf(u);
    float du = 0.7978845608f * (1.0f + 3.0f * 0.044715f * x * x);
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du;
}

extern "C" __global__ void gelu_fwd(const float *a, float *h, size_t n)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n)
        h[i] = gelu_f(a[i]);
}

extern "C" __global__ void gelu_bwd(const float *a, const float *dh, float *da, size_t n)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n)
        da[i] = dh[i] * gelu_grad_f(a[i]);
}

/* db[j] = sum_i dy[i, j], summed in row order (deterministic). */
extern "C" __global__ void bias_grad(const float *dy, float *db, int rows, int cols)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= cols)
        return;
    float s = 0.0f;
    for (int i = 0; i < rows; i++)
        s += dy[(size_t)i * cols + j];
    db[j] = s;
}

/* dy = y / N: gradient of 0.5 * mean_i |y_i|^2. */
extern "C" __global__ void loss_grad(const float *y, float *dy, size_t n, float inv_batch)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n)
        dy[i] = y[i] * inv_batch;
}

extern "C" __global__ void sgd_update(float *w, const float *g, size_t n, float lr)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n)
        w[i] -= lr * g[i];
}

/* ------------------------------------------------------------ model */

struct Block {
    int dev;
    float *w1, *b1, *w2, *b2;        /* [D,H], [H], [H,D], [D] */
    float *gw1, *gb1, *gw2, *gb2;
    float *x, *a, *h, *y;            /* input [N,D], pre-act [N,H], act, out */
    float *dh, *da, *dx;             /* grads [N,H], [N,H], [N,D] */
    uint32_t path_id;
};

struct Config {
    int blocks = 4, dim = 512, hidden = 1024, batch = 256, iters = 20, devices = 1;
    float lr = 1e-3f;
    bool check = false;
};

static uint64_t g_rng = 0x243f6a8885a308d3ull;

static float urand(void)
{
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((g_rng >> 40) & 0xffffff) / 16777216.0f - 0.5f;
}

static std::vector<float> rand_vec(size_t n, float scale)
{
    std::vector<float> v(n);
    for (auto &x : v)
        x = urand() * scale;
    return v;
}

static float *dev_alloc(size_t n)
{
    float *p = nullptr;
    CK(cudaMalloc(&p, n * sizeof(float)));
    CK(cudaMemset(p, 0, n * sizeof(float)));
    return p;
}

static float *dev_from(const std::vector<float> &v)
{
    float *p = dev_alloc(v.size());
    CK(cudaMemcpy(p, v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice));
    return p;
}

static dim3 gemm_grid(int M, int N)
{
    return dim3((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
}

static unsigned blocks_for(size_t n)
{
    return (unsigned)((n + 255) / 256);
}

/* Copies n floats between devices (peer, or through the host). */
static void copy_between(float *dst, int ddev, const float *src, int sdev, size_t n)
{
    if (ddev == sdev) {
        CK(cudaSetDevice(ddev));
        CK(cudaMemcpy(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice));
        return;
    }
    int can = 0;
    CK(cudaDeviceCanAccessPeer(&can, ddev, sdev));
    if (can) {
        CK(cudaMemcpyPeer(dst, ddev, src, sdev, n * sizeof(float)));
        return;
    }
    std::vector<float> tmp(n);
    CK(cudaSetDevice(sdev));
    CK(cudaMemcpy(tmp.data(), src, n * sizeof(float), cudaMemcpyDeviceToHost));
    CK(cudaSetDevice(ddev));
    CK(cudaMemcpy(dst, tmp.data(), n * sizeof(float), cudaMemcpyHostToDevice));
}

static void block_forward(Block &b, const Config &c, uint64_t seq)
{
    int N = c.batch, D = c.dim, H = c.hidden;
    CK(cudaSetDevice(b.dev));
    gemm_nn<<<gemm_grid(N, H), dim3(TILE, TILE)>>>(b.x, b.w1, b.b1, b.a, N, H, D, 0);
    gelu_fwd<<<blocks_for((size_t)N * H), 256>>>(b.a, b.h, (size_t)N * H);
    gemm_nn<<<gemm_grid(N, D), dim3(TILE, TILE)>>>(b.h, b.w2, b.b2, b.y, N, D, H, 0);
    gt_shim_node_created(seq, 1);
    CK(cudaGetLastError());
}

/* dy: gradient w.r.t. this block's output, on this block's device. */
static void block_backward(Block &b, const Config &c, const float *dy)
{
    int N = c.batch, D = c.dim, H = c.hidden;
    CK(cudaSetDevice(b.dev));
    /* dW2 = h^T dy, db2 = colsum(dy), dh = dy W2^T */
    gemm_tn<<<gemm_grid(H, D), dim3(TILE, TILE)>>>(b.h, dy, nullptr, b.gw2, H, D, N, 0);
    bias_grad<<<blocks_for(D), 256>>>(dy, b.gb2, N, D);
    gemm_nt<<<gemm_grid(N, H), dim3(TILE, TILE)>>>(dy, b.w2, nullptr, b.dh, N, H, D, 0);
    gelu_bwd<<<blocks_for((size_t)N * H), 256>>>(b.a, b.dh, b.da, (size_t)N * H);
    /* dW1 = x^T da, db1 = colsum(da), dx = da W1^T */
    gemm_tn<<<gemm_grid(D, H), dim3(TILE, TILE)>>>(b.x, b.da, nullptr, b.gw1, D, H, N, 0);
    bias_grad<<<blocks_for(H), 256>>>(b.da, b.gb1, N, H);
    gemm_nt<<<gemm_grid(N, D), dim3(TILE, TILE)>>>(b.da, b.w1, nullptr, b.dx, N, D, H, 0);
    CK(cudaGetLastError());
}

static void block_update(Block &b, const Config &c)
{
    size_t DH = (size_t)c.dim * c.hidden;
    CK(cudaSetDevice(b.dev));
    sgd_update<<<blocks_for(DH), 256>>>(b.w1, b.gw1, DH, c.lr);
    sgd_update<<<blocks_for(c.hidden), 256>>>(b.b1, b.gb1, c.hidden, c.lr);
    sgd_update<<<blocks_for(DH), 256>>>(b.w2, b.gw2, DH, c.lr);
    sgd_update<<<blocks_for(c.dim), 256>>>(b.b2, b.gb2, c.dim, c.lr);
    CK(cudaGetLastError());
}

/* ------------------------------------------------------------ host reference */

struct HostBlock {
    std::vector<float> w1, b1, w2, b2;
};

/* Forward and backward of the whole stack in double; returns the loss and
 * fills y (output) and the gradients of block 0's W1 and the last b2. */
static double host_reference(const std::vector<HostBlock> &hb, const std::vector<float> &x0,
                             const Config &c, std::vector<double> &y_out,
                             std::vector<double> &gw1_0, std::vector<double> &gb2_last)
{
    int N = c.batch, D = c.dim, H = c.hidden, B = c.blocks;
    std::vector<std::vector<double>> xs(B + 1), as(B), hs(B);
    xs[0].assign(x0.begin(), x0.end());
    for (int k = 0; k < B; k++) {
        as[k].assign((size_t)N * H, 0);
        hs[k].assign((size_t)N * H, 0);
        xs[k + 1].assign((size_t)N * D, 0);
        for (int i = 0; i < N; i++)
            for (int j = 0; j < H; j++) {
                double s = hb[k].b1[j];
                for (int d = 0; d < D; d++)
                    s += xs[k][(size_t)i * D + d] * hb[k].w1[(size_t)d * H + j];
                as[k][(size_t)i * H + j] = s;
                hs[k][(size_t)i * H + j] = gelu_f((float)s);
            }
        for (int i = 0; i < N; i++)
            for (int j = 0; j < D; j++) {
                double s = hb[k].b2[j];
                for (int h = 0; h < H; h++)
                    s += hs[k][(size_t)i * H + h] * hb[k].w2[(size_t)h * D + j];
                xs[k + 1][(size_t)i * D + j] = s;
            }
    }
    y_out = xs[B];
    double loss = 0;
    std::vector<double> dy((size_t)N * D);
    for (size_t i = 0; i < dy.size(); i++) {
        loss += 0.5 * y_out[i] * y_out[i] / N;
        dy[i] = y_out[i] / N;
    }
    gb2_last.assign(D, 0);
    for (int i = 0; i < N; i++)
        for (int j = 0; j < D; j++)
            gb2_last[j] += dy[(size_t)i * D + j];
    for (int k = B - 1; k >= 0; k--) {
        std::vector<double> dh((size_t)N * H, 0), da((size_t)N * H), dx((size_t)N * D, 0);
        for (int i = 0; i < N; i++)
            for (int h = 0; h < H; h++) {
                double s = 0;
                for (int j = 0; j < D; j++)
                    s += dy[(size_t)i * D + j] * hb[k].w2[(size_t)h * D + j];
                dh[(size_t)i * H + h] = s;
                da[(size_t)i * H + h] = s * gelu_grad_f((float)as[k][(size_t)i * H + h]);
            }
        if (k == 0) {
            gw1_0.assign((size_t)D * H, 0);
            for (int d = 0; d < D; d++)
                for (int h = 0; h < H; h++) {
                    double s = 0;
                    for (int i = 0; i < N; i++)
                        s += xs[0][(size_t)i * D + d] * da[(size_t)i * H + h];
                    gw1_0[(size_t)d * H + h] = s;
                }
        }
        for (int i = 0; i < N; i++)
            for (int d = 0; d < D; d++) {
                double s = 0;
                for (int h = 0; h < H; h++)
                    s += da[(size_t)i * H + h] * hb[k].w1[(size_t)d * H + h];
                dx[(size_t)i * D + d] = s;
            }
        dy = dx;
    }
    return loss;
}

static int compare(const char *what, const float *got, const double *want, size_t n)
{
    double max_err = 0, max_ref = 1e-6;
    for (size_t i = 0; i < n; i++) {
        max_err = fmax(max_err, fabs(got[i] - want[i]));
        max_ref = fmax(max_ref, fabs(want[i]));
    }
    double rel = max_err / max_ref;
    fprintf(stderr, "mlp_train: check %s: max error %.3g (relative %.3g)\n", what, max_err, rel);
    return rel < 1e-3 ? 0 : 1;
}

/* ------------------------------------------------------------ main */

static int parse(int argc, char **argv, Config &c)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : nullptr;
        auto num = [&](int &out) {
            if (!v || atoi(v) <= 0)
                return false;
            out = atoi(v);
            i++;
            return true;
        };
        bool ok = true;
        if (!strcmp(a, "--blocks")) ok = num(c.blocks);
        else if (!strcmp(a, "--dim")) ok = num(c.dim);
        else if (!strcmp(a, "--hidden")) ok = num(c.hidden);
        else if (!strcmp(a, "--batch")) ok = num(c.batch);
        else if (!strcmp(a, "--iters")) ok = num(c.iters);
        else if (!strcmp(a, "--devices")) ok = num(c.devices);
        else if (!strcmp(a, "--lr") && v) { c.lr = (float)atof(v); i++; }
        else if (!strcmp(a, "--check")) c.check = true;
        else ok = false;
        if (!ok) {
            fprintf(stderr, "usage: mlp_train [--blocks B] [--dim D] [--hidden H] [--batch N] "
                            "[--iters I] [--devices N] [--lr X] [--check]\n");
            return 2;
        }
    }
    if (c.check) {
        c.dim = 48, c.hidden = 80, c.batch = 24, c.iters = 1;
        if (c.blocks > 3)
            c.blocks = 3;
    }
    if (c.devices > c.blocks) {
        fprintf(stderr, "mlp_train: --devices %d needs at least as many blocks\n", c.devices);
        return 2;
    }
    return 0;
}

int main(int argc, char **argv)
{
    Config c;
    int r = parse(argc, argv, c);
    if (r)
        return r;
    int ndev = 0;
    CK(cudaGetDeviceCount(&ndev));
    if (c.devices > ndev) {
        fprintf(stderr, "mlp_train: --devices %d but %d visible\n", c.devices, ndev);
        return 2;
    }
    for (int d = 0; d < c.devices; d++)
        for (int e = 0; e < c.devices; e++) {
            int can = 0;
            if (d != e && cudaDeviceCanAccessPeer(&can, d, e) == cudaSuccess && can) {
                CK(cudaSetDevice(d));
                cudaError_t pe = cudaDeviceEnablePeerAccess(e, 0);
                if (pe != cudaSuccess && pe != cudaErrorPeerAccessAlreadyEnabled)
                    CK(pe);
                (void)cudaGetLastError();
            }
        }

    int N = c.batch, D = c.dim, H = c.hidden, B = c.blocks;
    std::vector<Block> blocks(B);
    std::vector<HostBlock> host(B);
    std::vector<float> x0 = rand_vec((size_t)N * D, 2.0f);
    uint32_t cls = gt_shim_intern("MLPBlock");
    uint32_t bwd_name = gt_shim_intern("MLPBlockBackward");
    for (int k = 0; k < B; k++) {
        Block &b = blocks[k];
        b.dev = k * c.devices / B;
        CK(cudaSetDevice(b.dev));
        host[k].w1 = rand_vec((size_t)D * H, 2.0f / sqrtf((float)D));
        host[k].b1 = rand_vec(H, 0.1f);
        host[k].w2 = rand_vec((size_t)H * D, 2.0f / sqrtf((float)H));
        host[k].b2 = rand_vec(D, 0.1f);
        b.w1 = dev_from(host[k].w1);
        b.b1 = dev_from(host[k].b1);
        b.w2 = dev_from(host[k].w2);
        b.b2 = dev_from(host[k].b2);
        b.gw1 = dev_alloc((size_t)D * H);
        b.gb1 = dev_alloc(H);
        b.gw2 = dev_alloc((size_t)H * D);
        b.gb2 = dev_alloc(D);
        b.x = dev_alloc((size_t)N * D);
        b.a = dev_alloc((size_t)N * H);
        b.h = dev_alloc((size_t)N * H);
        b.y = dev_alloc((size_t)N * D);
        b.dh = dev_alloc((size_t)N * H);
        b.da = dev_alloc((size_t)N * H);
        b.dx = dev_alloc((size_t)N * D);
        char path[32];
        snprintf(path, sizeof(path), "blocks.%d", k);
        b.path_id = gt_shim_intern(path);
    }
    CK(cudaSetDevice(blocks[0].dev));
    CK(cudaMemcpy(blocks[0].x, x0.data(), x0.size() * sizeof(float), cudaMemcpyHostToDevice));
    std::vector<float *> dys(B);
    for (int k = 0; k < B; k++) {
        CK(cudaSetDevice(blocks[k].dev));
        dys[k] = dev_alloc((size_t)N * D);
    }

    double first_loss = 0, last_loss = 0;
    cudaEvent_t t0, t1;
    CK(cudaSetDevice(0));
    CK(cudaEventCreate(&t0));
    CK(cudaEventCreate(&t1));
    CK(cudaEventRecord(t0));
    std::vector<float> y((size_t)N * D);
    char label[64];
    for (int it = 0; it < c.iters; it++) {
        snprintf(label, sizeof(label), "iter %d", it);
        nvtxRangePushA(label);
        gt_shim_step((uint64_t)it);

        nvtxRangePushA("forward");
        for (int k = 0; k < B; k++) {
            Block &b = blocks[k];
            if (k > 0)
                copy_between(b.x, b.dev, blocks[k - 1].y, blocks[k - 1].dev, (size_t)N * D);
            snprintf(label, sizeof(label), "block.%d", k);
            nvtxRangePushA(label);
            gt_shim_module_begin(b.path_id, cls);
            block_forward(b, c, (uint64_t)it * B + k);
            gt_shim_module_end();
            nvtxRangePop();
        }
        nvtxRangePop();

        Block &last = blocks[B - 1];
        CK(cudaSetDevice(last.dev));
        CK(cudaMemcpy(y.data(), last.y, y.size() * sizeof(float), cudaMemcpyDeviceToHost));
        double loss = 0;
        for (float v : y)
            loss += 0.5 * (double)v * v / N;
        if (it == 0)
            first_loss = loss;
        last_loss = loss;

        nvtxRangePushA("backward");
        gt_shim_bwd_pass_begin();
        loss_grad<<<blocks_for((size_t)N * D), 256>>>(last.y, dys[B - 1], (size_t)N * D, 1.0f / N);
        CK(cudaGetLastError());
        for (int k = B - 1; k >= 0; k--) {
            Block &b = blocks[k];
            if (k < B - 1)
                copy_between(dys[k], b.dev, blocks[k + 1].dx, blocks[k + 1].dev, (size_t)N * D);
            snprintf(label, sizeof(label), "block.%d", k);
            nvtxRangePushA(label);
            uint64_t seq = (uint64_t)it * B + k;
            gt_shim_bwd_node_begin(bwd_name, seq, 1);
            block_backward(b, c, dys[k]);
            gt_shim_bwd_node_end(seq, 1);
            nvtxRangePop();
        }
        gt_shim_bwd_pass_end();
        nvtxRangePop();

        if (c.check && it == 0) {
            /* Gradients of the initial weights, before any update. */
            std::vector<double> y_ref, gw1_ref, gb2_ref;
            double loss_ref = host_reference(host, x0, c, y_ref, gw1_ref, gb2_ref);
            std::vector<float> gw1((size_t)D * H), gb2(D);
            CK(cudaSetDevice(blocks[0].dev));
            CK(cudaMemcpy(gw1.data(), blocks[0].gw1, gw1.size() * sizeof(float), cudaMemcpyDeviceToHost));
            CK(cudaSetDevice(last.dev));
            CK(cudaMemcpy(gb2.data(), last.gb2, gb2.size() * sizeof(float), cudaMemcpyDeviceToHost));
            float lossf = (float)loss;
            int bad = compare("loss", &lossf, &loss_ref, 1) +
                      compare("output", y.data(), y_ref.data(), y.size()) +
                      compare("grad blocks.0.w1", gw1.data(), gw1_ref.data(), gw1.size()) +
                      compare("grad last b2", gb2.data(), gb2_ref.data(), gb2.size());
            if (bad) {
                fprintf(stderr, "mlp_train: check FAILED\n");
                return 1;
            }
        }

        nvtxRangePushA("optimizer");
        for (int k = 0; k < B; k++) {
            snprintf(label, sizeof(label), "block.%d", k);
            nvtxRangePushA(label);
            block_update(blocks[k], c);
            nvtxRangePop();
        }
        nvtxRangePop();
        for (int d = 0; d < c.devices; d++) {
            CK(cudaSetDevice(d));
            CK(cudaDeviceSynchronize());
        }
        nvtxRangePop();
    }
    CK(cudaSetDevice(0));
    CK(cudaEventRecord(t1));
    CK(cudaEventSynchronize(t1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, t0, t1));
    printf("mlp_train blocks=%d dim=%d hidden=%d batch=%d iters=%d devices=%d "
           "loss_first=%.6f loss_last=%.6f ms_per_iter=%.3f%s\n",
           B, D, H, N, c.iters, c.devices, first_loss, last_loss, ms / c.iters,
           c.check ? " check=ok" : "");
    for (auto &b : blocks) {
        CK(cudaSetDevice(b.dev));
        float *ps[] = {b.w1, b.b1, b.w2, b.b2, b.gw1, b.gb1, b.gw2, b.gb2,
                       b.x, b.a, b.h, b.y, b.dh, b.da, b.dx};
        for (float *p : ps)
            CK(cudaFree(p));
    }
    for (int k = 0; k < B; k++) {
        CK(cudaSetDevice(blocks[k].dev));
        CK(cudaFree(dys[k]));
    }
    return 0;
}
