/*
 * Hints at the end of `gradtrace report` (report.h): short findings, each
 * naming its layer and the numbers that support it, drawn only from the
 * finished table. A hint needs evidence in the trace; the thresholds are
 * the rules below, stated again in schema/report.md:
 *
 *  - input: events or chunks were lost, chunks were corrupt or an input
 *    was truncated: every number is then a lower bound.
 *  - bwd-heavy: a layer (not a container) whose backward is at least
 *    BWD_RATIO times its forward and which takes at least SHARE_MIN of
 *    the step; reported for the deepest such layer only, since its
 *    ancestors include it (also across a container between them).
 *  - accumulate-grad: a layer's own AccumulateGrad nodes take more than
 *    half its own backward and at least ACCG_MIN of the step.
 *  - top-node: one node (named) takes at least TOP_SHARE of a layer's own
 *    backward, the layer has other nodes of its own, that backward is at
 *    least SHARE_MIN of the step, and the node is not the one the layer
 *    exists to run (AddmmBackward0 of a Linear, ConvolutionBackward0 of a
 *    Conv2d: table characteristic[]), nor AccumulateGrad (its own hint):
 *    those dominate by construction and say nothing to act on.
 *  - compiled: backward spans whose longest node is a compiled graph's
 *    (CompiledFunctionBackward, torch.compile): the graph's whole backward
 *    is one node on the compiled module, so the layers inside it show no
 *    backward of their own; the report says so rather than let their rows
 *    pass for cheap.
 *  - top-kernel: one GPU kernel (named) takes at least TOP_SHARE of a
 *    layer's own backward GPU time, among at least two kernel names, and
 *    that time is at least SHARE_MIN of all layers' GPU time.
 *  - rank: with several ranks, a layer (not a container) whose slowest
 *    rank takes at least RANK_RATIO times the ranks' mean, by at least
 *    SHARE_MIN of a rank's step; times are per-iteration medians (so one
 *    slow warm-up iteration is no imbalance) compared with the median
 *    iteration, or totals compared with the iterations' time over the
 *    number of ranks when a row has no per-iteration values; reported for
 *    the deepest such layer only.
 *  - recompute: a checkpointed layer whose recompute costs more per call
 *    than RC_RATIO times the forward call it repeats, and at least
 *    RC_MIN of the step.
 *  - comm: a layer whose own backward nodes spend at least COMM_MIN of
 *    the step in communication (DDP's reducer in its parameters'
 *    AccumulateGrad, a torch.distributed call such as FSDP2's
 *    reduce-scatter); and, unnamed, communication in a backward pass but
 *    in no layer's node (DDP waiting for its all-reduces when the pass
 *    ends) of at least COMM_MIN of the step; and a layer whose forward
 *    calls spend at least COMM_MIN of the step communicating outside its
 *    children (FSDP's all-gather in its pre-forward hook).
 *
 * "The step" is the iterations' time; without iteration spans it is the
 * total forward + recompute + backward time. Times in the texts are per
 * iteration (ms/it) when there are iterations: the rows' sums over the
 * iterations counted, which leave out the warm-up by default.
 */
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "daemon/cli/report.h"

#define BWD_RATIO 3.0
#define SHARE_MIN 0.05
#define ACCG_MIN 0.02
#define RC_RATIO 1.1
#define RC_MIN 0.01
#define TOP_SHARE 0.6
#define RANK_RATIO 1.3
#define COMM_MIN 0.02

static double step_base(const struct gt__agg *r)
{
    struct gt__rep_totals t = gt__report_totals(r);
    if (r->steps && r->step_us > 0)
        return r->step_us;
    return t.fwd_us + t.rc_us + t.bwd_us + t.comm_us + t.fwd_comm_us;
}

/* The hints' unit: ms per iteration, or ms in all without iterations. */
struct unit {
    double k;            /* us per shown unit: 1e3 x iterations */
    const char *name;
};

static struct unit unit_of(const struct gt__agg *r)
{
    if (r->steps && r->step_us > 0)
        return (struct unit){1e3 * (double)r->steps, "ms/it"};
    return (struct unit){1e3, "ms"};
}

/* Node name without its namespace and version ("torch::autograd::" and
 * the trailing digits), len bytes at *name. */
static const char *node_base(const char *node, size_t *len)
{
    const char *c = strrchr(node, ':');
    const char *b = c ? c + 1 : node;
    size_t n = strlen(b);
    while (n > 0 && b[n - 1] >= '0' && b[n - 1] <= '9')
        n--;
    *len = n;
    return b;
}

/*
 * Whether node is the one a layer of class cls exists to run: a torch.nn
 * module of one operation, whose backward node then takes its backward by
 * construction. Names are torch's autograd nodes without their version
 * digit, for CPU and CUDA (cuDNN, MKL-DNN) paths.
 */
static int characteristic(const char *cls, const char *node)
{
    static const struct {
        const char *cls, *nodes;
    } tab[] = {
        {"Linear", "AddmmBackward MmBackward BmmBackward LinearBackward "
                   "MkldnnLinearBackward UnsafeViewBackward ViewBackward"},
        {"LazyLinear", "AddmmBackward MmBackward LinearBackward"},
        {"NonDynamicallyQuantizableLinear", "AddmmBackward MmBackward"},
        {"Conv1d", "ConvolutionBackward CudnnConvolutionBackward "
                   "MkldnnConvolutionBackward SlowConv"},
        {"Conv2d", "ConvolutionBackward CudnnConvolutionBackward "
                   "MkldnnConvolutionBackward ThnnConv2DBackward SlowConv"},
        {"Conv3d", "ConvolutionBackward CudnnConvolutionBackward SlowConv"},
        {"ConvTranspose1d", "ConvolutionBackward CudnnConvolutionTranspose"},
        {"ConvTranspose2d", "ConvolutionBackward CudnnConvolutionTranspose "
                            "SlowConvTranspose"},
        {"ConvTranspose3d", "ConvolutionBackward CudnnConvolutionTranspose"},
        {"Embedding", "EmbeddingBackward EmbeddingDenseBackward"},
        {"EmbeddingBag", "EmbeddingBagBackward"},
        {"LayerNorm", "NativeLayerNormBackward"},
        {"GroupNorm", "NativeGroupNormBackward"},
        {"BatchNorm1d", "NativeBatchNormBackward CudnnBatchNormBackward"},
        {"BatchNorm2d", "NativeBatchNormBackward CudnnBatchNormBackward"},
        {"BatchNorm3d", "NativeBatchNormBackward CudnnBatchNormBackward"},
        {"GELU", "GeluBackward"},
        {"ReLU", "ReluBackward ThresholdBackward"},
        {"SiLU", "SiluBackward"},
        {"Tanh", "TanhBackward"},
        {"Sigmoid", "SigmoidBackward"},
        {"Softmax", "SoftmaxBackward"},
        {"LogSoftmax", "LogSoftmaxBackward"},
        {"Dropout", "NativeDropoutBackward MulBackward FusedDropoutBackward"},
        {"MaxPool2d", "MaxPool2DWithIndicesBackward"},
        {"AvgPool2d", "AvgPool2DBackward"},
        {"AdaptiveAvgPool2d", "AdaptiveAvgPool2DBackward MeanBackward"},
        {"MSELoss", "MseLossBackward"},
    };
    size_t len;
    const char *b = node_base(node, &len);
    for (size_t i = 0; cls && i < sizeof(tab) / sizeof(tab[0]); i++) {
        if (strcmp(cls, tab[i].cls) != 0)
            continue;
        for (const char *p = tab[i].nodes; *p;) {
            size_t n = strcspn(p, " ");
            if (n == len && strncmp(p, b, n) == 0)
                return 1;
            p += n + (p[n] == ' ');
        }
    }
    return 0;
}

static struct gt__hint *hint_add(struct gt__hint *h, size_t *n, size_t cap,
                                 const char *kind, const char *layer)
{
    if (*n == cap)
        return NULL;
    h[*n].kind = kind;
    h[*n].layer = layer;
    h[*n].text[0] = '\0';
    return &h[(*n)++];
}

static void hint_input(const struct gt__agg *r, struct gt__hint *h, size_t *n,
                       size_t cap)
{
    struct gt__hint *x;
    if (!r->lost_events && !r->lost_chunks && !r->corrupt_chunks && !r->truncated)
        return;
    if (!(x = hint_add(h, n, cap, "input", "")))
        return;
    snprintf(x->text, sizeof(x->text),
             "the input is incomplete (%llu events lost, %llu chunks lost, "
             "%llu corrupt, %llu truncated input%s): every number is a lower "
             "bound",
             (unsigned long long)r->lost_events, (unsigned long long)r->lost_chunks,
             (unsigned long long)r->corrupt_chunks, (unsigned long long)r->truncated,
             r->truncated == 1 ? "" : "s");
}

static int bwd_heavy(const struct gt__agg_layer *l, double base)
{
    return !l->container && l->fwd_us > 0 && l->bwd_us >= BWD_RATIO * l->fwd_us &&
           base > 0 && (l->fwd_us + l->bwd_us) / base >= SHARE_MIN;
}

static void hint_bwd(const struct gt__agg *r, double base, struct gt__hint *h,
                     size_t *n, size_t cap)
{
    /* A row is reported only when none of its descendants is (a
     * container between them is no reason to name both). */
    unsigned char *child_has = gt__calloc(r->n ? r->n : 1, 1);
    if (!child_has)
        return;
    for (size_t i = 0; i < r->n; i++)
        if (bwd_heavy(&r->layers[i], base))
            for (long a = r->layers[i].up; a >= 0 && !child_has[a];
                 a = r->layers[a].up)
                child_has[a] = 1;
    for (size_t i = 0; i < r->n; i++) {
        const struct gt__agg_layer *l = &r->layers[i];
        struct gt__hint *x;
        if (child_has[i] || !bwd_heavy(l, base) ||
            !(x = hint_add(h, n, cap, "bwd-heavy", l->path)))
            continue;
        struct unit u = unit_of(r);
        snprintf(x->text, sizeof(x->text),
                 "backward %.3f %s is %.1fx its forward %.3f %s, %.1f%% of the "
                 "step",
                 l->bwd_us / u.k, u.name, l->bwd_us / l->fwd_us, l->fwd_us / u.k,
                 u.name, 100 * (l->fwd_us + l->bwd_us) / base);
    }
    gt__free(child_has);
}

static void hint_accg(const struct gt__agg *r, double base, struct gt__hint *h,
                      size_t *n, size_t cap)
{
    for (size_t i = 0; i < r->n; i++) {
        const struct gt__agg_layer *l = &r->layers[i];
        struct gt__hint *x;
        if (l->bwd_self_us <= 0 || l->accg_us <= 0.5 * l->bwd_self_us ||
            base <= 0 || l->accg_us / base < ACCG_MIN ||
            !(x = hint_add(h, n, cap, "accumulate-grad", l->path)))
            continue;
        struct unit u = unit_of(r);
        snprintf(x->text, sizeof(x->text),
                 "AccumulateGrad (parameter gradients) takes %.3f %s of its own "
                 "backward %.3f %s (%.0f%%), %.1f%% of the step",
                 l->accg_us / u.k, u.name, l->bwd_self_us / u.k, u.name,
                 100 * l->accg_us / l->bwd_self_us, 100 * l->accg_us / base);
    }
}

/* Forward communication is inclusive: a row's own is its total less its
 * children's. */
static void hint_fwd_comm(const struct gt__agg *r, double base,
                          struct gt__hint *h, size_t *n, size_t cap)
{
    struct unit u = unit_of(r);
    double *kids = r->n ? gt__calloc(r->n, sizeof(*kids)) : NULL;
    if (!kids)
        return;
    for (size_t i = 0; i < r->n; i++)
        if (r->layers[i].up >= 0 && (size_t)r->layers[i].up < r->n)
            kids[r->layers[i].up] += r->layers[i].fwd_comm_us;
    for (size_t i = 0; i < r->n; i++) {
        const struct gt__agg_layer *l = &r->layers[i];
        double own = l->fwd_comm_us - kids[i];
        struct gt__hint *x;
        if (l->container || own / base < COMM_MIN ||
            !(x = hint_add(h, n, cap, "comm", l->path)))
            continue;
        snprintf(x->text, sizeof(x->text),
                 "communication takes %.3f %s in its forward calls "
                 "(torch.distributed calls: FSDP's all-gather), beside %.3f "
                 "%s of forward compute, %.1f%% of the step",
                 own / u.k, u.name, l->fwd_us / u.k, u.name, 100 * own / base);
    }
    gt__free(kids);
}

static void hint_comm(const struct gt__agg *r, double base, struct gt__hint *h,
                      size_t *n, size_t cap)
{
    struct unit u = unit_of(r);
    struct gt__hint *x;
    if (base <= 0)
        return;
    for (size_t i = 0; i < r->n; i++) {
        const struct gt__agg_layer *l = &r->layers[i];
        if (l->comm_us / base < COMM_MIN ||
            !(x = hint_add(h, n, cap, "comm", l->path)))
            continue;
        snprintf(x->text, sizeof(x->text),
                 "communication takes %.3f %s in its backward nodes "
                 "(torch.distributed calls, DDP's gradient reducer), beside "
                 "%.3f %s of their compute, %.1f%% of the step",
                 l->comm_us / u.k, u.name, l->bwd_self_us / u.k, u.name,
                 100 * l->comm_us / base);
    }
    hint_fwd_comm(r, base, h, n, cap);
    struct gt__rep_totals t = gt__report_totals(r);
    if (t.comm_un_us / base >= COMM_MIN &&
        (x = hint_add(h, n, cap, "comm", "")))
        snprintf(x->text, sizeof(x->text),
                 "%.3f %s of communication in backward outside any layer's "
                 "nodes (end-of-backward callbacks: DDP waiting for its "
                 "all-reduces, FSDP's last reduce-scatter; not overlapped "
                 "with compute), %.1f%% of the step",
                 t.comm_un_us / u.k, u.name, 100 * t.comm_un_us / base);
}

static void hint_rc(const struct gt__agg *r, double base, struct gt__hint *h,
                    size_t *n, size_t cap)
{
    for (size_t i = 0; i < r->n; i++) {
        const struct gt__agg_layer *l = &r->layers[i];
        struct gt__hint *x;
        if (!l->rc_calls || !l->fwd_calls || l->container || base <= 0)
            continue;
        double rc = l->rc_us / (double)l->rc_calls;
        double fw = l->fwd_us / (double)l->fwd_calls;
        if (rc <= RC_RATIO * fw || l->rc_us / base < RC_MIN ||
            !(x = hint_add(h, n, cap, "recompute", l->path)))
            continue;
        snprintf(x->text, sizeof(x->text),
                 "a recompute costs %.3f ms, %.1fx the forward call it repeats "
                 "(%.3f ms); %.1f%% of the step",
                 rc / 1e3, fw > 0 ? rc / fw : 0, fw / 1e3, 100 * l->rc_us / base);
    }
}

static void hint_top(const struct gt__agg *r, double base, struct gt__hint *h,
                     size_t *n, size_t cap)
{
    for (size_t i = 0; i < r->n; i++) {
        const struct gt__agg_layer *l = &r->layers[i];
        struct gt__hint *x;
        if (!l->top_node || l->bwd_self_us <= 0 || base <= 0 ||
            l->bwd_self_nodes < 2 * (l->bwd_spans ? l->bwd_spans : 1) ||
            l->top_node_us < TOP_SHARE * l->bwd_self_us ||
            l->bwd_self_us / base < SHARE_MIN ||
            characteristic(l->cls, l->top_node) ||
            strstr(l->top_node, "AccumulateGrad") ||
            strstr(l->top_node, "CompiledFunction") ||
            !(x = hint_add(h, n, cap, "top-node", l->path)))
            continue;
        struct unit u = unit_of(r);
        snprintf(x->text, sizeof(x->text),
                 "one node, %.120s, takes %.3f %s of its own backward %.3f %s "
                 "(%.0f%%), %.1f%% of the step",
                 l->top_node, l->top_node_us / u.k, u.name, l->bwd_self_us / u.k,
                 u.name,
                 100 * l->top_node_us / l->bwd_self_us, 100 * l->bwd_self_us / base);
    }
}

static void hint_kernel(const struct gt__agg *r, struct gt__hint *h, size_t *n,
                        size_t cap)
{
    double all = 0;
    for (size_t i = 0; i < r->n; i++)
        all += r->layers[i].gpu_self_us[0] + r->layers[i].gpu_self_us[1];
    for (size_t i = 0; i < r->n && all > 0; i++) {
        const struct gt__agg_layer *l = &r->layers[i];
        int k = gt__agg_top_kernel(l), names = 0;
        struct gt__hint *x;
        for (int j = 0; j < GT__AGG_TOPK; j++)
            names += l->bk_name[j] != NULL;
        double own = l->gpu_self_us[1];
        if (k < 0 || names < 2 || own <= 0 || l->bk_us[k] < TOP_SHARE * own ||
            own / all < SHARE_MIN ||
            !(x = hint_add(h, n, cap, "top-kernel", l->path)))
            continue;
        snprintf(x->text, sizeof(x->text),
                 "one GPU kernel, %.120s, takes %.3f ms of its own backward GPU "
                 "time %.3f ms (%.0f%%), %.1f%% of all layers' GPU time",
                 l->bk_name[k], l->bk_us[k] / 1e3, own / 1e3,
                 100 * l->bk_us[k] / own, 100 * own / all);
    }
}

static int rank_slow(const struct gt__agg *r, const struct gt__agg_layer *l,
                     double per_rank)
{
    double step = l->rank_median ? gt__agg_quantile(&r->step_st, 0.5) : per_rank;
    return !l->container && l->rank_mean_us > 0 && step > 0 &&
           l->slow_us >= RANK_RATIO * l->rank_mean_us &&
           (l->slow_us - l->rank_mean_us) / step >= SHARE_MIN;
}

static void hint_rank(const struct gt__agg *r, double base, struct gt__hint *h,
                      size_t *n, size_t cap)
{
    double per_rank = r->nranks > 1 ? base / r->nranks : 0;
    /* Ancestors include a slow layer's time: only the deepest is named. */
    unsigned char *below = gt__calloc(r->n ? r->n : 1, 1);
    if (!below || per_rank <= 0) {
        gt__free(below);
        return;
    }
    for (size_t i = 0; i < r->n; i++)
        if (rank_slow(r, &r->layers[i], per_rank))
            for (long q = r->layers[i].up; q >= 0 && !below[q]; q = r->layers[q].up)
                below[q] = 1;
    for (size_t i = 0; i < r->n; i++) {
        const struct gt__agg_layer *l = &r->layers[i];
        struct gt__hint *x;
        if (below[i] || !rank_slow(r, l, per_rank) ||
            !(x = hint_add(h, n, cap, "rank", l->path)))
            continue;
        snprintf(x->text, sizeof(x->text),
                 "rank %d takes %.3f ms%s, %.2fx the %u ranks' mean %.3f ms",
                 (int)l->slow_rank, l->slow_us / 1e3,
                 l->rank_median ? " per iteration (median)" : "",
                 l->slow_us / l->rank_mean_us, r->nranks, l->rank_mean_us / 1e3);
    }
    gt__free(below);
}

static void hint_compiled(const struct gt__agg *r, struct gt__hint *h,
                          size_t *n, size_t cap)
{
    const struct gt__agg_layer *c = NULL;
    size_t bare = 0;
    struct gt__hint *x;
    if (!r->compiled_spans || r->compiled[0].regions || r->compiled[1].regions)
        return; /* attributed: the torch.compile lines say how */
    for (size_t i = 0; i < r->n; i++) {
        const struct gt__agg_layer *l = &r->layers[i];
        if (l->top_node && strstr(l->top_node, "CompiledFunction")) {
            if (!c)
                c = l;
        } else if (!l->container && l->bwd_self_us <= l->accg_us + 1e-9) {
            bare++; /* no backward of its own but parameter gradients */
        }
    }
    if (!(x = hint_add(h, n, cap, "compiled", c ? c->path : "")))
        return;
    struct unit u = unit_of(r);
    snprintf(x->text, sizeof(x->text),
             "torch.compile: a compiled backward is one node "
             "(CompiledFunctionBackward, %.3f %s, %llu span%s)%s; %zu rows "
             "show only AccumulateGrad or nothing: no compile-time map (a "
             "backend other than inductor, GRADTRACE_COMPILE_MAP=0, or a "
             "cache entry older than gradtrace)",
             r->compiled_us / u.k, u.name,
             (unsigned long long)r->compiled_spans,
             r->compiled_spans == 1 ? "" : "s", c ? " on this layer" : "", bare);
}

size_t gt__hints_find(const struct gt__agg *r, struct gt__hint *h, size_t cap)
{
    size_t n = 0;
    double base = step_base(r);
    hint_input(r, h, &n, cap);
    hint_bwd(r, base, h, &n, cap);
    hint_compiled(r, h, &n, cap);
    hint_top(r, base, h, &n, cap);
    hint_kernel(r, h, &n, cap);
    hint_rank(r, base, h, &n, cap);
    hint_comm(r, base, h, &n, cap);
    hint_accg(r, base, h, &n, cap);
    hint_rc(r, base, h, &n, cap);
    return n;
}
