/*
 * Which iterations `gradtrace report` leaves out of its table by default
 * (report.h, gt__report_warmup): warm-up and outliers, chosen from the
 * iterations' durations alone, the way one reads a column of step times.
 *
 * The first iteration of a run pays for everything done once: lazy
 * initialisation, allocator growth, kernel selection, torch.compile's
 * compilation (seconds, against milliseconds per step). Later ones can
 * too (a recompilation, a checkpoint saved inside a step, a collector
 * pause). Counting them makes every mean, share and hint about them, not
 * about training. The rule, also in schema/report.md:
 *
 *  - the first iteration (in time order) is warm-up when it took more than
 *    WARM_RATIO times the median of the others: it is always considered,
 *    so that even a run of two iterations loses its compilation;
 *  - any iteration is an outlier when it took more than WARM_RATIO times
 *    the median of all and more than the median + OUT_Z robust standard
 *    deviations (1.4826 x the median absolute deviation): the modified
 *    z-score above 3.5 of Iglewicz and Hoaglin, on the slow side only, and
 *    never for noise within half the median on a loaded machine.
 *
 * The median is never above itself, so at least half the iterations stay;
 * a run of one iteration, or of equal ones, loses none. The median of an
 * even count is the mean of its two middle values.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "daemon/cli/report.h"

#define WARM_RATIO 1.5
#define OUT_Z 3.5
#define MAD_TO_SD 1.4826

static int cmp_double(const void *pa, const void *pb)
{
    double x = *(const double *)pa, y = *(const double *)pb;
    return x < y ? -1 : x > y ? 1 : 0;
}

/* The median of v[0..n), n > 0; v is sorted in place. */
static double median(double *v, size_t n)
{
    qsort(v, n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int gt__report_warmup(const double *dur, size_t n, unsigned char *out,
                      struct gt__rep_warm *w)
{
    double *v = n ? gt__malloc(n * sizeof(*v)) : NULL;
    memset(out, 0, n);
    memset(w, 0, sizeof(*w));
    if (n < 2)
        goto out_free;
    if (!v)
        return -ENOMEM;
    memcpy(v, dur + 1, (n - 1) * sizeof(*v));
    double others = median(v, n - 1);
    memcpy(v, dur, n * sizeof(*v));
    double m = median(v, n);
    for (size_t i = 0; i < n; i++)
        v[i] = dur[i] > m ? dur[i] - m : m - dur[i];
    double sd = MAD_TO_SD * median(v, n);
    w->median_us = m;
    for (size_t i = 0; i < n; i++) {
        int warm = i == 0 && dur[0] > WARM_RATIO * others;
        int outlier = dur[i] > WARM_RATIO * m && dur[i] > m + OUT_Z * sd;
        if (!warm && !outlier)
            continue;
        out[i] = 1;
        w->n++;
        w->us += dur[i];
    }
out_free:
    gt__free(v);
    return 0;
}
