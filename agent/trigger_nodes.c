/*
 * The trigger engine's node table (agent/trigger_nodes.h): which
 * backward nodes belong to an armed trigger's layer.
 *
 * (fwd_tid, seq) -> mask of matching triggers, for nodes of matching
 * layers created in a target iteration's forward. Open addressing with
 * linear probing; each slot is one atomic word holding a 52-bit hash of
 * the key and the 12-bit mask, claimed with one CAS, so readers never see
 * a key without its mask (0 = empty). Cleared when the iteration is done.
 * Past 3/4 full, inserts stop and that iteration's windows close at the
 * pass end instead of by count. Mapped at the first trigger armed, never
 * freed.
 */
#include "agent/trigger_nodes.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "agent/internal.h"

#define NODE_SLOTS (1u << 16)
#define NODE_MASK_BITS 0xfffull

_Static_assert(GT__TRIG_MAX < 12, "mask and the recorded flag fit 12 bits");

static _Atomic uint64_t *g_nodes;
/* Per slot, written by the claiming thread before the node can run
 * backward: the creation's layer and time, replayed into the window as a
 * GT_R_NODE_CREATED so its nodes keep their layer and fwdbwd arrow. */
static uint32_t *g_node_layer;
static uint64_t *g_node_ts;
static _Atomic uint32_t g_node_count;
static _Atomic int g_node_full;

static uint64_t node_key(uint64_t seq, uint64_t tid)
{
    uint64_t h = seq * 0x9e3779b97f4a7c15ull ^ (tid + 0x632be59bd9b4e019ull) * 0xbf58476d1ce4e5b9ull;
    h ^= h >> 31;
    h *= 0x94d049bb133111ebull;
    h ^= h >> 29;
    return (h & ~NODE_MASK_BITS) | (NODE_MASK_BITS + 1); /* never 0 */
}

void gt__trig_node_put(uint64_t seq, uint64_t tid, uint32_t mask, uint32_t layer)
{
    uint64_t k = node_key(seq, tid);

    if (!g_nodes || atomic_fetch_add(&g_node_count, 1) >= NODE_SLOTS / 4 * 3) {
        atomic_store(&g_node_full, 1);
        return;
    }
    for (uint32_t i = (uint32_t)(k >> 12) & (NODE_SLOTS - 1);; i = (i + 1) & (NODE_SLOTS - 1)) {
        uint64_t cur = 0;
        if (atomic_compare_exchange_strong_explicit(&g_nodes[i], &cur, k | mask,
                                                    memory_order_relaxed,
                                                    memory_order_relaxed)) {
            g_node_layer[i] = layer;
            g_node_ts[i] = gt__now();
            return;
        }
        if ((cur & ~NODE_MASK_BITS) == k) {
            /* The same node again (cannot happen with unique seqs). */
            atomic_fetch_or_explicit(&g_nodes[i], mask, memory_order_relaxed);
            return;
        }
    }
}

uint32_t gt__trig_node_get(uint64_t seq, uint64_t tid, struct gt__trig_node *info)
{
    uint64_t k = node_key(seq, tid);

    if (!g_nodes || atomic_load_explicit(&g_node_count, memory_order_relaxed) == 0)
        return 0;
    for (uint32_t i = (uint32_t)(k >> 12) & (NODE_SLOTS - 1), n = 0; n < NODE_SLOTS;
         i = (i + 1) & (NODE_SLOTS - 1), n++) {
        uint64_t cur = atomic_load_explicit(&g_nodes[i], memory_order_relaxed);
        if ((cur & ~NODE_MASK_BITS) == k) {
            info->mask = (uint32_t)(cur & NODE_MASK_BITS);
            info->layer = g_node_layer[i];
            info->ts = g_node_ts[i];
            return info->mask & ~GT__TRIG_NODE_RECORDED;
        }
        if (cur == 0)
            return 0;
    }
    return 0;
}

void gt__trig_nodes_clear(void)
{
    if (g_nodes && atomic_load(&g_node_count)) {
        memset((void *)g_nodes, 0, NODE_SLOTS * sizeof(*g_nodes));
        atomic_store(&g_node_count, 0);
        atomic_store(&g_node_full, 0);
    }
}

int gt__trig_nodes_alloc(void)
{
    size_t per = sizeof(*g_nodes) + sizeof(*g_node_ts) + sizeof(*g_node_layer);
    void *k;

    if (g_nodes)
        return 0;
    k = mmap(NULL, NODE_SLOTS * per, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (k == MAP_FAILED)
        return -ENOMEM;
    g_node_ts = (uint64_t *)((char *)k + NODE_SLOTS * sizeof(*g_nodes));
    g_node_layer = (uint32_t *)(g_node_ts + NODE_SLOTS);
    g_nodes = k;
    return 0;
}

int gt__trig_nodes_full(void)
{
    return atomic_load(&g_node_full);
}
