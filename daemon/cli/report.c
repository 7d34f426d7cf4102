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
    "exit status: 0 ok, 1 unreadable input or no layer spans, 2 usage (and\n"
    "  an --iterations range that meets none of the input's iterations)\n";

static double num_of(const cJSON *obj, const char *key, double dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

/* A "backward totals" instant (at ts us) into the table's remainder. */
static int add_totals(struct gt__agg *r, const cJSON *args, double ts)
{
    struct gt__agg_rest t = {
        .nodes = (uint64_t)num_of(args, "nodes", 0),
        .un_nodes = (uint64_t)num_of(args, "unattributed_nodes", 0),
        .un_accg = (uint64_t)num_of(args, "unattributed_accumulate_grad", 0),
        .order2 = (uint64_t)num_of(args, "second_order_nodes", 0),
        .time_us = num_of(args, "time_us", 0),
        .un_us = num_of(args, "unattributed_us", 0)};
    return gt__agg_totals_at(r, &t, ts);
}

/* One trace event into the table, when it is a layer or iteration span
 * or a pass group's totals. */
static int add_event(struct gt__agg *r, const cJSON *ev)
{
    static const struct {
        const char *cat;
        enum gt__agg_phase phase;
    } layer_cats[] = {{"layer_forward", GT__AGG_PH_FWD},
                      {"layer_backward", GT__AGG_PH_BWD},
                      {"layer_recompute", GT__AGG_PH_RECOMPUTE}};
    const cJSON *cat = cJSON_GetObjectItemCaseSensitive(ev, "cat");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(ev, "name");
    const cJSON *dur = cJSON_GetObjectItemCaseSensitive(ev, "dur");
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(ev, "args");

    if (cJSON_IsString(cat) && strcmp(cat->valuestring, "backward_totals") == 0)
        return add_totals(r, args, num_of(ev, "ts", 0));
    if (cJSON_IsString(cat) && strcmp(cat->valuestring, "compiled_totals") == 0)
        return gt__report_compiled_totals(r, args, num_of(ev, "ts", 0));
    if (!cJSON_IsString(cat) || !cJSON_IsString(name) || !cJSON_IsNumber(dur))
        return 0;
    if (strcmp(cat->valuestring, "kernel") == 0) {
        const cJSON *layer = cJSON_GetObjectItemCaseSensitive(args, "layer");
        const cJSON *phase = cJSON_GetObjectItemCaseSensitive(args, "phase");
        if (!cJSON_IsString(layer) || !cJSON_IsString(phase))
            return 0;
        return gt__agg_kernel(r, layer->valuestring,
                              strcmp(phase->valuestring, "backward") == 0,
                              dur->valuedouble,
                              cJSON_IsString(name) ? name->valuestring : NULL);
    }
    /* ProfilerStep#N: cat user_annotation (Kineto's, since converter
     * 0.2), cat iteration before; a window file's own step is no
     * iteration (it covers only the window). */
    if (strcmp(cat->valuestring, "iteration") == 0 ||
        (strcmp(cat->valuestring, "user_annotation") == 0 &&
         strncmp(name->valuestring, "ProfilerStep#", 13) == 0 &&
         !cJSON_GetObjectItemCaseSensitive(args, "window")))
        return gt__agg_step(r, (uint64_t)num_of(args, "step", 0),
                            num_of(ev, "ts", 0), dur->valuedouble);
    for (size_t i = 0; i < sizeof(layer_cats) / sizeof(layer_cats[0]); i++) {
        if (strcmp(cat->valuestring, layer_cats[i].cat) != 0)
            continue;
        const cJSON *parent = cJSON_GetObjectItemCaseSensitive(args, "parent");
        const cJSON *top = cJSON_GetObjectItemCaseSensitive(args, "top_node");
        struct gt__agg_ev e = {
            .phase = layer_cats[i].phase, .name = name->valuestring,
            .ts = num_of(ev, "ts", 0), .dur = dur->valuedouble,
            .nodes = num_of(args, "nodes", 0),
            .self_nodes = num_of(args, "self_nodes", 0),
            .order2 = num_of(args, "second_order_nodes", 0),
            .time_us = num_of(args, "time_us", -1),
            .self_us = num_of(args, "self_us", 0),
            .accg_us = num_of(args, "accumulate_grad_us", 0),
            .parent = cJSON_IsString(parent) ? parent->valuestring : NULL,
            .top_node = cJSON_IsString(top) ? top->valuestring : NULL,
            .top_node_us = num_of(args, "top_node_us", 0),
            .timed = layer_cats[i].phase != GT__AGG_PH_BWD &&
                     cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(args, "time_us"))};
        return gt__agg_add(r, &e);
    }
    return 0;
}

/* Parses a whole trace document (fallback for files without line structure). */
static int add_document(struct gt__agg *r, const char *text)
{
    cJSON *doc = cJSON_Parse(text);
    const cJSON *evs, *ev;
    int rc = 0;

    if (!doc)
        return -EINVAL;
    evs = cJSON_IsArray(doc) ? doc : cJSON_GetObjectItemCaseSensitive(doc, "traceEvents");
    cJSON_ArrayForEach(ev, evs)
    {
        if ((rc = add_event(r, ev)) < 0)
            break;
    }
    cJSON_Delete(doc);
    return rc;
}

/* What a trace's metadata says was lost (the largest over its files). */
struct json_lost {
    uint64_t events, chunks, corrupt;
    int truncated;
    int32_t rank;        /* distributedInfo's, -1 none */
};

static void max_u64(uint64_t *d, double v)
{
    *d = v > (double)*d ? (uint64_t)v : *d;
}

/* A metadata line "lost":{...} or "stream":{...} into jl. */
static void add_lost_line(struct json_lost *jl, const char *line)
{
    int lost = strncmp(line, "\"lost\":{", 8) == 0;
    int dist = strncmp(line, "\"distributedInfo\":{", 19) == 0;
    const char *obj = strchr(line, '{');
    cJSON *j = obj ? cJSON_Parse(obj) : NULL;
    if (!j) {
        /* The line ends with a comma: parse up to the closing brace. */
        const char *end = obj ? strrchr(obj, '}') : NULL;
        if (end) {
            char *t = strndup(obj, (size_t)(end - obj) + 1);
            j = t ? cJSON_Parse(t) : NULL;
            free(t);
        }
    }
    if (!j)
        return;
    if (dist) {
        jl->rank = (int32_t)num_of(j, "rank", -1);
    } else if (lost) {
        max_u64(&jl->events, num_of(j, "events", 0) + num_of(j, "cupti", 0));
        max_u64(&jl->chunks, num_of(j, "chunks", 0));
    } else {
        max_u64(&jl->chunks, num_of(j, "chunks_missing", 0));
        max_u64(&jl->corrupt, num_of(j, "corrupt_chunks", 0));
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "truncated")))
            jl->truncated = 1;
    }
    cJSON_Delete(j);
}

/* The command whose inputs are being read (report, diff), for messages. */
static const char *load_prog = "gradtrace report";

/* A trace's "detail":{"ops":...} line: whether operators were captured. */
static void note_detail(struct gt__agg *r, const char *line)
{
    static const char *const names[] = {"\"ops\":\"off\"", "\"ops\":\"windows\"",
                                        "\"ops\":\"all\""};

    for (int i = 0; i < 3; i++)
        if (strstr(line, names[i]) && GT__OPS_OFF + i > r->ops_detail)
            r->ops_detail = GT__OPS_OFF + i;
}

static int read_json(struct gt__agg *r, const char *path, struct json_lost *jl)
{
    FILE *f = fopen(path, "r");
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    uint64_t lines = 0;
    int rc = 0, structured = 0;

    if (!f) {
        fprintf(stderr, "%s: %s: %s\n", load_prog, path, strerror(errno));
        return -errno;
    }
    while ((n = getline(&line, &cap, f)) > 0) {
        cJSON *ev;
        lines++;
        if (lines == 1 && strncmp(line, "{\"traceEvents\":[", 16) == 0 &&
            line[16 + strspn(line + 16, " \t")] <= '\n')
            structured = 1; /* the daemon may put a flush marker (a TAB)
                             * after the '[' (schema/trace-output.md) */
        if (!structured) {
            /* Not our line format: read the whole document instead. */
            break;
        }
        if (strncmp(line, "\"lost\":{", 8) == 0 ||
            strncmp(line, "\"distributedInfo\":{", 19) == 0 ||
            strncmp(line, "\"stream\":{", 10) == 0) {
            add_lost_line(jl, line);
            continue;
        }
        if (strncmp(line, "\"merge\":{", 9) == 0) {
            gt__report_note_merge(line);
            continue;
        }
        if (strncmp(line, "\"detail\":{", 10) == 0) {
            note_detail(r, line);
            continue;
        }
        /* Cheap filter before parsing: only the categories we sum. */
        if (!strstr(line, "\"cat\":\"layer_") && !strstr(line, "\"cat\":\"iteration\"") &&
            !strstr(line, "\"cat\":\"user_annotation\"") &&
            !strstr(line, "\"cat\":\"kernel\"") &&
            !strstr(line, "\"cat\":\"backward_totals\"") &&
            !strstr(line, "\"cat\":\"compiled_totals\""))
            continue;
        while (n > 0 && strchr("\n,\t ", line[n - 1]))
            line[--n] = '\0';
        ev = cJSON_Parse(line);
        if (ev) {
            rc = add_event(r, ev);
            cJSON_Delete(ev);
            if (rc < 0)
                break;
        }
    }
    if (!structured && rc == 0) {
        long size;
        char *text;
        if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
            rc = -EIO;
        } else if (!(text = gt__malloc((size_t)size + 1))) {
            rc = -ENOMEM;
        } else {
            size_t got = fread(text, 1, (size_t)size, f);
            text[got] = '\0';
            rc = add_document(r, text);
            gt__free(text);
        }
        if (rc < 0)
            fprintf(stderr, "%s: %s: not a Chrome trace JSON file\n", load_prog, path);
    }
    free(line);
    fclose(f);
    return rc;
}

int gt__report_read_json(struct gt__agg *r, const char *path)
{
    struct json_lost jl = {.rank = -1};
    return read_json(r, path, &jl);
}

/* A recording, decoded straight into the table by the aggregation consumer. */
static int read_gtr(struct gt__agg *r, const char *path)
{
    struct gt__convert_info info = {0};
    struct gt__consumer *consumer = gt__agg_consumer_create(r);
    char why[160];
    int rc;

    if (!consumer) {
        fprintf(stderr, "%s: out of memory\n", load_prog);
        return -ENOMEM;
    }
    rc = gt__convert_file(path, &consumer, 1, &info);
    gt__consumer_free(consumer);
    if (rc == 0 && info.stats.chunks == 0 && info.stats.skipped_bytes > 0)
        rc = -EINVAL; /* bytes after the hello, and not one chunk whole */
    if (rc == 0)
        return 0;
    if (info.stage == GT__CONVERT_OPEN)
        fprintf(stderr, "%s: %s: %s\n", load_prog, path, gt__strerror(rc));
    else
        fprintf(stderr, "%s: %s: %s\n", load_prog, path,
                gt__cli_gtr_why(path, rc, &info, why, sizeof(why)));
    return rc;
}

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

static int is_gtr(const char *path)
{
    size_t n = strlen(path);
    return n > 4 && strcmp(path + n - 4, ".gtr") == 0;
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
};

/* Reads path into t (initialised by the caller, selection and plan set).
 * @return 0 or a negative errno (message printed). */
static int read_input(struct gt__agg *t, const char *path, struct json_lost *jl)
{
    jl->rank = -1;
    int rc = is_gtr(path) ? read_gtr(t, path) : read_json(t, path, jl);
    if (!is_gtr(path))
        t->rank = jl->rank;
    return rc;
}

/* One input into r and, by its rank, into rk, leaving out skip[0..nskip)
 * and counting only the selection's iterations, p its first pass (or
 * NULL). @return 0, or 1 (message printed). */
static int load_one(struct gt__agg *r, const struct gt__rep_opts *o,
                    const char *path, struct json_lost *jl,
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
        rc = read_input(&t, path, jl);
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
    struct json_lost jl = {.rank = -1};
    struct gt__agg t;
    gt__agg_init(&t);
    gt__agg_log_iterations(&t);
    int rc = read_input(&t, path, &jl);
    if (rc == 0) {
        p->its = t.its;
        p->n = t.nits;
        p->rank = t.rank;
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

/* The first pass over every input, then the selection checked and the
 * warm-up chosen (into r's skip list). @return 0, 1 or 2 (message
 * printed); *pp is the caller's to free with pass1_free. */
static int pass1_all(struct gt__agg *r, const struct gt__rep_opts *o, int n,
                     char **paths, const char *prog, struct pass1 **pp)
{
    struct pass1 *p = gt__calloc(n ? (size_t)n : 1, sizeof(*p));
    *pp = p;
    if (!p) {
        fprintf(stderr, "%s: out of memory\n", prog);
        return 1;
    }
    for (int i = 0; i < n; i++)
        if (pass1_one(paths[i], &p[i]))
            return 1;
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
    struct json_lost jl = {.rank = -1};
    load_prog = prog;
    struct pass1 *p = NULL;
    int st = 0;
    if (o->select || o->warmup)
        st = pass1_all(r, o, n, paths, prog, &p);
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
    gt__report_clock_close();
    gt__report_ranks_close(rk);
    gt__free(rk);
    gt__agg_close(&r);
    return status;
}
