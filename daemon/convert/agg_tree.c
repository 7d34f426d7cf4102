/*
 * The aggregation's rows (agg.h): found by path through an index
 * (index.h, FNV-1a), arranged in the module tree, and sorted.
 *
 * The tree comes from the parent each backward span names, else from the
 * longest path prefix that has a row (a root module is named by its
 * class, its children by their own paths); untrusted parents may form a
 * cycle, which is cut. Model order lists a row after its ancestors,
 * siblings by their first forward call.
 */
#include <errno.h>
#include <stdlib.h>

#include "common/alloc.h"
#include "common/util.h"
#include "daemon/convert/agg.h"

/* ------------------------------------------------------------ rows */

/* (Re)builds the index for twice the rows' capacity. @return 0 or -ENOMEM. */
static int index_build(struct gt__agg *a, size_t cap)
{
    size_t ns = 64;
    while (ns < 2 * cap)
        ns *= 2;
    if (gt__index_init(&a->ix, ns))
        return -ENOMEM;
    for (size_t r = 0; r < a->n; r++) {
        const char *p = a->layers[r].path;
        gt__index_insert(&a->ix, gt__fnv1a32(p, strlen(p)), (uint32_t)r);
    }
    return 0;
}

struct path_key {
    const struct gt__agg *a;
    const char *path;
    size_t len;
};

static int row_is(const void *ctx, uint32_t r)
{
    const struct path_key *k = ctx;
    const char *p = k->a->layers[r].path;
    return strlen(p) == k->len && memcmp(p, k->path, k->len) == 0;
}

struct gt__agg_layer *gt__agg_row_get(struct gt__agg *a, const char *path,
                                      size_t len)
{
    const struct path_key k = {a, path, len};
    uint32_t i;
    if (!gt__index_ready(&a->ix) && index_build(a, a->cap))
        return NULL;
    uint32_t r = gt__index_find(&a->ix, gt__fnv1a32(path, len), row_is, &k,
                                &i);
    if (r != GT__INDEX_NONE)
        return &a->layers[r];
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        struct gt__agg_layer *nl = gt__realloc(a->layers, cap * sizeof(*nl));
        if (!nl)
            return NULL;
        a->layers = nl;
        a->cap = cap;
    }
    struct gt__agg_layer *l = &a->layers[a->n];
    memset(l, 0, sizeof(*l));
    if (!(l->path = gt__malloc(len + 1)))
        return NULL;
    memcpy(l->path, path, len);
    l->path[len] = '\0';
    l->first_fwd_ts = -1;
    l->first_ts = -1;
    l->up = -1;
    a->n++;
    /* The new row goes where the probe ended, or into a larger index. */
    if (2 * a->n > gt__index_slots(&a->ix)) {
        if (index_build(a, a->cap)) {
            gt__free(l->path);
            a->n--;
            return NULL;
        }
    } else {
        gt__index_set(&a->ix, i, (uint32_t)(a->n - 1));
    }
    return l;
}

/* ------------------------------------------------------------ tree */

/* The row of path (len bytes), or -1. */
static long row_find(struct gt__agg *a, const char *path, size_t len)
{
    const struct path_key k = {a, path, len};
    if (!gt__index_ready(&a->ix) && index_build(a, a->cap))
        return -1;
    uint32_t r = gt__index_find(&a->ix, gt__fnv1a32(path, len), row_is, &k,
                                NULL);
    return r == GT__INDEX_NONE ? -1 : (long)r;
}

/* Row r's parent: the one its backward spans name, else the longest path
 * prefix that has a row. @return the row, or -1. */
static long parent_of(struct gt__agg *a, size_t r)
{
    const struct gt__agg_layer *l = &a->layers[r];
    long p = l->parent ? row_find(a, l->parent, strlen(l->parent)) : -1;
    for (size_t n = strlen(l->path); p < 0 && n > 1; n--)
        if (l->path[n - 1] == '.')
            p = row_find(a, l->path, n - 1);
    return p == (long)r ? -1 : p;
}

/* Sets every row's up and depth. Untrusted parents could form a cycle: a
 * walk longer than the table cuts the row it started from loose. */
static void tree_resolve(struct gt__agg *a)
{
    for (size_t r = 0; r < a->n; r++)
        a->layers[r].up = parent_of(a, r);
    for (size_t r = 0; r < a->n; r++) {
        size_t steps = 0;
        for (long q = a->layers[r].up; q >= 0; q = a->layers[q].up)
            if (++steps > a->n) {
                a->layers[r].up = -1;
                break;
            }
    }
    for (size_t r = 0; r < a->n; r++) {
        int d = 0;
        for (long q = a->layers[r].up; q >= 0; q = a->layers[q].up)
            d++;
        a->layers[r].depth = d;
    }
}

/* Row indexes, deepest first: children before their parents. */
static size_t *by_depth(const struct gt__agg *a)
{
    size_t *ix = gt__malloc((a->n ? a->n : 1) * sizeof(*ix)), k = 0;
    int maxd = 0;
    if (!ix)
        return NULL;
    for (size_t r = 0; r < a->n; r++)
        if (a->layers[r].depth > maxd)
            maxd = a->layers[r].depth;
    for (int d = maxd; d >= 0; d--)
        for (size_t r = 0; r < a->n; r++)
            if (a->layers[r].depth == d)
                ix[k++] = r;
    return ix;
}

const size_t *gt__agg_tree(struct gt__agg *a)
{
    if (a->tree_n == a->n + 1 && !a->tree_dirty && a->tree_ix)
        return a->tree_ix;
    tree_resolve(a);
    gt__free(a->tree_ix);
    a->tree_ix = by_depth(a);
    a->tree_n = a->tree_ix ? a->n + 1 : 0;
    a->tree_dirty = 0;
    return a->tree_ix;
}

/* ------------------------------------------------------------ order */

static int by_fwd(const void *pa, const void *pb)
{
    const struct gt__agg_layer *x = pa, *y = pb;
    return x->fwd_us < y->fwd_us ? 1 : x->fwd_us > y->fwd_us ? -1 : 0;
}

static int by_bwd(const void *pa, const void *pb)
{
    const struct gt__agg_layer *x = pa, *y = pb;
    return x->bwd_us < y->bwd_us ? 1 : x->bwd_us > y->bwd_us ? -1 : 0;
}

static int by_name(const void *pa, const void *pb)
{
    const struct gt__agg_layer *x = pa, *y = pb;
    return strcmp(x->path, y->path);
}

/* One row in model order: its parent's entry and the key siblings sort by:
 * tier 0, its first forward call (a container's first child's); tier 1,
 * no forward (a backward window, a parameter-only module): its first
 * backward span, latest first, since backward runs the model in reverse;
 * tier 2, neither: by path. */
struct ord_ent {
    size_t row;
    const struct ord_ent *up;
    int depth;
    int tier;
    double key;
    const char *path;
};

static int sibling_cmp(const struct ord_ent *x, const struct ord_ent *y)
{
    if (x->tier != y->tier)
        return x->tier < y->tier ? -1 : 1;
    if (x->tier < 2 && x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return strcmp(x->path, y->path);
}

/* Depth-first: a row after its ancestors, subtrees by their roots. */
static int by_tree(const void *pa, const void *pb)
{
    const struct ord_ent *x = *(const struct ord_ent *const *)pa;
    const struct ord_ent *y = *(const struct ord_ent *const *)pb;
    while (x->depth > y->depth) {
        x = x->up;
        if (x == y)
            return 1;
    }
    while (y->depth > x->depth) {
        y = y->up;
        if (x == y)
            return -1;
    }
    while (x->up != y->up) {
        x = x->up;
        y = y->up;
    }
    return x == y ? 0 : sibling_cmp(x, y);
}

/* Puts the rows in model order. @return 0 or -ENOMEM (order unchanged). */
static int sort_model(struct gt__agg *a)
{
    int rc = -ENOMEM;
    tree_resolve(a);
    struct ord_ent *e = gt__calloc(a->n, sizeof(*e));
    const struct ord_ent **pe = gt__calloc(a->n, sizeof(*pe));
    struct gt__agg_layer *nl = gt__malloc(a->n * sizeof(*nl));
    size_t *ix = by_depth(a);
    if (!e || !pe || !nl || !ix)
        goto out_free;
    for (size_t r = 0; r < a->n; r++) {
        const struct gt__agg_layer *l = &a->layers[r];
        long up = l->up;
        int fwd = l->first_fwd_ts >= 0, bwd = !fwd && l->first_ts >= 0;
        e[r] = (struct ord_ent){.row = r, .up = up >= 0 ? &e[up] : NULL,
                                .depth = l->depth, .path = l->path,
                                .tier = fwd ? 0 : bwd ? 1 : 2,
                                .key = fwd ? l->first_fwd_ts : -l->first_ts};
        pe[r] = &e[r];
    }
    for (size_t k = 0; k < a->n; k++) {
        const struct ord_ent *c = &e[ix[k]];
        struct ord_ent *p = (struct ord_ent *)c->up;
        if (p && c->tier == 0 && a->layers[p->row].fwd_calls == 0 &&
            (p->tier != 0 || c->key < p->key)) {
            p->tier = 0;
            p->key = c->key;
        }
    }
    qsort(pe, a->n, sizeof(*pe), by_tree);
    for (size_t k = 0; k < a->n; k++)
        nl[k] = a->layers[pe[k]->row];
    memcpy(a->layers, nl, a->n * sizeof(*nl));
    rc = 0;
out_free:
    gt__free(e);
    gt__free(pe);
    gt__free(nl);
    gt__free(ix);
    return rc;
}

void gt__agg_sort(struct gt__agg *a, enum gt__agg_order order)
{
    static int (*const cmp[])(const void *, const void *) = {
        [GT__AGG_FWD] = by_fwd,
        [GT__AGG_BWD] = by_bwd,
        [GT__AGG_NAME] = by_name,
    };
    if (a->n == 0 || (unsigned)order > GT__AGG_NAME)
        return;
    if (order == GT__AGG_MODEL)
        (void)sort_model(a);
    else
        qsort(a->layers, a->n, sizeof(*a->layers), cmp[order]);
    /* Rows moved: the index is rebuilt by the next lookup. */
    gt__index_free(&a->ix);
    tree_resolve(a); /* rows moved: up again by index */
    a->tree_dirty = 1; /* and gt__agg_tree's order with them */
}

/* ------------------------------------------------------------ lookup */

const struct gt__agg_layer *gt__agg_find(struct gt__agg *a, const char *path)
{
    long r = row_find(a, path, strlen(path));
    return r >= 0 ? &a->layers[r] : NULL;
}
