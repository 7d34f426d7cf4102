/*
 * Bounded maps for the converter's correlations (node creation -> backward
 * node, CUDA correlation id -> launch / external id / pending activity).
 *
 * A two-way set-associative table, like a CPU cache: a key has exactly one
 * bucket of two entries, an insert into a full bucket replaces the older
 * of the two, and nothing is ever probed, shifted or rehashed. Why not a
 * general hash map: the keys are correlation ids and autograd sequence
 * numbers, which count up, and what must go when memory is full is the
 * oldest. With a hash that keeps consecutive keys in consecutive buckets,
 * the table holds exactly the newest `cap` keys of such a sequence, every
 * operation touches one cache line, and hostile keys can only evict each
 * other (counted by the callers), never make an operation slower. (An
 * earlier ring + linear-probing index spent a fifth of the conversion
 * time shifting slots on deletion.) Two ways instead of one keep two
 * interleaved sequences, such as two threads' sequence numbers, from
 * evicting each other where their ranges overlap.
 */
#include <errno.h>

#include "common/alloc.h"
#include "daemon/convert/internal.h"

static uint32_t key_hash(uint64_t a, uint64_t b)
{
    uint64_t h = b + a * 0x9e3779b97f4a7c15ull;
    return (uint32_t)h ^ (uint32_t)(h >> 32);
}

int gt__bmap_init(struct gt__bmap *m, uint32_t cap)
{
    uint32_t buckets = 1;
    memset(m, 0, sizeof(*m));
    if (cap == 0 || cap > (1u << 26))
        return -EINVAL;
    while (2 * buckets < cap)
        buckets *= 2;
    m->e = gt__calloc(2 * (size_t)buckets, sizeof(*m->e));
    if (!m->e)
        return -ENOMEM;
    m->bmask = buckets - 1;
    return 0;
}

void gt__bmap_free(struct gt__bmap *m)
{
    gt__free(m->e);
    memset(m, 0, sizeof(*m));
}

static struct gt__bmap_ent *bucket(const struct gt__bmap *m, uint64_t a,
                                   uint64_t b)
{
    return &m->e[2 * (size_t)(key_hash(a, b) & m->bmask)];
}

int gt__bmap_put(struct gt__bmap *m, uint64_t a, uint64_t b,
                 const struct gt__bmap_val *v)
{
    return gt__bmap_put_old(m, a, b, v, NULL);
}

int gt__bmap_put_old(struct gt__bmap *m, uint64_t a, uint64_t b,
                     const struct gt__bmap_val *v, struct gt__bmap_val *old)
{
    struct gt__bmap_ent *e = bucket(m, a, b), *dst;
    int evicted = 0;
    if (e[0].stamp && e[0].a == a && e[0].b == b) {
        dst = &e[0];
    } else if (e[1].stamp && e[1].a == a && e[1].b == b) {
        dst = &e[1];
    } else {
        /* An empty way, else the older one. */
        dst = !e[0].stamp ? &e[0]
              : !e[1].stamp ? &e[1]
              : e[0].stamp < e[1].stamp ? &e[0] : &e[1];
        evicted = dst->stamp != 0;
        if (evicted && old)
            *old = dst->v;
    }
    dst->a = a;
    dst->b = b;
    dst->v = *v;
    dst->stamp = ++m->stamp;
    return evicted;
}

const struct gt__bmap_val *gt__bmap_get(const struct gt__bmap *m, uint64_t a,
                                        uint64_t b)
{
    const struct gt__bmap_ent *e = bucket(m, a, b);
    if (e[0].stamp && e[0].a == a && e[0].b == b)
        return &e[0].v;
    if (e[1].stamp && e[1].a == a && e[1].b == b)
        return &e[1].v;
    return NULL;
}

struct gt__bmap_val *gt__bmap_find(struct gt__bmap *m, uint64_t a, uint64_t b)
{
    struct gt__bmap_ent *e = bucket(m, a, b);
    if (e[0].stamp && e[0].a == a && e[0].b == b)
        return &e[0].v;
    if (e[1].stamp && e[1].a == a && e[1].b == b)
        return &e[1].v;
    return NULL;
}

int gt__bmap_take(struct gt__bmap *m, uint64_t a, uint64_t b,
                  struct gt__bmap_val *out)
{
    struct gt__bmap_ent *e = bucket(m, a, b);
    for (int i = 0; i < 2; i++) {
        if (e[i].stamp && e[i].a == a && e[i].b == b) {
            *out = e[i].v;
            e[i].stamp = 0;
            return 1;
        }
    }
    return 0;
}
