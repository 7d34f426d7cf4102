/*
 * The trigger engine's backward node hooks (agent/trigger.h; the window
 * rules at the top of agent/trigger.c): which nodes belong to an armed
 * trigger's layer, and where its backward segments open, pause, resume
 * and close.
 */
#include "agent/trigger.h"
#include "agent/trigger_int.h"
#include "agent/trigger_nodes.h"

#include <pthread.h>
#include <stdatomic.h>

#include "agent/internal.h"

/* Triggers with a recompute of their layer open now. */
static uint32_t recompute_mask(void)
{
    uint32_t m = 0;

    for (int i = 0; i < GT__TRIG_MAX; i++)
        if (atomic_load_explicit(&gt__trig_tab[i].rc_depth, memory_order_relaxed) > 0 &&
            atomic_load_explicit(&gt__trig_tab[i].rc_count, memory_order_relaxed))
            m |= 1u << i;
    return m;
}

/* Per thread, the triggers of the backward nodes running on it, innermost
 * last: a node created inside one (a double backward's, by
 * autograd.grad(create_graph=True)) belongs to the running node's layer,
 * as the converter attributes it. Deeper nesting than the stack keeps is
 * counted, not stored. */
#define RUN_STACK 16
static __thread uint32_t tl_run[RUN_STACK];
static __thread unsigned tl_run_depth;

static __thread uint32_t tl_run_pass;

static void run_push(uint32_t m)
{
    /* A new outermost pass starts the stack over (a begin whose end was
     * not seen, when triggers were armed or cleared inside a node). */
    uint32_t pass = atomic_load_explicit(&gt__trig_pass_seq, memory_order_relaxed);
    if (pass != tl_run_pass) {
        tl_run_pass = pass;
        tl_run_depth = 0;
    }
    if (tl_run_depth < RUN_STACK)
        tl_run[tl_run_depth] = m;
    tl_run_depth++;
}

static void run_pop(void)
{
    if (tl_run_depth > 0)
        tl_run_depth--;
}

static uint32_t run_mask(void)
{
    unsigned d = tl_run_depth;
    return d && d <= RUN_STACK ? tl_run[d - 1] : 0;
}

void gt__trig_node_created(uint64_t seq, uint64_t fwd_tid, uint32_t mask,
                           uint32_t layer)
{
    /* In backward only a recompute's nodes count (they run in this pass)
     * and those a running node of a trigger's layer creates outside any
     * module's forward (they run in a later pass of the step:
     * create_graph; a recompute's modules are on the stack and decide by
     * themselves: a non-reentrant one's nodes never run). */
    if (atomic_load_explicit(&gt__trig_pass_depth, memory_order_relaxed))
        mask = (mask & recompute_mask()) | (layer ? 0 : run_mask());
    if (!mask)
        return;
    mask &= gt__trig_live_mask(GT__TRIG_BACKWARD);
    if (!mask)
        return;
    for (int i = 0; i < GT__TRIG_MAX; i++)
        if (mask & (1u << i))
            atomic_fetch_add_explicit(&gt__trig_tab[i].expected, 1, memory_order_relaxed);
    /* Inside a segment the caller records this creation into the window
     * itself; outside one (also while a full capture runs) it goes to the
     * main trace only, and is replayed into the window when the node runs. */
    gt__trig_node_put(seq, fwd_tid,
                      mask | (__atomic_load_n(&gt__trig_open_i, __ATOMIC_RELAXED) >= 0
                                  ? GT__TRIG_NODE_RECORDED : 0),
                      layer);
}

/* gt__trig_lock held: whether trigger i's open segment may pause at a node not
 * its layer's. Only a segment its own nodes opened, with none of them
 * running now (a node may run inside another: a checkpoint's nested
 * pass), and only when every node of the layer is known (counted from
 * its forward): else a pause could not tell a stranger from its own. */
static int may_pause(int i)
{
    struct gt__trig_slot *t = &gt__trig_tab[i];

    return gt__trig_open_i == i && t->node_seg && atomic_load(&t->in_nodes) == 0 &&
           t->count_valid && !gt__trig_nodes_full();
}

/* The triggers a backward node belongs to: its creation's (the node
 * table), or for a node without a forward of its own (an AccumulateGrad:
 * layer is its parameter's module) the triggers on layer or an ancestor. */
static uint32_t node_mask(uint64_t seq, uint64_t fwd_tid, uint32_t layer,
                          struct gt__trig_node *info)
{
    if (layer) {
        info->mask = GT__TRIG_NODE_RECORDED; /* nothing to replay */
        return gt__trig_anc_mask(layer);
    }
    return gt__trig_node_get(seq, fwd_tid, info);
}

void gt__trig_bwd_node_begin(uint64_t seq, uint64_t fwd_tid, uint32_t layer)
{
    struct gt__trig_node info;
    uint32_t m = node_mask(seq, fwd_tid, layer, &info);

    if (!m && __atomic_load_n(&gt__trig_open_i, __ATOMIC_RELAXED) < 0) {
        run_push(0);
        return;
    }
    pthread_mutex_lock(&gt__trig_lock);
    m &= gt__trig_live_mask(GT__TRIG_BACKWARD);
    run_push(m);
    /* Another layer's node: the window holds only its layer's nodes, so
     * its segment pauses here and resumes at the layer's next node (a glob
     * over blocks.*.mlp: a segment per MLP, none of the attention between). */
    if (gt__trig_open_i >= 0 && !(m & (1u << gt__trig_open_i)) && may_pause(gt__trig_open_i))
        gt__trig_segment_close(gt__trig_open_i);
    for (int i = 0; i < GT__TRIG_MAX; i++) {
        if (!(m & (1u << i)))
            continue;
        atomic_fetch_add(&gt__trig_tab[i].in_nodes, 1);
        /* A parameter's AccumulateGrad may come after the layer's last
         * counted node: it resumes the segment all the same. */
        if (gt__trig_open_i < 0 && (!gt__trig_tab[i].bwd_closed || layer)) {
            gt__trig_segment_open(i, 0);
            gt__trig_tab[i].node_seg = gt__trig_open_i == i;
        }
    }
    /* The creation happened outside any segment: replay it, so the node
     * keeps its layer and forward->backward arrow in the window. */
    if (gt__trig_open_i >= 0 && m && !(info.mask & GT__TRIG_NODE_RECORDED)) {
        struct gt_r_node_created r = {{GT_R_NODE_CREATED, sizeof(r)}, info.layer,
                                      info.ts, seq, fwd_tid};
        (void)gt__emit(&r, sizeof(r));
    }
    pthread_mutex_unlock(&gt__trig_lock);
}

void gt__trig_bwd_node_end(uint64_t seq, uint64_t fwd_tid, uint32_t layer)
{
    struct gt__trig_node info;
    uint32_t m;

    run_pop();
    m = node_mask(seq, fwd_tid, layer, &info);
    if (!m)
        return;
    pthread_mutex_lock(&gt__trig_lock);
    m &= gt__trig_live_mask(GT__TRIG_BACKWARD);
    for (int i = 0; i < GT__TRIG_MAX; i++) {
        struct gt__trig_slot *t = &gt__trig_tab[i];
        if (!(m & (1u << i)))
            continue;
        if (atomic_load(&t->in_nodes) > 0)
            atomic_fetch_sub(&t->in_nodes, 1);
        if (layer)
            continue; /* AccumulateGrad: not in the forward's count */
        /* Last matching node of the forward's count: the layer's nodes are
         * done. A segment they opened stays open for the AccumulateGrad
         * nodes of its parameters the engine runs next, and closes at the
         * next other node (or the pass end); any other closes here. */
        if (atomic_fetch_add(&t->seen, 1) + 1 == atomic_load(&t->expected) &&
            t->count_valid && !gt__trig_nodes_full() && gt__trig_open_i == i) {
            gt__trig_segment_close(i);
            t->bwd_closed = 1;
        }
    }
    pthread_mutex_unlock(&gt__trig_lock);
}

void gt__trig_bwd_range_begin(uint32_t path_id)
{
    uint32_t m = gt__trig_layer_mask(path_id);

    if (!m)
        return;
    pthread_mutex_lock(&gt__trig_lock);
    m &= gt__trig_live_mask(GT__TRIG_BACKWARD);
    for (int i = 0; i < GT__TRIG_MAX; i++)
        if (m & (1u << i) && atomic_fetch_add(&gt__trig_tab[i].rng_depth, 1) == 0 &&
            gt__trig_open_i < 0) {
            gt__trig_segment_open(i, 0);
            gt__trig_tab[i].rng_own = 1;
        }
    pthread_mutex_unlock(&gt__trig_lock);
}

void gt__trig_bwd_range_end(uint32_t path_id)
{
    uint32_t m = gt__trig_layer_mask(path_id);

    if (!m)
        return;
    pthread_mutex_lock(&gt__trig_lock);
    for (int i = 0; i < GT__TRIG_MAX; i++)
        if (m & (1u << i) && gt__trig_tab[i].used &&
            atomic_load(&gt__trig_tab[i].rng_depth) > 0 &&
            atomic_fetch_sub(&gt__trig_tab[i].rng_depth, 1) == 1 && gt__trig_tab[i].rng_own) {
            gt__trig_tab[i].rng_own = 0;
            gt__trig_segment_close(i);
        }
    pthread_mutex_unlock(&gt__trig_lock);
}

