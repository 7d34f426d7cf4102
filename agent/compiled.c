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
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "agent/capture.h"
#include "agent/events.h"
#include "agent/hooks.h"
#include "agent/internal.h"
#include "agent/ring.h"
#include "agent/strings.h"
#include "agent/torch.h"
#include "agent/trigger.h"

#define COMPILED_DEPTH 4 /* nesting recorded; deeper regions only count */

static _Atomic uint32_t next_graph;
static _Atomic uint32_t g_bare_root; /* LAYER_INFO's bare root, 0 none */

struct region {
    uint32_t graph;
    uint32_t epoch; /* capture epoch its begin was recorded in, 0: none */
    uint32_t trig;  /* forward triggers its begin opened segments for */
};

/* Per thread: the open regions (a few words of static TLS). */
static __thread struct {
    uint32_t depth;
    _Bool local; /* the outermost region added the thread's callback */
    struct region r[COMPILED_DEPTH];
} tl_cr __attribute__((tls_model("initial-exec")));

/* ------------------------------------------------ triggers in regions */

/*
 * A trigger on a layer inside a compiled graph (schema/control.md,
 * "Triggers"): no module scope of that layer opens and its backward is
 * the graph's one CompiledFunctionBackward node, so the agent keeps each
 * map's owner paths (up to TMAPS maps; later ones have no triggers) and,
 * while triggers are armed, composes them at a forward region's begin
 * with the layer open around it (as the converter names them; the bare
 * root's are the paths as they are). Triggers matching one of them (or an
 * ancestor):
 *   forward: a segment around the region, as around a module call;
 *   backward: the node this thread created last, which is the graph's
 *     CompiledFunctionBackward (autograd builds a Function's node before
 *     its forward runs), counts as that layer's, so the backward segment
 *     opens at that node and closes after it: the window spans the
 *     compiled node and holds the layer's kernels.
 * Masks are cached per map for TPREFIX run-time layers and the trigger
 * set's generation. Cold path: only with triggers armed, under a mutex.
 */
#define TMAPS 4096u
#define TPREFIX 8u
#define TCALLS 65536u

struct tmap {
    uint16_t phase;
    uint32_t ncalls;
    uint32_t *owner;      /* per call: owner string id + 1, 0 none */
    struct {
        uint32_t prefix, gen, mask;
    } pc[TPREFIX];
    uint32_t pc_next;
};

static struct tmap *g_tmaps[TMAPS];
static pthread_mutex_t g_tlock = PTHREAD_MUTEX_INITIALIZER;

static void tmap_new(uint32_t graph, uint16_t phase, uint32_t calls)
{
    if (graph == 0 || graph > TMAPS)
        return;
    struct tmap *m = calloc(1, sizeof(*m));
    uint32_t n = calls < TCALLS ? calls : TCALLS;
    if (!m || (n && !(m->owner = calloc(n, sizeof(*m->owner))))) {
        free(m);
        return;
    }
    m->phase = phase;
    m->ncalls = n;
    pthread_mutex_lock(&g_tlock);
    g_tmaps[graph - 1] = m; /* numbers are never reused: never replaced */
    pthread_mutex_unlock(&g_tlock);
}

static void tmap_call(uint32_t graph, uint32_t index, uint32_t owner)
{
    if (graph == 0 || graph > TMAPS || owner == 0)
        return;
    pthread_mutex_lock(&g_tlock);
    struct tmap *m = g_tmaps[graph - 1];
    if (m && index < m->ncalls)
        m->owner[index] = owner + 1;
    pthread_mutex_unlock(&g_tlock);
}

/* Triggers matching a layer of map m run under layer prefix (0 none). */
static uint32_t tmap_mask(struct tmap *m, uint32_t prefix)
{
    char buf[2 * GT_STRING_MAX + 2];
    const char *pre = NULL, *s;
    uint32_t pl = 0, len, mask = 0;
    int bare = prefix == 0 ||
               prefix == atomic_load_explicit(&g_bare_root, memory_order_relaxed);

    if (!bare && gt__strings_get(prefix, &pre, &pl) != 0)
        bare = 1;
    for (uint32_t i = 0; i < m->ncalls; i++) {
        if (!m->owner[i] || gt__strings_get(m->owner[i] - 1, &s, &len) != 0)
            continue;
        size_t n = 0;
        if (bare) {
            if (len == 0 && prefix && gt__strings_get(prefix, &s, &len) != 0)
                continue; /* the root itself */
            memcpy(buf, s, len);
            n = len;
        } else {
            memcpy(buf, pre, pl);
            n = pl;
            if (len) {
                buf[n++] = '.';
                memcpy(buf + n, s, len);
                n += len;
            }
        }
        mask |= gt__trig_path_mask(buf, n);
    }
    return mask;
}

static uint32_t trig_region_begin(uint32_t graph)
{
    uint32_t prefix = gt__current_layer(), mask = 0, gen = gt__trig_gen();
    uint16_t phase = 0;

    if (graph > TMAPS)
        return 0;
    pthread_mutex_lock(&g_tlock);
    struct tmap *m = g_tmaps[graph - 1];
    if (m) {
        phase = m->phase;
        uint32_t k = 0;
        while (k < TPREFIX && !(m->pc[k].gen == gen && m->pc[k].prefix == prefix))
            k++;
        if (k == TPREFIX) {
            k = m->pc_next++ % TPREFIX;
            m->pc[k].prefix = prefix;
            m->pc[k].gen = gen;
            m->pc[k].mask = tmap_mask(m, prefix);
        }
        mask = m->pc[k].mask;
    }
    pthread_mutex_unlock(&g_tlock);
    /* A backward graph runs inside its node, which the forward counted. */
    if (!mask || phase == GT_COMPILED_BACKWARD)
        return 0;
    uint64_t seq, tid;
    if (phase == GT_COMPILED_FORWARD && gt__trig_last_node(&seq, &tid)) {
        uint32_t more = mask & ~gt__trig_stack_mask();
        if (more)
            gt__trig_node_created(seq, tid, more, prefix);
    }
    gt__trig_region_begin(mask);
    return mask;
}

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
    tmap_new(g, phase, calls);
    return g;
}

void gt__compiled_call(uint32_t graph, uint32_t index, uint32_t kernel,
                       uint32_t scope, uint32_t owner, uint32_t fused,
                       uint16_t phase, uint16_t flags)
{
    if (graph == 0)
        return;
    if (!(flags & GT_CCALL_UNOWNED))
        tmap_call(graph, index, owner);
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
    tl_cr.r[d].trig = 0;
    /* Armed triggers first: a window they open holds the region. */
    if (GT__UNLIKELY(gt__capture_triggers()) && graph != 0)
        tl_cr.r[d].trig = trig_region_begin(graph);
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
    if (r->epoch != 0 && gt__capture_on() && r->epoch == gt__capture_epoch())
        region_rec(GT_R_COMPILED_END, r->graph, 0);
    /* After the end: closing the window may stop the capture. */
    if (r->trig)
        gt__trig_region_end(r->trig);
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

void gt__layer_info(uint32_t layer, uint32_t cls, uint32_t flags)
{
    if (flags & GT_LAYER_F_BARE_ROOT)
        atomic_store_explicit(&g_bare_root, layer, memory_order_relaxed);
    GT__RECORD(gt_r_layer_info, GT_R_LAYER_INFO, r, {
        r->layer = layer;
        r->cls = cls;
        r->flags = flags;
        r->ts = gt__now();
    });
}
