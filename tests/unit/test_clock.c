/*
 * Clock model tests (agent/clock.c): offsets and uncertainty from
 * synthetic sync pairs with jitter and drift, several devices on one host
 * timeline, and monotonic mapping across corrections.
 *
 * Synthetic truth: host = true_off + dev * (1 + drift). Each pair's event
 * happens at a true host time t; the host brackets it with [t - a, t + b]
 * where a and b are random delays (launch and completion latency), so the
 * midpoint is biased by (b - a) / 2 like a real start event.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "agent/clock.h"

static uint64_t rng_state;

static uint64_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Uniform in [0, n). */
static uint64_t rnd(uint64_t n)
{
    return rng() % n;
}

struct truth {
    uint64_t dev0;   /* device time where host == host0 */
    uint64_t host0;
    double rate;     /* host ns per device ns */
};

static uint64_t true_host(const struct truth *t, uint64_t dev)
{
    return t->host0 + (uint64_t)llround((double)(dev - t->dev0) * t->rate);
}

/* Adds one pair for device time dev with latencies up to max_lat ns. */
static void add_jittered(struct gt__clock *c, const struct truth *t,
                         uint64_t dev, uint64_t max_lat)
{
    uint64_t h = true_host(t, dev);
    uint64_t before = 200 + rnd(max_lat);
    uint64_t after = 200 + rnd(max_lat);
    cr_assert_eq(gt__clock_add_pair(c, h - before, h + after, dev), 0);
}

static uint64_t absdiff(uint64_t a, uint64_t b)
{
    return a > b ? a - b : b - a;
}

Test(clock, identity_before_any_pair)
{
    struct gt__clock c;
    gt__clock_init(&c);
    cr_assert_eq(gt__clock_valid(&c), 0);
    cr_assert_eq(gt__clock_map(&c, 12345), 12345);
    cr_assert_eq(gt__clock_offset(&c), 0);
}

Test(clock, rejects_inverted_interval)
{
    struct gt__clock c;
    gt__clock_init(&c);
    cr_assert_eq(gt__clock_add_pair(&c, 100, 99, 5), -EINVAL);
    cr_assert_eq(gt__clock_add_pair(&c, 100, 200, 0), -EINVAL);
    cr_assert_eq(gt__clock_valid(&c), 0);
}

Test(clock, single_pair_offset_and_uncertainty)
{
    struct gt__clock c;
    gt__clock_init(&c);
    /* Device clock 1e15 read while host was in [5e9, 5e9 + 4000]. */
    cr_assert_eq(gt__clock_add_pair(&c, 5000000000ull, 5000004000ull,
                                    1000000000000000ull), 0);
    cr_assert(gt__clock_valid(&c));
    cr_assert_eq(gt__clock_offset(&c),
                 (int64_t)5000002000ll - (int64_t)1000000000000000ll);
    cr_assert_eq(gt__clock_uncertainty(&c), 2000);
    cr_assert_eq(gt__clock_map(&c, 1000000000000000ull), 5000002000ull);
    cr_assert_eq(gt__clock_map(&c, 1000000000001000ull), 5000003000ull);
}

Test(clock, jitter_estimate_within_uncertainty)
{
    rng_state = 0x9e3779b97f4a7c15ull;
    struct truth t = {.dev0 = 7000000000000ull, .host0 = 123456789000ull,
                      .rate = 1.0};
    struct gt__clock c;
    gt__clock_init(&c);
    uint64_t dev = t.dev0;
    uint64_t widest = 0;
    for (int i = 0; i < 40; i++) {
        dev += 50000000 + rnd(1000000); /* ~50 ms apart */
        add_jittered(&c, &t, dev, 20000);
        widest = 20200;
    }
    uint64_t err = absdiff(gt__clock_map(&c, dev), true_host(&t, dev));
    uint64_t unc = gt__clock_uncertainty(&c);
    cr_assert(unc > 0, "uncertainty reported");
    cr_assert(err <= unc, "error %lu within uncertainty %lu",
              (unsigned long)err, (unsigned long)unc);
    /* Combining pairs beats the typical single pair's half-width. */
    cr_assert(unc < widest, "uncertainty %lu below the widest half-width",
              (unsigned long)unc);
    cr_assert(fabs(gt__clock_drift_ppm(&c)) < 5.0, "no drift invented: %f",
              gt__clock_drift_ppm(&c));
}

Test(clock, drift_is_tracked)
{
    rng_state = 0x1234567u;
    /* Device clock 50 ppm slow relative to the host. */
    struct truth t = {.dev0 = 1000000000ull, .host0 = 9000000000000ull,
                      .rate = 1.0 + 50e-6};
    struct gt__clock c;
    gt__clock_init(&c);
    uint64_t dev = t.dev0;
    for (int i = 0; i < 30; i++) {
        dev += 500000000; /* every 0.5 s for 15 s */
        add_jittered(&c, &t, dev, 2000);
    }
    cr_assert(fabs(gt__clock_drift_ppm(&c) - 50.0) < 2.0, "drift %f ppm",
              gt__clock_drift_ppm(&c));
    /*
     * One second past the newest pair a slope-1 model is off by 50 us;
     * the fitted model stays within a few microseconds.
     */
    uint64_t later = dev + 1000000000ull;
    uint64_t err = absdiff(gt__clock_map(&c, later), true_host(&t, later));
    cr_assert(err < 5000, "error after 1 s extrapolation: %lu ns",
              (unsigned long)err);
}

Test(clock, devices_share_one_host_timeline)
{
    rng_state = 42;
    /* Two GPUs whose clocks differ by ~3.7 s and run at different rates. */
    struct truth g0 = {.dev0 = 2000000000000ull, .host0 = 500000000000ull,
                       .rate = 1.0 + 10e-6};
    struct truth g1 = {.dev0 = 2003700000000ull, .host0 = 500000000000ull,
                       .rate = 1.0 - 20e-6};
    struct gt__clock c0, c1;
    gt__clock_init(&c0);
    gt__clock_init(&c1);
    for (int i = 1; i <= 20; i++) {
        add_jittered(&c0, &g0, g0.dev0 + (uint64_t)i * 250000000ull, 3000);
        add_jittered(&c1, &g1, g1.dev0 + (uint64_t)i * 250000000ull, 3000);
    }
    /*
     * An all-reduce finishing at the same host instant on both devices:
     * find each device's timestamp for that instant from the truth and
     * check both map to the same host time within the uncertainties.
     */
    uint64_t host_instant = 500000000000ull + 5100000000ull;
    uint64_t d0 = g0.dev0 + (uint64_t)llround((double)(host_instant - g0.host0) / g0.rate);
    uint64_t d1 = g1.dev0 + (uint64_t)llround((double)(host_instant - g1.host0) / g1.rate);
    uint64_t h0 = gt__clock_map(&c0, d0), h1 = gt__clock_map(&c1, d1);
    uint64_t tol = gt__clock_uncertainty(&c0) + gt__clock_uncertainty(&c1) + 2;
    cr_assert(absdiff(h0, h1) <= tol, "devices disagree by %lu ns (tol %lu)",
              (unsigned long)absdiff(h0, h1), (unsigned long)tol);
    cr_assert(absdiff(h0, host_instant) <= gt__clock_uncertainty(&c0) + 2);
    /* The raw offsets differ by the 3.7 s the clocks differ by. */
    int64_t doff = gt__clock_offset(&c0) - gt__clock_offset(&c1);
    cr_assert(llabs(doff - 3700000000ll) < 200000, "offset difference %lld",
              (long long)doff);
}

Test(clock, monotonic_across_backward_corrections)
{
    rng_state = 7;
    struct gt__clock c;
    gt__clock_init(&c);
    uint64_t dev = 1000000000000ull;
    cr_assert_eq(gt__clock_add_pair(&c, 50000000000ull, 50000001000ull, dev), 0);
    uint64_t last = 0, last_dev = 0;
    uint64_t host_base = 50000000500ull;
    for (int round = 0; round < 200; round++) {
        /* Map a batch of increasing timestamps, as records arrive. */
        for (int k = 0; k < 20; k++) {
            dev += 1 + rnd(20000);
            uint64_t h = gt__clock_map(&c, dev);
            cr_assert(h >= last, "round %d: %lu maps before %lu (dev %lu after %lu)",
                      round, (unsigned long)h, (unsigned long)last,
                      (unsigned long)dev, (unsigned long)last_dev);
            last = h;
            last_dev = dev;
        }
        /*
         * A new pair whose estimate jumps by up to +-50 us: half the time
         * backwards, which must slew rather than step back.
         */
        int64_t jump = (int64_t)rnd(100000) - 50000;
        uint64_t mid = host_base + (dev - 1000000000000ull) + (uint64_t)(jump + 1000000);
        cr_assert_eq(gt__clock_add_pair(&c, mid - 500, mid + 500, dev - rnd(5000)), 0);
    }
    /* Re-mapping already-mapped timestamps gives the same answer. */
    uint64_t probe = dev - 10000;
    uint64_t a = gt__clock_map(&c, probe);
    uint64_t b = gt__clock_map(&c, probe);
    cr_assert_eq(a, b);
}

Test(clock, backward_correction_slews_then_rejoins)
{
    struct gt__clock c;
    gt__clock_init(&c);
    uint64_t d = 10000000000ull;
    cr_assert_eq(gt__clock_add_pair(&c, 1000000, 1000000, d), 0);
    uint64_t before = gt__clock_map(&c, d + 1000000);
    /* Second pair 1 ms later says the host is 10 us behind the model. */
    cr_assert_eq(gt__clock_add_pair(&c, 1990000, 1990000, d + 1000000), 0);
    uint64_t at = gt__clock_map(&c, d + 1000000);
    cr_assert_eq(at, before, "the mapping does not jump at the correction");
    uint64_t prev = at;
    for (uint64_t x = d + 1000000; x < d + 1200000; x += 1000) {
        uint64_t h = gt__clock_map(&c, x);
        cr_assert(h >= prev);
        prev = h;
    }
    /*
     * Two pairs 1 ms apart disagreeing by 1% exceed the believable drift,
     * so the slope stays 1 and the offset is their average: after the slew
     * (4 x the 5 us gap of device time) the mapping is exactly the fit.
     */
    uint64_t far = d + 3000000;
    cr_assert_eq(gt__clock_offset(&c), (int64_t)1995000 - (int64_t)(d + 1000000));
    cr_assert_eq(gt__clock_map(&c, far), 1995000 + 2000000);
}
