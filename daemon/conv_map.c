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

static uint32_t key_hash(uint64_t a, uint64_t b)
{
    uint64_t h = a * 0x9e3779b97f4a7c15ull ^ b;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return (uint32_t)h;
}

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
    uint32_t i = key_hash(a, b) & m->mask;
    for (;;) {
        uint32_t r = m->slots[i];
        if (r == 0)
            return UINT32_MAX;
        const struct gt__bmap_ent *e = &m->ring[r - 1];
        if (e->a == a && e->b == b)
            return i;
        i = (i + 1) & m->mask;
    }
}

/* Deletes slot i, shifting later entries of the probe run back. */
static void delete_slot(struct gt__bmap *m, uint32_t i)
{
    uint32_t j = i;
    for (;;) {
        j = (j + 1) & m->mask;
        uint32_t r = m->slots[j];
        if (r == 0)
            break;
        const struct gt__bmap_ent *e = &m->ring[r - 1];
        uint32_t home = key_hash(e->a, e->b) & m->mask;
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
        m->ring[m->slots[s] - 1].v = *v;
        return 0;
    }
    struct gt__bmap_ent *e = &m->ring[m->head];
    if (e->live) {
        uint32_t old = find_slot(m, e->a, e->b);
        if (old != UINT32_MAX)
            delete_slot(m, old);
        evicted = 1;
    }
    e->a = a;
    e->b = b;
    e->v = *v;
    e->live = 1;
    uint32_t i = key_hash(a, b) & m->mask;
    while (m->slots[i] != 0)
        i = (i + 1) & m->mask;
    m->slots[i] = m->head + 1;
    m->head = m->head + 1 == m->cap ? 0 : m->head + 1;
    return evicted;
}

const struct gt__bmap_val *gt__bmap_get(const struct gt__bmap *m, uint64_t a,
                                        uint64_t b)
{
    uint32_t s = find_slot(m, a, b);
    return s == UINT32_MAX ? NULL : &m->ring[m->slots[s] - 1].v;
}

int gt__bmap_take(struct gt__bmap *m, uint64_t a, uint64_t b,
                  struct gt__bmap_val *out)
{
    uint32_t s = find_slot(m, a, b);
    if (s == UINT32_MAX)
        return 0;
    struct gt__bmap_ent *e = &m->ring[m->slots[s] - 1];
    *out = e->v;
    e->live = 0;
    delete_slot(m, s);
    return 1;
}
