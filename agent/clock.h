/*
 * Clock model: maps one foreign clock (a GPU's clock, or the timestamps
 * CUPTI puts in activity records) onto the host's CLOCK_MONOTONIC.
 *
 * Input is a series of sync pairs: a foreign timestamp `dev` known to have
 * been taken while the host clock was inside [host_lo, host_hi] (for a GPU
 * start event: host clock read before cuEventRecord and after
 * cuEventSynchronize returned). The model keeps the last pairs, fits
 * host = ref_host + slope * (dev - ref_dev) by least squares weighted by
 * each pair's precision (tight pairs dominate, as in NTP's minimum-delay
 * filter), and reports the offset at the newest pair plus an uncertainty
 * (half-width of the best pair plus the RMS residual of the fit).
 *
 * Mapping must stay monotonic: a later device timestamp never maps before
 * an earlier one, even when a new pair moves the estimate backwards. The
 * mapping is therefore a continuous piecewise-linear function made of
 * segments that are only ever appended at or after the newest timestamp
 * already mapped: a forward correction steps (a gap never breaks order),
 * a backward correction slews with a positive slope until it rejoins the
 * fit. Timestamps older than the oldest retained segment extrapolate it.
 *
 * Not thread-safe: the owner (agent/cupti.c) serialises access.
 * No allocation: a model is a plain struct the caller embeds.
 */
#ifndef GRADTRACE_AGENT_CLOCK_H
#define GRADTRACE_AGENT_CLOCK_H

#include <stdint.h>

#define GT__CLOCK_PAIRS 32     /* pairs kept for the fit */
#define GT__CLOCK_SEGMENTS 64  /* mapping segments kept */
/* Largest drift believed, relative: beyond this a fit is noise. */
#define GT__CLOCK_MAX_DRIFT 1e-3

struct gt__clock_pair {
    uint64_t dev;
    uint64_t mid;     /* host midpoint */
    uint64_t half;    /* host half-width */
};

struct gt__clock_seg {
    uint64_t dev0;    /* segment applies to dev >= dev0 */
    uint64_t host0;   /* mapping at dev0 */
    double slope;     /* host ns per device ns, > 0 */
};

struct gt__clock {
    struct gt__clock_pair pairs[GT__CLOCK_PAIRS];
    unsigned npairs;  /* valid pairs (<= GT__CLOCK_PAIRS) */
    unsigned next;    /* ring write position */
    /* Current fit: host = fit_host + fit_slope * (dev - fit_dev). */
    uint64_t fit_dev;
    uint64_t fit_host;
    double fit_slope;
    uint64_t uncertainty_ns;
    struct gt__clock_seg segs[GT__CLOCK_SEGMENTS];
    unsigned nsegs;   /* segments in chronological order */
    uint64_t max_mapped; /* newest device timestamp mapped so far */
};

/* Resets c to "no pair yet": gt__clock_map is then the identity. */
void gt__clock_init(struct gt__clock *c);

/*
 * Adds one sync pair and refits.
 * @return 0, or -EINVAL when host_hi < host_lo or dev is 0.
 */
__attribute__((warn_unused_result))
int gt__clock_add_pair(struct gt__clock *c, uint64_t host_lo,
                       uint64_t host_hi, uint64_t dev);

/*
 * Maps a foreign timestamp to host CLOCK_MONOTONIC ns. Monotonic in dev
 * for the lifetime of c (see the file comment). Identity before the first
 * pair. Saturates at 0 and UINT64_MAX.
 */
uint64_t gt__clock_map(struct gt__clock *c, uint64_t dev);

/* @return 1 once a pair has been added, else 0. */
int gt__clock_valid(const struct gt__clock *c);

/* Estimated host - dev at the newest pair, in ns (0 before any pair). */
int64_t gt__clock_offset(const struct gt__clock *c);

/* Uncertainty of the estimate in ns (0 before any pair). */
uint64_t gt__clock_uncertainty(const struct gt__clock *c);

/* Fitted drift in parts per million (host faster than dev: positive). */
double gt__clock_drift_ppm(const struct gt__clock *c);

#endif
