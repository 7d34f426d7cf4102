/*
 * An open-addressing hash index over a table the caller owns: slots hold
 * entry numbers (index + 1; 0 is an empty slot), probed linearly from
 * hash & mask. Entries are never deleted one by one: a table that moves
 * its entries (a sort) clears the index and inserts them again.
 *
 * The index knows no key: gt__index_find asks the caller's eq whether an
 * entry is the one looked for, so the key (a path, a tid) stays in the
 * caller's table, once. It is static inline, so a constant eq is inlined:
 * a lookup costs what the hand-written loop it replaces cost.
 *
 * Probing ends at an empty slot, so the index must never fill up: the
 * caller keeps it at most half full (a fixed table sized twice its cap,
 * or gt__index_init again with more slots and every entry re-inserted).
 *
 * The converter's tables by path (layers.c, agg.c) and by OS tid
 * (threads.c) use it. Not thread-safe.
 */
#ifndef GRADTRACE_DAEMON_CONV_INDEX_H
#define GRADTRACE_DAEMON_CONV_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "common/codec.h"

#define GT__INDEX_NONE UINT32_MAX

struct gt__index {
    uint32_t *slot;     /* entry + 1, 0 empty; NULL until gt__index_init */
    uint32_t mask;      /* slots - 1 */
};

/* Makes an empty index of nslots slots, freeing any it had. @return 0,
 * -EINVAL (nslots not a power of two >= 2) or -ENOMEM; on an error the
 * index is left as it was. */
GT__WUR int gt__index_init(struct gt__index *ix, size_t nslots);
/* Frees the slots (the index reads as never made). */
void gt__index_free(struct gt__index *ix);
/* Whether gt__index_init has made it. */
static inline int gt__index_ready(const struct gt__index *ix)
{
    return ix->slot != NULL;
}
/* Its number of slots (0 before gt__index_init). */
static inline size_t gt__index_slots(const struct gt__index *ix)
{
    return ix->slot ? (size_t)ix->mask + 1 : 0;
}

/*
 * The entry with this hash that eq(ctx, entry) accepts, or GT__INDEX_NONE.
 * *slot (may be NULL) receives where it is, or the empty slot where an
 * entry of this hash would go (gt__index_set). The index must be made.
 */
static inline uint32_t gt__index_find(const struct gt__index *ix,
                                      uint32_t hash,
                                      int (*eq)(const void *ctx,
                                                uint32_t entry),
                                      const void *ctx, uint32_t *slot)
{
    uint32_t i = hash & ix->mask;
    for (;; i = (i + 1) & ix->mask) {
        uint32_t e = ix->slot[i];
        if (e == 0 || eq(ctx, e - 1)) {
            if (slot)
                *slot = i;
            return e ? e - 1 : GT__INDEX_NONE;
        }
    }
}

/* Puts entry at slot, an empty slot gt__index_find returned with no
 * insertion since. */
static inline void gt__index_set(struct gt__index *ix, uint32_t slot,
                                 uint32_t entry)
{
    ix->slot[slot] = entry + 1;
}

/* Puts entry at the first empty slot from its hash (an entry known not
 * to be in the index yet, or a table being re-indexed). */
static inline void gt__index_insert(struct gt__index *ix, uint32_t hash,
                                    uint32_t entry)
{
    uint32_t i = hash & ix->mask;
    while (ix->slot[i])
        i = (i + 1) & ix->mask;
    ix->slot[i] = entry + 1;
}

#endif /* GRADTRACE_DAEMON_CONV_INDEX_H */
