/*
 * Clock model (see clock.h for the contract).
 *
 * Arithmetic: absolute nanosecond times exceed a double's 53-bit mantissa,
 * so every computation in floating point works on differences from a
 * reference timestamp (the newest pair) and results are added back in
 * 64-bit integers. Rounding happens once per mapped value; segment joints
 * are computed with the same formula as the mapping so continuity is exact
 * to the nanosecond and rounding can never make the mapping step back.
 */
#include "agent/clock.h"

#include <errno.h>
#include <string.h>

/*
 * The agent links no libm (it loads into any process with a fixed set of
 * dependencies), so the three functions needed are written out here.
 * Inputs are bounded well inside the int64 range by the callers.
 */
static double round_half_away(double x)
{
    if (x >= 9.2e18 || x <= -9.2e18)
        return x;
    return x >= 0 ? (double)(int64_t)(x + 0.5) : -(double)(int64_t)(-x + 0.5);
}

static double ceil_pos(double x)
{
    if (x >= 9.2e18)
        return x;
    double t = (double)(int64_t)x;
    return t < x ? t + 1.0 : t;
}

static double sqrt_pos(double x)
{
    if (!(x > 0))
        return 0;
    double r = x > 1 ? x / 2 : 1;
    for (int i = 0; i < 200; i++) {
        double n = 0.5 * (r + x / r);
        if (n == r || (n > r ? n - r : r - n) < 1e-9 * r)
            return n;
        r = n;
    }
    return r;
}

static double abs_d(double x)
{
    return x < 0 ? -x : x;
}

void gt__clock_init(struct gt__clock *c)
{
    memset(c, 0, sizeof(*c));
    c->fit_slope = 1.0;
}

int gt__clock_valid(const struct gt__clock *c)
{
    return c->npairs > 0;
}

int64_t gt__clock_offset(const struct gt__clock *c)
{
    if (!c->npairs)
        return 0;
    return (int64_t)(c->fit_host - c->fit_dev);
}

uint64_t gt__clock_uncertainty(const struct gt__clock *c)
{
    return c->uncertainty_ns;
}

double gt__clock_drift_ppm(const struct gt__clock *c)
{
    return (c->fit_slope - 1.0) * 1e6;
}

/* base + round(delta), saturating at the ends of the uint64 range. */
static uint64_t add_delta(uint64_t base, double delta)
{
    double r = round_half_away(delta);
    if (r >= 0) {
        if (r >= 18446744073709549568.0 || (uint64_t)r > UINT64_MAX - base)
            return UINT64_MAX;
        return base + (uint64_t)r;
    }
    if (-r >= 18446744073709549568.0 || (uint64_t)(-r) > base)
        return 0;
    return base - (uint64_t)(-r);
}

static double diff(uint64_t a, uint64_t b)
{
    return a >= b ? (double)(a - b) : -(double)(b - a);
}

static uint64_t seg_eval(const struct gt__clock_seg *s, uint64_t dev)
{
    return add_delta(s->host0, s->slope * diff(dev, s->dev0));
}

static uint64_t fit_eval(const struct gt__clock *c, uint64_t dev)
{
    return add_delta(c->fit_host, c->fit_slope * diff(dev, c->fit_dev));
}

/* Index of the last segment with dev0 <= dev, or 0 when dev precedes all. */
static unsigned seg_find(const struct gt__clock *c, uint64_t dev)
{
    unsigned lo = 0, hi = c->nsegs;
    while (hi - lo > 1) {
        unsigned mid = lo + (hi - lo) / 2;
        if (c->segs[mid].dev0 <= dev)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

static uint64_t map_raw(const struct gt__clock *c, uint64_t dev)
{
    if (!c->nsegs)
        return dev;
    return seg_eval(&c->segs[seg_find(c, dev)], dev);
}

/*
 * Appends a segment; one starting where the last starts replaces it (no
 * value beyond its start has been handed out, see seg_update). A full
 * ring forgets its oldest segment.
 */
static void seg_push(struct gt__clock *c, uint64_t dev0, uint64_t host0,
                     double slope)
{
    if (c->nsegs && c->segs[c->nsegs - 1].dev0 == dev0) {
        c->segs[c->nsegs - 1] = (struct gt__clock_seg){dev0, host0, slope};
        return;
    }
    if (c->nsegs == GT__CLOCK_SEGMENTS) {
        memmove(&c->segs[0], &c->segs[1],
                (GT__CLOCK_SEGMENTS - 1) * sizeof(c->segs[0]));
        c->nsegs--;
    }
    c->segs[c->nsegs++] = (struct gt__clock_seg){dev0, host0, slope};
}

/*
 * Joins the mapping to the new fit from the newest point anything may
 * already have been mapped at. Forward corrections step; backward ones
 * slew at 3/4 of the fitted rate until the fit is rejoined, which takes
 * 4 * |gap| of device time.
 */
static void seg_update(struct gt__clock *c, uint64_t newest_dev)
{
    uint64_t d = newest_dev;
    if (c->max_mapped > d)
        d = c->max_mapped;
    if (c->nsegs && c->segs[c->nsegs - 1].dev0 > d)
        d = c->segs[c->nsegs - 1].dev0;

    uint64_t target = fit_eval(c, d);
    if (!c->nsegs) {
        seg_push(c, d, target, c->fit_slope);
        return;
    }
    uint64_t cur = map_raw(c, d);
    if (target >= cur) {
        seg_push(c, d, target, c->fit_slope);
        return;
    }
    double gap = (double)(cur - target);
    double slew = 0.75 * c->fit_slope;
    double w = ceil_pos(4.0 * gap / c->fit_slope);
    seg_push(c, d, cur, slew);
    if (w >= 1.8e19 || (uint64_t)w > UINT64_MAX - d)
        return; /* cannot rejoin within the clock's range: keep slewing */
    struct gt__clock_seg *s = &c->segs[c->nsegs - 1];
    uint64_t d2 = d + (uint64_t)w;
    seg_push(c, d2, seg_eval(s, d2), c->fit_slope);
}

/* Weighted least-squares fit over the stored pairs, see clock.h. */
static void refit(struct gt__clock *c, const struct gt__clock_pair *ref)
{
    double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0, minx = 0, maxx = 0;
    uint64_t best_half = UINT64_MAX;
    for (unsigned i = 0; i < c->npairs; i++) {
        const struct gt__clock_pair *p = &c->pairs[i];
        double h = (double)p->half + 1.0;
        double w = 1.0 / (h * h);
        double x = diff(p->dev, ref->dev);
        double y = diff(p->mid, ref->mid);
        sw += w;
        sx += w * x;
        sy += w * y;
        sxx += w * x * x;
        sxy += w * x * y;
        if (x < minx)
            minx = x;
        if (x > maxx)
            maxx = x;
        if (p->half < best_half)
            best_half = p->half;
    }
    double mx = sx / sw, my = sy / sw;
    double vxx = sxx / sw - mx * mx;
    double slope = 1.0;
    /*
     * Drift only shows over a span much longer than the pairs' widths;
     * below 1 ms of spread a fitted slope would be jitter, and beyond the
     * largest believable drift it is an outlier, so both keep slope 1.
     */
    if (c->npairs >= 2 && maxx - minx >= 1e6 && vxx > 0) {
        double b = (sxy / sw - mx * my) / vxx;
        if (abs_d(b - 1.0) <= GT__CLOCK_MAX_DRIFT)
            slope = b;
    }
    double a = my - slope * mx; /* host - ref.mid at dev == ref.dev */
    double sr = 0;
    for (unsigned i = 0; i < c->npairs; i++) {
        const struct gt__clock_pair *p = &c->pairs[i];
        double h = (double)p->half + 1.0;
        double r = diff(p->mid, ref->mid) - (a + slope * diff(p->dev, ref->dev));
        sr += r * r / (h * h);
    }
    c->fit_dev = ref->dev;
    c->fit_host = add_delta(ref->mid, a);
    c->fit_slope = slope;
    c->uncertainty_ns = best_half + (uint64_t)ceil_pos(sqrt_pos(sr / sw));
}

int gt__clock_add_pair(struct gt__clock *c, uint64_t host_lo,
                       uint64_t host_hi, uint64_t dev)
{
    if (host_hi < host_lo || dev == 0)
        return -EINVAL;
    struct gt__clock_pair p = {
        .dev = dev,
        .mid = host_lo + (host_hi - host_lo) / 2,
        .half = (host_hi - host_lo + 1) / 2,
    };
    c->pairs[c->next] = p;
    c->next = (c->next + 1) % GT__CLOCK_PAIRS;
    if (c->npairs < GT__CLOCK_PAIRS)
        c->npairs++;
    refit(c, &p);
    seg_update(c, dev);
    return 0;
}

uint64_t gt__clock_map(struct gt__clock *c, uint64_t dev)
{
    if (dev > c->max_mapped)
        c->max_mapped = dev;
    return map_raw(c, dev);
}
