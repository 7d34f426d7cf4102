/*
 * Bounded maps for the converter's correlations (node creation -> backward
 * node, CUDA correlation id -> launch / external id / pending activity).
 *
 * Why a ring plus a hash index: the converter must hold creations until
 * their backward node runs, but an untrusted or simply huge stream could
 * create nodes forever. A ring of fixed size gives FIFO eviction for free
 * (the oldest creation is the one least likely to still be waited for), and
 * a linear-probing index over it with backward-shift deletion keeps lookups
 * O(1) with no tombstones. Memory is allocated once, at init.
 */
#include <errno.h>

#include "common/alloc.h"
#include "daemon/conv_internal.h"

/*
 * Keys are correlation ids and sequence numbers, which count up: a hash
 * that keeps consecutive keys in consecutive slots makes the lookups of a
 * burst hit the same cache lines (a scrambling hash made every lookup a
 * cache miss, a third of the conversion time). Clustering from hostile
 * keys is bounded by PROBE_MAX instead: no entry is ever stored further
 * than that from its home slot, so every operation is O(PROBE_MAX).
 */
#define PROBE_MAX 64u

static uint32_t key_hash(uint64_t a, uint64_t b)
{
    uint64_t h = b + a * 0x9e3779b97f4a7c15ull;
    return (uint32_t)h ^ (uint32_t)(h >> 32);
}

/*
 * A slot is (hash << 32) | (ring index + 1): comparing the stored hash
 * first means a probe touches the ring (a cache miss on a large map) only
 * for a real candidate.
 */
#define SLOT(h, r) (((uint64_t)(h) << 32) | (r))
#define SLOT_RING(s) ((uint32_t)(s))
#define SLOT_HASH(s) ((uint32_t)((s) >> 32))

int gt__bmap_init(struct gt__bmap *m, uint32_t cap)
{
    uint32_t slots = 16;
    memset(m, 0, sizeof(*m));
    if (cap == 0 || cap > (1u << 26))
        return -EINVAL;
    while (slots < cap * 2)
        slots *= 2;
    m->ring = gt__calloc(cap, sizeof(*m->ring));
    m->slots = gt__calloc(slots, sizeof(*m->slots));
    if (!m->ring || !m->slots) {
        gt__bmap_free(m);
        return -ENOMEM;
    }
    m->cap = cap;
    m->mask = slots - 1;
    return 0;
}

void gt__bmap_free(struct gt__bmap *m)
{
    gt__free(m->ring);
    gt__free(m->slots);
    memset(m, 0, sizeof(*m));
}

/* Slot holding the entry for (a, b), or UINT32_MAX. */
static uint32_t find_slot(const struct gt__bmap *m, uint64_t a, uint64_t b)
{
    uint32_t h = key_hash(a, b);
    uint32_t i = h & m->mask;
    for (uint32_t n = 0; n < PROBE_MAX; n++) {
        uint64_t s = m->slots[i];
        if (s == 0)
            return UINT32_MAX;
        if (SLOT_HASH(s) == h) {
            const struct gt__bmap_ent *e = &m->ring[SLOT_RING(s) - 1];
            if (e->a == a && e->b == b)
                return i;
        }
        i = (i + 1) & m->mask;
    }
    return UINT32_MAX;
}

/* Deletes slot i, shifting later entries of the probe run back. */
static void delete_slot(struct gt__bmap *m, uint32_t i)
{
    uint32_t j = i;
    for (;;) {
        j = (j + 1) & m->mask;
        uint64_t r = m->slots[j];
        /* No entry lives further than PROBE_MAX from its home, so none
         * beyond that distance from the hole can move into it: stopping
         * there keeps deletion O(PROBE_MAX) in long dense runs. */
        if (r == 0 || ((j - i) & m->mask) > PROBE_MAX)
            break;
        uint32_t home = SLOT_HASH(r) & m->mask;
        /* Move r into the hole when its home is not in (i, j]. */
        if (((j - home) & m->mask) >= ((j - i) & m->mask)) {
            m->slots[i] = r;
            i = j;
        }
    }
    m->slots[i] = 0;
}

int gt__bmap_put(struct gt__bmap *m, uint64_t a, uint64_t b,
                 const struct gt__bmap_val *v)
{
    int evicted = 0;
    uint32_t s = find_slot(m, a, b);
    if (s != UINT32_MAX) {
        m->ring[SLOT_RING(m->slots[s]) - 1].v = *v;
        return 0;
    }
    struct gt__bmap_ent *e = &m->ring[m->head];
    if (e->live) {
        uint32_t old = find_slot(m, e->a, e->b);
        if (old != UINT32_MAX)
            delete_slot(m, old);
        evicted = 1;
    }
    e->live = 0;
    uint32_t h = key_hash(a, b);
    uint32_t i = h & m->mask, n = 0;
    while (m->slots[i] != 0 && n < PROBE_MAX) {
        i = (i + 1) & m->mask;
        n++;
    }
    if (n == PROBE_MAX)
        return 1; /* a pathological cluster: dropped, counted as evicted */
    e->a = a;
    e->b = b;
    e->v = *v;
    e->live = 1;
    m->slots[i] = SLOT(h, m->head + 1);
    m->head = m->head + 1 == m->cap ? 0 : m->head + 1;
    return evicted;
}

const struct gt__bmap_val *gt__bmap_get(const struct gt__bmap *m, uint64_t a,
                                        uint64_t b)
{
    uint32_t s = find_slot(m, a, b);
    return s == UINT32_MAX ? NULL : &m->ring[SLOT_RING(m->slots[s]) - 1].v;
}

int gt__bmap_take(struct gt__bmap *m, uint64_t a, uint64_t b,
                  struct gt__bmap_val *out)
{
    uint32_t s = find_slot(m, a, b);
    if (s == UINT32_MAX)
        return 0;
    struct gt__bmap_ent *e = &m->ring[SLOT_RING(m->slots[s]) - 1];
    *out = e->v;
    e->live = 0;
    delete_slot(m, s);
    return 1;
}
