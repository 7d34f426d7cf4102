/*
 * Clock alignment from collectives (align.h says what is computed and
 * why it can be trusted). Both ranks' collectives are sorted by (group,
 * seq) and joined; each shared collective narrows the causal interval and
 * adds one end difference to the check median.
 */
#include "daemon/convert/align.h"

#include <errno.h>
#include <stdlib.h>

#include "common/alloc.h"

static int coll_cmp(const void *a, const void *b)
{
    const struct gt__align_coll *x = a, *y = b;
    if (x->group != y->group)
        return x->group < y->group ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int i64_cmp(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static int64_t abs64(int64_t v)
{
    return v < 0 ? -v : v;
}

/* Median of v[0..n) (sorted here), n > 0. */
static int64_t median(int64_t *v, size_t n)
{
    qsort(v, n, sizeof(*v), i64_cmp);
    return n % 2 ? v[n / 2] : v[n / 2 - 1] + (v[n / 2] - v[n / 2 - 1]) / 2;
}

/* The spread: median of |d[i] - est|, d overwritten. */
static int64_t spread(int64_t *d, size_t n, int64_t est)
{
    for (size_t i = 0; i < n; i++)
        d[i] = abs64(d[i] - est);
    return median(d, n);
}

static void solve(int64_t *d, size_t m, int64_t lo, int64_t hi,
                  struct gt__align_result *out)
{
    int64_t end_median = median(d, m);
    out->matched = m;
    out->lo_ns = lo;
    out->hi_ns = hi;
    out->end_median_ns = end_median;
    if (lo > hi) {
        out->method = GT__ALIGN_INCONSISTENT;
        out->correction_ns = end_median;
        out->spread_ns = spread(d, m, end_median);
        out->uncertainty_ns = out->spread_ns;
        return;
    }
    /* The interval's middle: the estimate whose guaranteed error is the
     * smallest. The ends' median is kept beside it as a check (a gap
     * between the two says the ranks leave a collective at systematically
     * different times, e.g. the one hosting the store). */
    out->method = GT__ALIGN_COLLECTIVES;
    out->correction_ns = lo / 2 + hi / 2 + (lo % 2 + hi % 2) / 2; /* no overflow */
    out->uncertainty_ns = hi - out->correction_ns;
    out->spread_ns = spread(d, m, out->correction_ns);
}

int gt__align_pair(struct gt__align_coll *ref, size_t nref,
                   struct gt__align_coll *r, size_t nr,
                   struct gt__align_result *out)
{
    size_t i = 0, j = 0, m = 0;
    int64_t lo = INT64_MIN, hi = INT64_MAX;
    int64_t *d;

    *out = (struct gt__align_result){.method = GT__ALIGN_REALTIME,
                                     .uncertainty_ns = -1};
    if (nref == 0 || nr == 0)
        return 0;
    d = gt__malloc((nref < nr ? nref : nr) * sizeof(*d));
    if (!d)
        return -ENOMEM;
    qsort(ref, nref, sizeof(*ref), coll_cmp);
    qsort(r, nr, sizeof(*r), coll_cmp);
    while (i < nref && j < nr) {
        int c = coll_cmp(&ref[i], &r[j]);
        if (c < 0) {
            i++;
        } else if (c > 0) {
            j++;
        } else {
            const struct gt__align_coll *a = &ref[i++], *b = &r[j++];
            /* d_r lies in [a.begin - b.end, a.end - b.begin]. */
            if (a->begin_ns - b->end_ns > lo)
                lo = a->begin_ns - b->end_ns;
            if (a->end_ns - b->begin_ns < hi)
                hi = a->end_ns - b->begin_ns;
            d[m++] = a->end_ns - b->end_ns;
        }
    }
    if (m)
        solve(d, m, lo, hi, out);
    gt__free(d);
    return 0;
}
