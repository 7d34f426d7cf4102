/*
 * Clock alignment of several ranks (`gradtrace merge`): from the ends of
 * the collectives every rank took part in, the correction that puts one
 * rank's clock onto a reference rank's, and how far it can be trusted.
 *
 * Inputs are times already on a first estimate of the reference clock
 * (each process's CLOCK_MONOTONIC mapped to its own CLOCK_REALTIME by its
 * (monotonic, realtime) pair): what is left to find is each host's
 * realtime error against the reference host's, a constant per rank.
 *
 * Two facts about a collective c that ranks r and q both ran:
 *   - no rank leaves it before every rank has entered it (causality), so
 *     the true correction d_r (added to r's times) satisfies
 *       begin_q - end_r <= d_r - d_q <= end_q - begin_r;
 *     intersected over every c this is a guaranteed interval [lo, hi],
 *     narrow when each rank is sometimes the last to arrive (its begin is
 *     then just before everyone's end: the ends of the collectives, which
 *     the last arrival releases at nearly one instant, are what bound it);
 *   - its ends happen at nearly the same instant on every rank, so
 *     end_q - end_r also estimates d_r - d_q (kept as a check: the median
 *     over c).
 * The estimate is the interval's middle and the uncertainty its half
 * width: a bound the true correction cannot exceed as long as the clocks
 * do not drift against each other over the collectives used (one
 * constant per rank) and each rank's clock reads are where it says.
 * Pure computation, no I/O; internal to the converter library.
 */
#ifndef GRADTRACE_DAEMON_CONV_ALIGN_H
#define GRADTRACE_DAEMON_CONV_ALIGN_H

#include <stddef.h>
#include <stdint.h>

#include "common/codec.h" /* GT__WUR */

/* One collective as one rank saw it, on the first-estimate clock (ns). */
struct gt__align_coll {
    uint32_t group;
    uint64_t seq;
    int64_t begin_ns, end_ns;
};

/* How a rank's correction was found. */
enum {
    GT__ALIGN_REFERENCE = 0,   /* the reference rank itself: 0 exactly */
    GT__ALIGN_COLLECTIVES = 1, /* from collectives shared with the reference */
    GT__ALIGN_REALTIME = 2,    /* none shared: realtime only, correction 0 */
    GT__ALIGN_INCONSISTENT = 3 /* the causal bounds contradict each other
                                * (drift, or mismatched sequence numbers):
                                * the ends' median, uncertainty = their
                                * spread around it */
};

struct gt__align_result {
    int method;                /* GT__ALIGN_* */
    int64_t correction_ns;     /* add to the rank's first-estimate times */
    int64_t uncertainty_ns;    /* -1: unknown (GT__ALIGN_REALTIME) */
    int64_t lo_ns, hi_ns;      /* the causal interval (COLLECTIVES) */
    int64_t end_median_ns;     /* median end difference (a check) */
    int64_t spread_ns;         /* median |end difference - estimate| */
    uint64_t matched;          /* collectives shared with the reference */
};

/*
 * Corrects rank r's clock onto the reference's. ref, r: each rank's
 * collectives, in any order (sorted here: the arrays are modified).
 * @return 0, or -ENOMEM (scratch memory through gt__malloc).
 */
GT__WUR int gt__align_pair(struct gt__align_coll *ref, size_t nref,
                           struct gt__align_coll *r, size_t nr,
                           struct gt__align_result *out);

#endif /* GRADTRACE_DAEMON_CONV_ALIGN_H */
