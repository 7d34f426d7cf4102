/*
 * torch_layers: a libtorch C++ training program without Python, for
 * tests/e2e/t_torch_layers.sh. Four MLP blocks (Linear -> ReLU -> Linear,
 * written with ATen ops on leaf tensors that require grad), loss = mean of
 * the squared output, plain SGD, a few steps.
 *
 * Usage: torch_layers MODE STRUCTURE_FILE [STEPS]
 *   MODE nvtx: each block's forward is an NVTX range "blocks.<i>" with
 *        nested ranges "fc1" and "fc2" (so the layers are
 *        blocks.<i>.fc1 and .fc2 under GRADTRACE_LAYERS=nvtx), and the
 *        backward pass is an NVTX range "backward";
 *   MODE capi: the same structure through the gradtrace C API (the
 *        header-only shim), with full paths;
 *   MODE rf: RecordFunction user scopes "blocks.<i>" with nested "fc1"
 *        and "fc2" (what RECORD_USER_SCOPE(name) expands to: a
 *        RecordFunction of USER_SCOPE whose before(name) runs when a
 *        callback is active, held in an object here so that it closes
 *        where the layer call ends).
 * The program declares its own structure: for every layer call it writes
 * "<path> <first seq> <end seq>" to STRUCTURE_FILE, the autograd sequence
 * numbers handed out on this thread while the layer ran (first inclusive,
 * end exclusive, read with at::sequence_number::peek), so the test can
 * check each node's layer against what the program itself did. Nothing on
 * stdout. Exit 0, 2 on bad usage. NVTX: tests/progs/nvtx_client.h.
 */
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/SequenceNumber.h>
#include <ATen/core/grad_mode.h>
#include <ATen/record_function.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gradtrace/gradtrace_shim.h"
#include "tests/progs/nvtx_client.h"

enum class Mode { nvtx, capi, rf };

struct Linear {
    at::Tensor w, b;
};

struct Block {
    Linear fc1, fc2;
};

static Mode g_mode;
static FILE *g_structure;

/* A layer call: opened by the mode's mechanism, its sequence numbers
 * written when it closes. */
class LayerCall {
public:
    LayerCall(const std::string &full, const char *name)
        : full_(full), first_(at::sequence_number::peek())
    {
        switch (g_mode) {
        case Mode::nvtx:
            nvtxRangePushA(name);
            break;
        case Mode::capi:
            gt_shim_module_begin(gt_shim_intern(full.c_str()), 0);
            break;
        case Mode::rf:
            rf_.emplace(at::RecordScope::USER_SCOPE);
            if (rf_->isActive())
                rf_->before(name);
            break;
        }
    }

    ~LayerCall()
    {
        uint64_t end = at::sequence_number::peek();
        switch (g_mode) {
        case Mode::nvtx:
            nvtxRangePop();
            break;
        case Mode::capi:
            gt_shim_module_end();
            break;
        case Mode::rf:
            rf_.reset();
            break;
        }
        fprintf(g_structure, "%s %llu %llu\n", full_.c_str(),
                (unsigned long long)first_, (unsigned long long)end);
    }

private:
    std::string full_;
    uint64_t first_;
    c10::optional<at::RecordFunction> rf_;
};

static Linear make_linear(int64_t in, int64_t out)
{
    Linear l;
    l.w = (at::randn({in, out}) / std::sqrt((double)in)).set_requires_grad(true);
    l.b = at::zeros({out}).set_requires_grad(true);
    return l;
}

static at::Tensor linear(const Linear &l, const at::Tensor &x)
{
    return at::addmm(l.b, x, l.w);
}

static at::Tensor block_forward(const Block &b, int i, const at::Tensor &x)
{
    std::string path = "blocks." + std::to_string(i);
    LayerCall call(path, path.c_str());
    at::Tensor h;
    {
        LayerCall fc1(path + ".fc1", "fc1");
        h = at::relu(linear(b.fc1, x));
    }
    LayerCall fc2(path + ".fc2", "fc2");
    return linear(b.fc2, h) + x;
}

static void sgd(std::vector<Block> &blocks, double lr)
{
    at::NoGradGuard no_grad;
    for (auto &b : blocks)
        for (Linear *l : {&b.fc1, &b.fc2})
            for (at::Tensor *p : {&l->w, &l->b}) {
                p->sub_(p->grad() * lr);
                p->mutable_grad().zero_();
            }
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: torch_layers nvtx|capi|rf STRUCTURE_FILE [STEPS]\n");
        return 2;
    }
    if (!strcmp(argv[1], "nvtx"))
        g_mode = Mode::nvtx;
    else if (!strcmp(argv[1], "capi"))
        g_mode = Mode::capi;
    else if (!strcmp(argv[1], "rf"))
        g_mode = Mode::rf;
    else {
        fprintf(stderr, "torch_layers: unknown mode %s\n", argv[1]);
        return 2;
    }
    g_structure = fopen(argv[2], "w");
    if (!g_structure) {
        perror(argv[2]);
        return 1;
    }
    int steps = argc > 3 ? atoi(argv[3]) : 3;
    at::manual_seed(7);
    at::set_num_threads(1);
    const int64_t D = 16, H = 32, N = 8;
    std::vector<Block> blocks;
    for (int i = 0; i < 4; i++)
        blocks.push_back({make_linear(D, H), make_linear(H, D)});
    at::Tensor x = at::randn({N, D});
    double first = 0, last = 0;
    for (int step = 0; step < steps; step++) {
        at::Tensor y = x;
        for (int i = 0; i < 4; i++)
            y = block_forward(blocks[i], i, y);
        at::Tensor loss = (y * y).mean();
        if (g_mode == Mode::nvtx)
            nvtxRangePushA("backward");
        loss.backward();
        if (g_mode == Mode::nvtx)
            nvtxRangePop();
        sgd(blocks, 0.05);
        gt_shim_step((uint64_t)step + 1);
        (step == 0 ? first : last) = loss.item<double>();
    }
    fclose(g_structure);
    fprintf(stderr, "torch_layers: loss %.5f -> %.5f\n", first, last);
    return 0;
}
