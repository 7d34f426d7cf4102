/*
 * torch.compile'd graphs (schema/torch.md, "Compiled models"): the
 * compile-time map the Python package hands over (one graph record and
 * one record per kernel or extern call of its generated wrapper), the
 * regions in which a wrapper runs, and the time dynamo spends compiling.
 *
 * The map and compile spans are stream metadata, recorded with or
 * without capture (a window opened later needs them), at compile time:
 * never on a step's path. A region's begin and end cost one capture
 * check while idle; while capturing, the region's thread gets a
 * thread-local RecordFunction callback (agent/ops.c) for as long as the
 * wrapper runs, so its kernels' profiling scopes and its extern calls
 * are recorded as operators, and operators elsewhere pay nothing.
 *
 * Regions nest (a compiled graph called from inside another's extern
 * call): only the outermost adds and removes the callback. A region that
 * raised still ends (the package's wrapper ends it in a finally).
 */
#include <stdatomic.h>

#include "agent/capture.h"
#include "agent/events.h"
#include "agent/hooks.h"
#include "agent/internal.h"
#include "agent/ring.h"
#include "agent/torch.h"

#define COMPILED_DEPTH 4 /* nesting recorded; deeper regions only count */

static _Atomic uint32_t next_graph;

struct region {
    uint32_t graph;
    uint32_t epoch; /* capture epoch its begin was recorded in, 0: none */
};

/* Per thread: the open regions (a few words of static TLS). */
static __thread struct {
    uint32_t depth;
    _Bool local; /* the outermost region added the thread's callback */
    struct region r[COMPILED_DEPTH];
} tl_cr __attribute__((tls_model("initial-exec")));

static void region_rec(uint16_t type, uint32_t graph, uint32_t layer)
{
    GT__RECORD(gt_r_compiled_region, type, r, {
        r->graph = graph;
        r->layer = layer;
        r->flags = 0;
        r->ts = gt__now();
    });
}

uint32_t gt__compiled_graph(uint32_t code, uint32_t compile_id,
                            uint32_t graph_id, uint16_t phase,
                            uint16_t flags, uint32_t calls)
{
    uint32_t g = atomic_fetch_add_explicit(&next_graph, 1,
                                           memory_order_relaxed) + 1;
    if (g == 0)
        return 0; /* wrapped after 2^32 maps: no more */
    GT__RECORD(gt_r_compiled_graph, GT_R_COMPILED_GRAPH, r, {
        r->graph = g;
        r->code = code;
        r->compile_id = compile_id;
        r->graph_id = graph_id;
        r->phase = phase;
        r->flags = flags;
        r->calls = calls;
        r->ts = gt__now();
    });
    return g;
}

void gt__compiled_call(uint32_t graph, uint32_t index, uint32_t kernel,
                       uint32_t scope, uint32_t owner, uint32_t fused,
                       uint16_t phase, uint16_t flags)
{
    if (graph == 0)
        return;
    GT__RECORD(gt_r_compiled_call, GT_R_COMPILED_CALL, r, {
        r->graph = graph;
        r->index = index;
        r->kernel = kernel;
        r->scope = scope;
        r->owner = owner;
        r->fused = fused;
        r->phase = phase;
        r->flags = flags;
    });
}

void gt__compiled_begin(uint32_t graph)
{
    uint32_t d = tl_cr.depth++;
    if (GT__UNLIKELY(d >= COMPILED_DEPTH))
        return;
    tl_cr.r[d].graph = graph;
    tl_cr.r[d].epoch = 0;
    if (GT__LIKELY(!gt__capture_on()) || graph == 0)
        return;
    if (!gt__thread_self())
        return;
    tl_cr.r[d].epoch = gt__capture_epoch();
    region_rec(GT_R_COMPILED_BEGIN, graph, gt__current_layer());
    /* After the begin: the kernels' scopes are inside it. */
    if (d == 0)
        tl_cr.local = (_Bool)gt__ops_local_on(gt__torch_lib());
}

void gt__compiled_end(uint32_t graph)
{
    (void)graph;
    if (tl_cr.depth == 0)
        return;
    uint32_t d = --tl_cr.depth;
    if (d == 0 && tl_cr.local) {
        gt__ops_local_off();
        tl_cr.local = 0;
    }
    if (d >= COMPILED_DEPTH)
        return;
    const struct region *r = &tl_cr.r[d];
    /* Begun while idle, or the capture stopped or restarted since. */
    if (r->epoch == 0 || !gt__capture_on() || r->epoch != gt__capture_epoch())
        return;
    region_rec(GT_R_COMPILED_END, r->graph, 0);
}

void gt__compile_span(uint32_t name, uint64_t begin_ns, uint64_t end_ns)
{
    GT__RECORD(gt_r_compile_span, GT_R_COMPILE_SPAN, r, {
        r->name = name;
        r->flags = 0;
        r->begin_ns = begin_ns;
        r->end_ns = end_ns;
    });
}
