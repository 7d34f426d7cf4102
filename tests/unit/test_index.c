/*
 * The converter's open-addressing index (daemon/convert/index.h): entries
 * found by the caller's key, colliding hashes probed past each other, a
 * table re-indexed in a larger index keeps every entry, the empty slot a
 * miss returns is where the entry goes, and bad sizes are refused.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "daemon/convert/index.h"

/* A caller's table: the keys live here, the index holds their numbers. */
struct table {
    char keys[512][16];
    uint32_t n;
    struct gt__index ix;
};

struct key {
    const struct table *t;
    const char *k;
};

static int key_is(const void *ctx, uint32_t e)
{
    const struct key *k = ctx;
    return strcmp(k->t->keys[e], k->k) == 0;
}

/* A poor hash on purpose: many keys share a slot. */
static uint32_t weak_hash(const char *k)
{
    return (uint32_t)strlen(k);
}

static uint32_t find(const struct table *t, const char *k, uint32_t *slot)
{
    const struct key key = {t, k};
    return gt__index_find(&t->ix, weak_hash(k), key_is, &key, slot);
}

/* Adds k (not present) the way the converter's tables do. */
static void add(struct table *t, const char *k)
{
    uint32_t slot;
    cr_assert_eq(find(t, k, &slot), GT__INDEX_NONE, "%s already there", k);
    snprintf(t->keys[t->n], sizeof(t->keys[0]), "%s", k);
    gt__index_set(&t->ix, slot, t->n++);
}

Test(index, finds_what_was_added_past_collisions)
{
    struct table t = {.n = 0};
    char k[16];
    cr_assert_eq(gt__index_init(&t.ix, 256), 0);
    cr_assert(gt__index_ready(&t.ix));
    cr_assert_eq(gt__index_slots(&t.ix), 256);
    for (int i = 0; i < 100; i++) {
        snprintf(k, sizeof(k), "k%d", i);
        add(&t, k);
    }
    for (int i = 0; i < 100; i++) {
        snprintf(k, sizeof(k), "k%d", i);
        cr_assert_eq(find(&t, k, NULL), (uint32_t)i, "%s", k);
    }
    cr_assert_eq(find(&t, "k100", NULL), GT__INDEX_NONE);
    cr_assert_eq(find(&t, "absent", NULL), GT__INDEX_NONE);
    gt__index_free(&t.ix);
    cr_assert(!gt__index_ready(&t.ix));
    cr_assert_eq(gt__index_slots(&t.ix), 0);
}

Test(index, a_miss_gives_the_slot_the_entry_takes)
{
    struct table t = {.n = 0};
    uint32_t slot, again;
    cr_assert_eq(gt__index_init(&t.ix, 8), 0);
    add(&t, "ab");
    cr_assert_eq(find(&t, "cd", &slot), GT__INDEX_NONE);
    cr_assert_eq(slot, 3u, "probed past the entry in slot 2");
    add(&t, "cd");
    cr_assert_eq(find(&t, "cd", &again), 1u);
    cr_assert_eq(again, slot);
    gt__index_free(&t.ix);
}

Test(index, reindexing_in_more_slots_keeps_every_entry)
{
    struct table t = {.n = 0};
    char k[16];
    cr_assert_eq(gt__index_init(&t.ix, 16), 0);
    for (int i = 0; i < 8; i++) {
        snprintf(k, sizeof(k), "row%d", i);
        add(&t, k);
    }
    /* Half full: a larger index, every entry inserted again. */
    cr_assert_eq(gt__index_init(&t.ix, 64), 0);
    for (uint32_t e = 0; e < t.n; e++)
        gt__index_insert(&t.ix, weak_hash(t.keys[e]), e);
    for (int i = 8; i < 32; i++) {
        snprintf(k, sizeof(k), "row%d", i);
        add(&t, k);
    }
    for (int i = 0; i < 32; i++) {
        snprintf(k, sizeof(k), "row%d", i);
        cr_assert_eq(find(&t, k, NULL), (uint32_t)i, "%s", k);
    }
    gt__index_free(&t.ix);
}

Test(index, refuses_sizes_that_are_no_power_of_two)
{
    struct gt__index ix = {0};
    cr_assert_eq(gt__index_init(&ix, 0), -EINVAL);
    cr_assert_eq(gt__index_init(&ix, 1), -EINVAL);
    cr_assert_eq(gt__index_init(&ix, 48), -EINVAL);
    cr_assert(!gt__index_ready(&ix), "left as it was");
    cr_assert_eq(gt__index_init(&ix, 2), 0);
    cr_assert_eq(gt__index_init(&ix, 96), -EINVAL);
    cr_assert_eq(gt__index_slots(&ix), 2, "an error keeps the index it had");
    gt__index_free(&ix);
    gt__index_free(&ix); /* twice is fine */
}
