/*
 * `gradtrace report`: the per-layer table, without opening a viewer. This
 * file reads the inputs and the options (gt__report_load is shared with
 * `gradtrace diff`); the outputs are report_out.c (text, CSV, JSON),
 * report_svg.c (--svg) and hints.c.
 *
 * Input is what gradtrace writes (schema/trace-output.md): one or more
 * trace files of one stream (rotated files are summed), or a .gtr
 * recording, which goes straight into the aggregation consumer
 * (daemon/convert/agg.h): the converter's own layer spans become rows as
 * the recording is decoded, without writing or parsing any JSON. Both
 * kinds of input fill the same table (struct gt__agg).
 *
 * The converter writes one event per line, so a trace file is read line
 * by line and only the lines of the categories summed (layer_forward,
 * layer_recompute, layer_backward, backward_totals, compiled_totals,
 * iteration) are parsed with cJSON: memory is bounded by
 * the number of layers, never by the trace's size. A file that is not
 * line-structured (a foreign, minified trace) is parsed whole instead.
 *
 * Times are inclusive: a parent's forward contains its children's, as the
 * spans in the viewer do; backward time is the sum of the layer's nodes'
 * times, which each backward span carries in its args (a span's wall can
 * cover other layers' nodes). Rows are nested in model order, containers
 * show their children's sums, and the total line is the top-level rows
 * plus the backward time no layer owns (the "backward totals" instants).
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cJSON.h>

#include "common/alloc.h"
#include "common/util.h"
#include "daemon/cli/cli.h"
#include "daemon/cli/report.h"
#include "daemon/convert/agg.h"
#include "daemon/convert/consumer.h"

static const char report_usage[] =
    "usage: gradtrace report [OPTIONS] TRACE...\n"
    "  Prints one row per layer (module path), nested in model order: forward\n"
    "  calls and time, recompute (checkpointing) calls and time, backward time\n"
    "  (the sum of its nodes' times; self: its own nodes), node count,\n"
    "  AccumulateGrad time, all inclusive of sub-layers; the share of the\n"
    "  iterations' time and per-iteration p50/p95; then the backward time no\n"
    "  layer owns, the total, the step time outside layer spans, and hints.\n"
    "  The table's ms are per iteration (--totals: sums). Warm-up and outlier\n"
    "  iterations (a first step over 1.5x the others' median; any step far\n"
    "  above the median) are left out of every figure and named on one line.\n"
    "  TRACE: gradtrace trace files (.json, every rotated file of a stream)\n"
    "  or recordings (.gtr), decoded on the fly.\n"
    "  --format table|csv|json   output (json: schema/report.md); --csv = csv\n"
    "  --sort model|fwd|bwd|name model order (default; rows without a forward\n"
    "                            by backward, latest first), total time\n"
    "                            largest first, or path\n"
    "  --depth N                 rows at most N deep (0: top-level only)\n"
    "  --top N                   the first N rows (after --sort)\n"
    "  --iterations A-B          only iterations ProfilerStep#A..#B (A: one;\n"
    "                            A-: A to the last; -B: up to B), warm-up\n"
    "                            included\n"
    "  --include-warmup          keep the warm-up and outlier iterations,\n"
    "                            which are left out by default (see\n"
    "                            schema/report.md)\n"
    "  --totals                  table ms summed over the iterations, not\n"
    "                            per iteration\n"
    "  --svg FILE                also write a bar chart of the rows shown\n"
    "  --no-hints                no hints section\n"
    "  --by-rank                 a table per rank first (inputs of several\n"
    "                            ranks; the whole table always shows each\n"
    "                            layer's slowest rank and its time / mean)\n"
    "  --pid N                   the table of process N's files; otherwise\n"
    "                            inputs of several processes (DataLoader\n"
    "                            workers) give the table of each rank's one\n"
    "                            with the most iterations (without ranks,\n"
    "                            of that one), the others named after it\n"
    "exit status: 0 ok, 1 unreadable input or no layer spans, 2 usage (and\n"
    "  an --iterations range that meets none of the input's iterations)\n";

static const struct option report_opts[] = {
    {"help", no_argument, NULL, 'h'},
    {"csv", no_argument, NULL, 'c'},
    {"format", required_argument, NULL, 'f'},
    {"sort", required_argument, NULL, 's'},
    {"depth", required_argument, NULL, 'd'},
    {"top", required_argument, NULL, 't'},
    {"iterations", required_argument, NULL, 'i'},
    {"svg", required_argument, NULL, 'g'},
    {"no-hints", no_argument, NULL, 'n'},
    {"include-warmup", no_argument, NULL, 'w'},
    {"totals", no_argument, NULL, 'T'},
    {"by-rank", no_argument, NULL, 'r'},
    {"pid", required_argument, NULL, 'p'},
    {NULL, 0, NULL, 0},
};

/* Index of s in names (n of them), or -1. */
static int name_index(const char *const *names, int n, const char *s)
{
    for (int i = 0; i < n; i++)
        if (names[i] && strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

/* "A-B", "A", "A-" (A to the last) or "-B" (the first to B) into lo,
 * hi. @return 0 or -EINVAL. */
static int parse_range(const char *s, uint64_t *lo, uint64_t *hi)
{
    char a[32];
    const char *dash = strchr(s, '-');
    size_t n = dash ? (size_t)(dash - s) : strlen(s);
    if ((n == 0 && (!dash || !dash[1])) || n >= sizeof(a))
        return -EINVAL;
    memcpy(a, s, n);
    a[n] = '\0';
    *lo = 0;
    *hi = UINT64_MAX >> 1;
    if (n && gt__parse_u64(a, 0, UINT64_MAX >> 1, lo) < 0)
        return -EINVAL;
    if (!dash) {
        *hi = *lo;
        return 0;
    }
    if (dash[1] && gt__parse_u64(dash + 1, 0, UINT64_MAX >> 1, hi) < 0)
        return -EINVAL;
    return *hi < *lo ? -EINVAL : 0;
}

/* One option into o. @return -1 to go on, or 2 (message printed). */
static int parse_one(int ch, const char *arg, struct gt__rep_opts *o)
{
    static const char *const orders[] = {
        [GT__AGG_MODEL] = "model", [GT__AGG_FWD] = "fwd",
        [GT__AGG_BWD] = "bwd", [GT__AGG_NAME] = "name"};
    static const char *const formats[] = {
        [GT__REP_TABLE] = "table", [GT__REP_CSV] = "csv", [GT__REP_JSON] = "json"};
    uint64_t v;
    int k;

    switch (ch) {
    case 'c': o->format = GT__REP_CSV; return -1;
    case 'n': o->no_hints = 1; return -1;
    case 'w': o->warmup = 0; return -1;
    case 'T': o->totals = 1; return -1;
    case 'r': o->by_rank = 1; return -1;
    case 'g': o->svg = arg; return -1;
    case 'f':
        if ((k = name_index(formats, 3, arg)) < 0)
            break;
        o->format = (enum gt__rep_format)k;
        return -1;
    case 's':
        if ((k = name_index(orders, 4, arg)) < 0)
            break;
        o->order = k;
        return -1;
    case 'd':
    case 't':
        if (gt__cli_parse_count(ch == 'd' ? "--depth" : "--top", arg, 0,
                                1u << 30, &v) < 0)
            return 2;
        if (ch == 'd')
            o->depth = (int)v;
        else
            o->top = (long)v;
        return -1;
    case 'p':
        if (gt__cli_parse_count("--pid", arg, 0, 1u << 30, &v) < 0)
            return 2;
        o->has_pid = 1;
        o->pid = (int64_t)v;
        return -1;
    case 'i':
        if (parse_range(arg, &o->lo, &o->hi) < 0)
            break;
        o->select = 1;
        o->warmup = 0;
        return -1;
    }
    fprintf(stderr, "gradtrace report: bad value '%s' (see --help)\n", arg);
    return 2;
}

/*
 * Parses the options. @return -1 to go on (TRACEs from argv[optind]), or
 * the exit status: 0 after --help, 2 on a usage error (message printed).
 */
static int parse_args(int argc, char **argv, struct gt__rep_opts *o)
{
    int ch, st;
    optind = 0; /* glibc: rescan from argv[1], whatever ran before */
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":h", report_opts, NULL)) != -1) {
        if (ch == 'h') {
            fputs(report_usage, stdout);
            return 0;
        }
        if (ch == ':' || ch == '?')
            return gt__cli_usage_error("gradtrace report", "%s '%s'",
                                       ch == ':' ? "a value is needed after"
                                                 : "unknown option",
                                       argv[optind - 1]);
        if ((st = parse_one(ch, optarg, o)) >= 0)
            return st;
    }
    if (optind >= argc)
        return gt__cli_usage_error("gradtrace report", "expected at least one TRACE");
    return -1;
}

/* The table of rank in rk, added when new. @return it, or NULL (no room). */
static struct gt__agg *rank_table(struct gt__rep_ranks *rk, int32_t rank)
{
    for (size_t i = 0; i < rk->n; i++)
        if (rk->a[i].rank == rank)
            return &rk->a[i];
    if (rk->n == GT__MAX_RANKS)
        return NULL;
    struct gt__agg *t = &rk->a[rk->n++];
    gt__agg_init(t);
    t->rank = rank;
    return t;
}

/* One input as the first pass saw it: its iterations (in the order they
 * closed) and its rank. */
struct pass1 {
    struct gt__agg_it *its;
    size_t n;
    int32_t rank;
    struct gt__rep_in in; /* its metadata: the process that wrote it */
};

/* One input into r and, by its rank, into rk, leaving out skip[0..nskip)
 * and counting only the selection's iterations, p its first pass (or
 * NULL). @return 0, or 1 (message printed). */
static int load_one(struct gt__agg *r, const struct gt__rep_opts *o,
                    const char *path, struct gt__rep_in *jl,
                    struct gt__rep_ranks *rk, const struct pass1 *p)
{
    struct gt__agg t;
    int rc = 0;
    gt__agg_init(&t);
    if (o->select)
        gt__agg_select(&t, o->lo, o->hi);
    if (r->nskip)
        rc = gt__agg_skip(&t, r->skip, r->nskip);
    if (p)
        gt__agg_plan(&t, p->its, p->n);
    if (rc == 0)
        rc = gt__report_read_input(&t, path, jl);
    if (rc == 0) {
        gt__agg_iter_finish(&t);
        struct gt__agg *rt = rk && t.rank >= 0 ? rank_table(rk, t.rank) : NULL;
        rc = gt__agg_merge(r, &t);
        if (rc == 0 && rt)
            rc = gt__agg_merge(rt, &t);
        if (rc < 0)
            fprintf(stderr, "gradtrace: out of memory\n");
    }
    gt__agg_close(&t);
    return rc < 0 ? 1 : 0;
}

/* The first pass over one input: its iterations and rank into p.
 * @return 0, or 1 (message printed). */
static int pass1_one(const char *path, struct pass1 *p)
{
    struct gt__rep_in jl = {.rank = -1};
    struct gt__agg t;
    gt__agg_init(&t);
    gt__agg_log_iterations(&t);
    int rc = gt__report_read_input(&t, path, &jl);
    if (rc == 0) {
        p->its = t.its;
        p->n = t.nits;
        p->rank = t.rank;
        p->in = jl;
        t.its = NULL;
    }
    gt__agg_close(&t);
    return rc < 0 ? 1 : 0;
}

static int by_ts(const void *pa, const void *pb)
{
    const struct gt__agg_it *x = pa, *y = pb;
    return x->ts < y->ts ? -1 : x->ts > y->ts ? 1 : 0;
}

/* The warm-up of the inputs of rank (one stream or several files of it:
 * their iterations in time order) appended to skip[*ns]. @return 0 or
 * -ENOMEM. */
static int warm_rank(const struct pass1 *p, int n, int32_t rank,
                     uint64_t *skip, size_t *ns)
{
    size_t k = 0, m = 0;
    int rc = -ENOMEM;
    for (int i = 0; i < n; i++)
        m += p[i].rank == rank ? p[i].n : 0;
    struct gt__agg_it *its = gt__malloc((m ? m : 1) * sizeof(*its));
    double *dur = gt__malloc((m ? m : 1) * sizeof(*dur));
    unsigned char *out = gt__malloc(m ? m : 1);
    struct gt__rep_warm w;
    if (!its || !dur || !out)
        goto out_free;
    for (int i = 0; i < n; i++)
        if (p[i].rank == rank && p[i].n) {  /* its is NULL when n is 0 */
            memcpy(its + k, p[i].its, p[i].n * sizeof(*its));
            k += p[i].n;
        }
    qsort(its, m, sizeof(*its), by_ts);
    for (size_t i = 0; i < m; i++)
        dur[i] = its[i].dur;
    if ((rc = gt__report_warmup(dur, m, out, &w)) < 0)
        goto out_free;
    for (size_t i = 0; i < m; i++)
        if (out[i])
            skip[(*ns)++] = its[i].step;
out_free:
    gt__free(its);
    gt__free(dur);
    gt__free(out);
    return rc;
}

/* The steps to leave out of r (every rank's warm-up) into r's skip list.
 * @return 0 or -ENOMEM. */
static int warm_choose(struct gt__agg *r, const struct pass1 *p, int n)
{
    size_t all = 0, ns = 0;
    int rc = 0;
    for (int i = 0; i < n; i++)
        all += p[i].n;
    uint64_t *skip = gt__malloc((all ? all : 1) * sizeof(*skip));
    if (!skip)
        return -ENOMEM;
    for (int i = 0; i < n && rc == 0; i++) {
        int first = 1; /* each rank once: at its first input */
        for (int j = 0; j < i; j++)
            first &= p[j].rank != p[i].rank;
        if (first)
            rc = warm_rank(p, n, p[i].rank, skip, &ns);
    }
    if (rc == 0)
        rc = gt__agg_skip(r, skip, ns);
    gt__free(skip);
    return rc;
}

/* Whether the selection meets an iteration of the inputs; if not, says
 * which they have. @return 0, or 2 (message printed). */
static int select_check(const struct gt__rep_opts *o, const struct pass1 *p,
                        int n, const char *prog)
{
    uint64_t lo = UINT64_MAX, hi = 0, count = 0;
    for (int i = 0; i < n; i++)
        for (size_t k = 0; k < p[i].n; k++) {
            uint64_t s = p[i].its[k].step;
            if (s >= o->lo && s <= o->hi)
                return 0;
            lo = s < lo ? s : lo;
            hi = s > hi ? s : hi;
            count++;
        }
    char want[64];
    if (o->hi == UINT64_MAX >> 1)
        snprintf(want, sizeof(want), "%llu-", (unsigned long long)o->lo);
    else
        snprintf(want, sizeof(want), "%llu-%llu", (unsigned long long)o->lo,
                 (unsigned long long)o->hi);
    if (count)
        fprintf(stderr, "%s: --iterations %s: no such iteration; the input "
                "has ProfilerStep#%llu..#%llu (%llu iterations)\n", prog, want,
                (unsigned long long)lo, (unsigned long long)hi,
                (unsigned long long)count);
    else
        fprintf(stderr, "%s: --iterations %s: the input has no iterations "
                "(no ProfilerStep spans)\n", prog, want);
    return 2;
}

/* Leaves in p and paths (compacted, *n updated) only the inputs of the
 * process(es) the table is of (gt__report_procs). @return 0, 1 or 2. */
static int keep_procs_n(const struct gt__rep_opts *o, struct pass1 *p,
                        int *n, char **paths, const char *prog)
{
    struct gt__rep_in *in = gt__calloc((size_t)*n, sizeof(*in));
    size_t *its = gt__calloc((size_t)*n, sizeof(*its));
    unsigned char *keep = gt__calloc((size_t)*n, 1);
    int st = 1, m = 0;
    if (in && its && keep) {
        for (int i = 0; i < *n; i++) {
            in[i] = p[i].in;
            its[i] = p[i].n;
        }
        st = gt__report_procs(in, its, *n, o->has_pid ? o->pid : -1, keep, prog);
    } else {
        fprintf(stderr, "%s: out of memory\n", prog);
    }
    for (int i = 0; st == 0 && i < *n; i++) {
        if (!keep[i]) {
            gt__free(p[i].its);
            continue;
        }
        p[m] = p[i];
        paths[m++] = paths[i];
    }
    if (st == 0)
        *n = m;
    gt__free(in);
    gt__free(its);
    gt__free(keep);
    return st;
}

/* The first pass over every input, then the selection checked and the
 * warm-up chosen (into r's skip list). @return 0, 1 or 2 (message
 * printed); *pp is the caller's to free with pass1_free. */
static int pass1_all(struct gt__agg *r, const struct gt__rep_opts *o, int *np,
                     char **paths, const char *prog, struct pass1 **pp)
{
    int n = *np;
    struct pass1 *p = gt__calloc(n ? (size_t)n : 1, sizeof(*p));
    *pp = p;
    if (!p) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }
    for (int i = 0; i < n; i++)
        if (pass1_one(paths[i], &p[i]))
            return 1;
    int st = keep_procs_n(o, p, np, paths, prog);
    if (st)
        return st;
    n = *np;
    if (o->select)
        return select_check(o, p, n, prog);
    if (o->warmup && warm_choose(r, p, n) < 0) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }
    return 0;
}

static void pass1_free(struct pass1 *p, int n)
{
    for (int i = 0; p && i < n; i++)
        gt__free(p[i].its);
    gt__free(p);
}

void gt__report_ranks_close(struct gt__rep_ranks *rk)
{
    for (size_t i = 0; rk && i < rk->n; i++)
        gt__agg_close(&rk->a[i]);
}

/* Why there is no row, when there is none. */
static void say_no_rows(const struct gt__agg *r, const char *prog)
{
    if (r->steps)
        fprintf(stderr, "%s: no per-layer spans in the input: %llu "
                "iterations were captured, but no backward node has a "
                "layer, so no layer source was active. Python runs get "
                "layers from gradtrace record; a C++ or CUDA C program from "
                "NVTX ranges with GRADTRACE_LAYERS=nvtx (see README, Agent "
                "configuration) or from gt_module_begin/end\n", prog,
                (unsigned long long)r->steps);
    else
        fprintf(stderr, "%s: no per-layer spans and no backward passes in "
                "the input (was the program a PyTorch run under gradtrace "
                "record?)\n", prog);
}

int gt__report_load(struct gt__agg *r, const struct gt__rep_opts *o,
                    int n, char **paths, const char *prog,
                    struct gt__rep_ranks *rk)
{
    struct gt__rep_in jl = {.rank = -1};
    gt__report_in_prog(prog);
    struct pass1 *p = NULL;
    int st = 0;
    if (o->select || o->warmup || n > 1 || o->has_pid)
        st = pass1_all(r, o, &n, paths, prog, &p);
    for (int i = 0; st == 0 && i < n; i++)
        st = load_one(r, o, paths[i], &jl, rk, p ? &p[i] : NULL);
    pass1_free(p, n);
    if (st)
        return st;
    /* Rotated files repeat the stream's cumulative counts: the largest. */
    gt__agg_lost(r, jl.events, jl.chunks, jl.corrupt, jl.truncated);
    if (r->n == 0) {
        say_no_rows(r, prog);
        return 1;
    }
    gt__agg_finish(r);
    for (size_t k = 0; rk && k < rk->n; k++)
        gt__agg_finish(&rk->a[k]);
    if (rk && rk->n > 1)
        gt__agg_rank_summary(r, rk->a, rk->n);
    gt__agg_sort(r, (enum gt__agg_order)o->order);
    for (size_t k = 0; rk && k < rk->n; k++)
        gt__agg_sort(&rk->a[k], (enum gt__agg_order)o->order);
    return 0;
}

/* The chosen output on stdout, and the SVG. @return the exit status. */
static int write_outputs(const struct gt__agg *r, const struct gt__rep_opts *o)
{
    int rc = 0;
    if (o->format == GT__REP_CSV)
        gt__report_print_csv(stdout, r, o);
    else if (o->format == GT__REP_JSON)
        rc = gt__report_print_json(stdout, r, o);
    else
        gt__report_print_table(stdout, r, o);
    if (rc == 0 && o->svg) {
        rc = gt__report_write_svg(o->svg, r, o);
        if (rc < 0)
            fprintf(stderr, "gradtrace report: %s: %s\n", o->svg, gt__strerror(rc));
        else if (o->format == GT__REP_TABLE)
            printf("\nbar chart: %s\n", o->svg);
    }
    return rc < 0 ? 1 : 0;
}

int gt__cmd_report(int argc, char **argv)
{
    struct gt__rep_opts o = {.order = GT__AGG_MODEL, .depth = -1, .top = -1,
                             .warmup = 1};
    struct gt__agg r;
    int status;

    if ((status = parse_args(argc, argv, &o)) >= 0)
        return status;
    struct gt__rep_ranks *rk = gt__calloc(1, sizeof(*rk));
    if (!rk) {
        fprintf(stderr, "gradtrace report: out of memory\n");
        return 1;
    }
    gt__agg_init(&r);
    status = gt__report_load(&r, &o, argc - optind, argv + optind,
                             "gradtrace report", rk);
    for (size_t k = 0; status == 0 && o.by_rank && k < rk->n; k++) {
        printf("== rank %d ==\n", (int)rk->a[k].rank);
        struct gt__rep_opts ro = o;
        ro.svg = NULL;
        ro.no_hints = 1;
        status = write_outputs(&rk->a[k], &ro);
        printf("\n== all ranks ==\n");
    }
    if (status == 0)
        status = write_outputs(&r, &o);
    if (status == 0 && o.format == GT__REP_TABLE)
        gt__report_print_clock(stdout);
    if (status == 0)
        gt__report_procs_note(o.format == GT__REP_TABLE ? stdout : stderr);
    gt__report_clock_close();
    gt__report_ranks_close(rk);
    gt__free(rk);
    gt__agg_close(&r);
    return status;
}
