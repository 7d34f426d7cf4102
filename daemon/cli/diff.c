/*
 * `gradtrace diff BASE NEW`: per-layer deltas between two runs, each read
 * into a table as `gradtrace report` reads it (report.h), compared per
 * iteration (a row's time divided by its run's iterations, so runs of
 * different lengths compare), sorted by regression, with a verdict.
 *
 * The verdict rule (also in the usage text and the README). A row's
 * change is its own: its delta minus its direct children's deltas, since
 * times are inclusive and a slower layer would otherwise make every
 * ancestor look slower. A row is flagged "slower" (or "faster") only when
 * that change is
 *   - more than --threshold PCT (default 10) of the row's base time,
 *   - more than --sigma K (default 3) standard errors of the difference of
 *     the two runs' per-iteration means (sqrt(sd_b^2/n_b + sd_n^2/n_n),
 *     the rows' per-iteration fwd+rc+bwd statistics; containers have none
 *     and this test is then skipped), and
 *   - at least --min-ms MS (default 0.1) and 1% of the base iteration
 *     time, so that timer noise on tiny layers is never a regression.
 * Everything else is "~" (within noise). Layers of one run only are
 * listed as such. --fail-above PCT exits 3 when a flagged slower row's
 * change exceeds PCT of its base time.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "daemon/cli/cli.h"
#include "daemon/cli/report.h"

static const char diff_usage[] =
    "usage: gradtrace diff [OPTIONS] BASE NEW\n"
    "  Per-layer deltas of forward, backward, recompute and GPU kernel time\n"
    "  per iteration between two runs, sorted by regression, with a verdict\n"
    "  per row (on fwd + bwd + recompute; GPU time is shown, not judged).\n"
    "  BASE, NEW: a trace file or .gtr recording, or several of one run\n"
    "  separated by commas (rotated files).\n"
    "  Rule: a row is 'slower'/'faster' when its own change (its delta minus\n"
    "  its children's) exceeds --threshold PCT of its base time, --sigma K\n"
    "  standard errors of the two runs' per-iteration means, and both\n"
    "  --min-ms MS and 1% of the base iteration time; otherwise '~'.\n"
    "  --threshold PCT   relative threshold (default 10)\n"
    "  --sigma K         noise threshold in standard errors (default 3)\n"
    "  --min-ms MS       smallest change that can be flagged (default 0.1)\n"
    "  --fail-above PCT  exit 3 if a slower row changed by more than PCT%\n"
    "exit status: 0 ok, 1 unreadable input, 2 usage, 3 --fail-above hit\n";


/* One layer in either run. */
struct drow {
    const char *path, *cls;
    const struct gt__agg_layer *b, *n;
    double d_fwd, d_bwd, d_rc, d_all; /* ms per iteration, new - base */
    double d_gpu;                      /* GPU kernel ms (fwd + bwd) */
    double d_comm;                     /* communication ms (fwd + bwd) */
    double own;                        /* d_all minus the children's */
    double base_all;
    const char *verdict;
};

/* Per-iteration ms of one run's row (fwd, bwd, rc, GPU, communication). */
static void per_iter(const struct gt__agg *a, const struct gt__agg_layer *l,
                     double out[5])
{
    double k = a->steps ? (double)a->steps : 1;
    out[0] = l ? l->fwd_us / 1e3 / k : 0;
    out[1] = l ? l->bwd_us / 1e3 / k : 0;
    out[2] = l ? l->rc_us / 1e3 / k : 0;
    out[3] = l ? (l->gpu_us[0] + l->gpu_us[1]) / 1e3 / k : 0;
    out[4] = l ? (l->fwd_comm_us + l->comm_us) / 1e3 / k : 0;
}

static long find_row(const struct gt__agg *a, const char *path)
{
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->layers[i].path, path) == 0)
            return (long)i;
    return -1;
}

/* Standard error of the difference of the two rows' per-iteration means
 * (ms), or -1 when either has no per-iteration statistics. */
static double std_err(const struct gt__agg_layer *b, const struct gt__agg_layer *n)
{
    if (!b || !n || b->container || n->container || !b->it || !n->it)
        return -1;
    const struct gt__agg_stat *sb = &b->it->st[GT__AGG_ST_ALL];
    const struct gt__agg_stat *sn = &n->it->st[GT__AGG_ST_ALL];
    if (sb->n < 2 || sn->n < 2)
        return -1;
    double vb = gt__agg_stddev(sb) / 1e3, vn = gt__agg_stddev(sn) / 1e3;
    return sqrt(vb * vb / (double)sb->n + vn * vn / (double)sn->n);
}

int gt__diff_verdict(const struct gt__diff_rule *o, double own, double base,
                     double se, double step)
{
    double mag = fabs(own);
    if (mag <= o->thr / 100 * base || mag < o->min_ms || mag < 0.01 * step ||
        (se >= 0 && mag <= o->sigma * se))
        return 0;
    return own > 0 ? 1 : -1;
}

static const char *verdict_of(const struct drow *d, const struct gt__agg *base,
                              const struct gt__diff_rule *o)
{
    static const char *const names[] = {"faster", "~", "slower"};
    if (!d->b)
        return "only in new";
    if (!d->n)
        return "only in base";
    double step = base->steps ? base->step_us / 1e3 / (double)base->steps : 0;
    return names[1 + gt__diff_verdict(o, d->own, d->base_all,
                                      std_err(d->b, d->n), step)];
}

/* The rows of both runs: new's in its order, then base's missing ones. */
static struct drow *rows_build(const struct gt__agg *base, const struct gt__agg *nw,
                               size_t *count)
{
    struct drow *d = gt__calloc(base->n + nw->n + 1, sizeof(*d));
    size_t k = 0;
    if (!d)
        return NULL;
    for (size_t i = 0; i < nw->n; i++) {
        long j = find_row(base, nw->layers[i].path);
        d[k++] = (struct drow){.path = nw->layers[i].path, .cls = nw->layers[i].cls,
                               .n = &nw->layers[i],
                               .b = j >= 0 ? &base->layers[j] : NULL};
    }
    for (size_t i = 0; i < base->n; i++)
        if (find_row(nw, base->layers[i].path) < 0)
            d[k++] = (struct drow){.path = base->layers[i].path,
                                   .cls = base->layers[i].cls, .b = &base->layers[i]};
    *count = k;
    return d;
}

static void rows_delta(struct drow *d, size_t k, const struct gt__agg *base,
                       const struct gt__agg *nw, const struct gt__diff_rule *o)
{
    for (size_t i = 0; i < k; i++) {
        double b[5], n[5];
        per_iter(base, d[i].b, b);
        per_iter(nw, d[i].n, n);
        d[i].d_fwd = n[0] - b[0];
        d[i].d_bwd = n[1] - b[1];
        d[i].d_rc = n[2] - b[2];
        d[i].d_all = d[i].d_fwd + d[i].d_bwd + d[i].d_rc;
        d[i].d_gpu = n[3] - b[3];
        d[i].d_comm = n[4] - b[4];
        d[i].base_all = b[0] + b[1] + b[2];
        d[i].own = d[i].d_all;
    }
    /* A row's own change: minus its direct children's (by either run's
     * parent). */
    for (size_t i = 0; i < k; i++) {
        const struct gt__agg_layer *l = d[i].n ? d[i].n : d[i].b;
        const struct gt__agg *a = d[i].n ? nw : base;
        if (l->up < 0)
            continue;
        const char *parent = a->layers[l->up].path;
        for (size_t j = 0; j < k; j++)
            if (strcmp(d[j].path, parent) == 0)
                d[j].own -= d[i].d_all;
    }
    for (size_t i = 0; i < k; i++)
        d[i].verdict = verdict_of(&d[i], base, o);
}

static int by_regression(const void *pa, const void *pb)
{
    const struct drow *x = pa, *y = pb;
    return x->own < y->own ? 1 : x->own > y->own ? -1 : strcmp(x->path, y->path);
}

/* Prints the rows. @return 3 when --fail-above is hit, else 0. */
static int rows_print(struct drow *d, size_t k, const struct gt__agg *base,
                      const struct gt__agg *nw, const struct gt__diff_rule *o)
{
    int w = 14, status = 0;
    for (size_t i = 0; i < k; i++) {
        int len = (int)strlen(d[i].path);
        w = len > w ? (len < 60 ? len : 60) : w;
    }
    printf("%-*s  %-14s %11s %11s %10s %8s %9s %9s %9s %9s %9s  %s\n", w,
           "layer", "class", "base ms/it", "new ms/it", "own d ms", "own d%",
           "d fwd", "d bwd", "d rc", "d gpu", "d comm", "verdict");
    for (size_t i = 0; i < k; i++) {
        char pct[16] = "-";
        if (d[i].base_all > 0)
            snprintf(pct, sizeof(pct), "%+.1f", 100 * d[i].own / d[i].base_all);
        printf("%-*.*s  %-14.14s %11.3f %11.3f %+10.3f %8s %+9.3f %+9.3f %+9.3f "
               "%+9.3f %+9.3f  %s\n",
               w, w, d[i].path, d[i].cls ? d[i].cls : "", d[i].base_all,
               d[i].base_all + d[i].d_all, d[i].own, pct, d[i].d_fwd, d[i].d_bwd,
               d[i].d_rc, d[i].d_gpu, d[i].d_comm, d[i].verdict);
        if (o->fail >= 0 && strcmp(d[i].verdict, "slower") == 0 &&
            d[i].own > o->fail / 100 * d[i].base_all)
            status = 3;
    }
    printf("iterations: base %llu (%.3f ms each), new %llu (%.3f ms each)\n",
           (unsigned long long)base->steps,
           base->steps ? base->step_us / 1e3 / (double)base->steps : 0,
           (unsigned long long)nw->steps,
           nw->steps ? nw->step_us / 1e3 / (double)nw->steps : 0);
    printf("rule: flagged when the row's own change (minus its children's) is > "
           "%.0f%% of its base time, > %.1f standard errors of the runs'\n"
           "per-iteration means, and >= %.3f ms and 1%% of the base iteration\n",
           o->thr, o->sigma, o->min_ms);
    return status;
}

/* Splits a comma-separated list of paths into r. @return 0 or 1. */
static int load_run(struct gt__agg *r, const char *arg)
{
    struct gt__rep_opts ro = {.order = GT__AGG_MODEL, .depth = -1, .top = -1};
    char *copy = strdup(arg), *save = NULL, *paths[64];
    int n = 0, rc = 1;
    if (!copy)
        return 1;
    for (char *t = strtok_r(copy, ",", &save); t && n < 64; t = strtok_r(NULL, ",", &save))
        paths[n++] = t;
    if (n > 0)
        rc = gt__report_load(r, &ro, n, paths, "gradtrace diff", NULL);
    free(copy);
    return rc;
}

static const struct option diff_opts_table[] = {
    {"help", no_argument, NULL, 'h'},
    {"threshold", required_argument, NULL, 't'},
    {"sigma", required_argument, NULL, 's'},
    {"min-ms", required_argument, NULL, 'm'},
    {"fail-above", required_argument, NULL, 'f'},
    {NULL, 0, NULL, 0},
};

/* @return -1 to go on, or the exit status (0 after --help, 2). */
static int parse_args(int argc, char **argv, struct gt__diff_rule *o)
{
    int ch;
    optind = 0;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":h", diff_opts_table, NULL)) != -1) {
        char *end = NULL;
        double v = optarg ? strtod(optarg, &end) : 0;
        if (ch == 'h') {
            fputs(diff_usage, stdout);
            return 0;
        }
        if (ch == ':' || ch == '?' || !end || *end || end == optarg || v < 0) {
            return gt__cli_usage_error("gradtrace diff", "bad option or value '%s'",
                                       argv[optind - 1]);
        }
        *(ch == 't' ? &o->thr : ch == 's' ? &o->sigma : ch == 'm' ? &o->min_ms
                                                                  : &o->fail) = v;
    }
    if (argc - optind != 2) {
        return gt__cli_usage_error("gradtrace diff", "expected BASE and NEW");
    }
    return -1;
}

int gt__cmd_diff(int argc, char **argv)
{
    struct gt__diff_rule o = {.thr = 10, .sigma = 3, .min_ms = 0.1, .fail = -1};
    struct gt__agg base, nw;
    struct drow *d = NULL;
    size_t k = 0;
    int status;

    if ((status = parse_args(argc, argv, &o)) >= 0)
        return status;
    gt__agg_init(&base);
    gt__agg_init(&nw);
    status = load_run(&base, argv[optind]);
    if (status == 0)
        status = load_run(&nw, argv[optind + 1]);
    if (status == 0 && !(d = rows_build(&base, &nw, &k))) {
        fprintf(stderr, "gradtrace diff: out of memory\n");
        status = 1;
    }
    if (status == 0) {
        rows_delta(d, k, &base, &nw, &o);
        qsort(d, k, sizeof(*d), by_regression);
        status = rows_print(d, k, &base, &nw, &o);
    }
    gt__free(d);
    gt__agg_close(&base);
    gt__agg_close(&nw);
    return status;
}
