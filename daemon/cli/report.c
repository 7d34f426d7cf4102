/*
 * `gradtrace report`: the per-layer table, without opening a viewer.
 *
 * Input is what gradtrace writes (schema/trace-output.md): one or more
 * trace files of one stream (rotated files are summed), or a .gtr
 * recording, which goes straight into the aggregation sink
 * (daemon/convert/agg.h): the converter's own layer spans become rows as
 * the recording is decoded, without writing or parsing any JSON. Both
 * kinds of input fill the same table (struct gt__agg).
 *
 * The converter writes one event per line, so a trace file is read line
 * by line and only the lines of the categories summed (layer_forward,
 * layer_recompute, layer_backward, backward_totals, iteration) are parsed
 * with cJSON: memory is bounded by
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
#include "daemon/cli/cli.h"
#include "daemon/convert/agg.h"
#include "daemon/convert/sink.h"

static const char report_usage[] =
    "usage: gradtrace report [--sort model|fwd|bwd|name] [--csv] TRACE...\n"
    "  Prints one row per layer (module path), nested in model order: forward\n"
    "  calls and time, recompute (checkpointing) calls and time, backward time\n"
    "  (the sum of its nodes' times; self: its own nodes) and node count, all\n"
    "  inclusive of sub-layers; then the backward time no layer owns and the\n"
    "  total (top-level rows + unattributed).\n"
    "  TRACE: gradtrace trace files (.json, every rotated file of a stream)\n"
    "  or a recording (.gtr), decoded on the fly.\n"
    "  --sort   model (order of first forward call, the default), fwd or bwd (total time,\n"
    "           largest first), name\n"
    "  --csv    comma-separated output for scripts\n"
    "exit status: 0 ok, 1 unreadable input or no layer spans, 2 usage\n";

static double num_of(const cJSON *obj, const char *key, double dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

/* A "backward totals" instant into the table's remainder. */
static void add_totals(struct gt__agg *r, const cJSON *args)
{
    struct gt__agg_rest t = {
        .nodes = (uint64_t)num_of(args, "nodes", 0),
        .un_nodes = (uint64_t)num_of(args, "unattributed_nodes", 0),
        .un_accg = (uint64_t)num_of(args, "unattributed_accumulate_grad", 0),
        .order2 = (uint64_t)num_of(args, "second_order_nodes", 0),
        .time_us = num_of(args, "time_us", 0),
        .un_us = num_of(args, "unattributed_us", 0)};
    gt__agg_totals(r, &t);
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

    if (cJSON_IsString(cat) && strcmp(cat->valuestring, "backward_totals") == 0) {
        add_totals(r, args);
        return 0;
    }
    if (!cJSON_IsString(cat) || !cJSON_IsString(name) || !cJSON_IsNumber(dur))
        return 0;
    if (strcmp(cat->valuestring, "iteration") == 0)
        return gt__agg_step(r, (uint64_t)num_of(args, "step", 0),
                            num_of(ev, "ts", 0), dur->valuedouble);
    for (size_t i = 0; i < sizeof(layer_cats) / sizeof(layer_cats[0]); i++) {
        if (strcmp(cat->valuestring, layer_cats[i].cat) != 0)
            continue;
        const cJSON *parent = cJSON_GetObjectItemCaseSensitive(args, "parent");
        struct gt__agg_ev e = {
            .phase = layer_cats[i].phase, .name = name->valuestring,
            .ts = num_of(ev, "ts", 0), .dur = dur->valuedouble,
            .nodes = num_of(args, "nodes", 0),
            .self_nodes = num_of(args, "self_nodes", 0),
            .order2 = num_of(args, "second_order_nodes", 0),
            .time_us = num_of(args, "time_us", -1),
            .self_us = num_of(args, "self_us", 0),
            .accg_us = num_of(args, "accumulate_grad_us", 0),
            .parent = cJSON_IsString(parent) ? parent->valuestring : NULL};
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

int gt__report_read_json(struct gt__agg *r, const char *path)
{
    FILE *f = fopen(path, "r");
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    uint64_t lines = 0;
    int rc = 0, structured = 0;

    if (!f) {
        fprintf(stderr, "gradtrace report: %s: %s\n", path, strerror(errno));
        return -errno;
    }
    while ((n = getline(&line, &cap, f)) > 0) {
        cJSON *ev;
        lines++;
        if (lines == 1 && strncmp(line, "{\"traceEvents\":[", 16) == 0 &&
            (line[16] == '\n' || line[16] == '\0'))
            structured = 1;
        if (!structured) {
            /* Not our line format: read the whole document instead. */
            break;
        }
        /* Cheap filter before parsing: only the categories we sum. */
        if (!strstr(line, "\"cat\":\"layer_") && !strstr(line, "\"cat\":\"iteration\"") &&
            !strstr(line, "\"cat\":\"backward_totals\""))
            continue;
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == ','))
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
            fprintf(stderr, "gradtrace report: %s: not a Chrome trace JSON file\n", path);
    }
    free(line);
    fclose(f);
    return rc;
}

/* A recording, decoded straight into the table by the aggregation sink. */
static int read_gtr(struct gt__agg *r, const char *path)
{
    struct gt__convert_info info = {0};
    struct gt__csink *sink = gt__agg_sink_create(r);
    int rc;

    if (!sink) {
        fprintf(stderr, "gradtrace report: out of memory\n");
        return -ENOMEM;
    }
    rc = gt__convert_file(path, &sink, 1, &info);
    gt__csink_free(sink);
    if (rc == 0 && info.stats.chunks == 0 && info.stats.skipped_bytes > 0)
        rc = -EINVAL; /* bytes after the hello, and not one chunk whole */
    if (rc == 0)
        return 0;
    if (info.stage == GT__CONVERT_NO_HELLO)
        fprintf(stderr, "gradtrace report: %s: %s\n", path,
                info.read == 0 ? "empty file"
                               : "not a gradtrace stream (no complete header)");
    else if (info.stage == GT__CONVERT_STREAM || info.stage == GT__CONVERT_DONE)
        fprintf(stderr, "gradtrace report: %s: not a gradtrace stream (%s)\n",
                path, info.stage == GT__CONVERT_DONE ? "no chunk readable"
                                                     : gt__strerror(rc));
    else
        fprintf(stderr, "gradtrace report: %s: %s\n", path, gt__strerror(rc));
    return rc;
}

/* The top-level rows' sums and the remainder: the total line. */
struct totals {
    double fwd_us, rc_us, bwd_us, self_us;
    uint64_t nodes;
};

static struct totals sum_roots(const struct gt__agg *r)
{
    struct totals t = {0};
    for (size_t i = 0; i < r->n; i++) {
        const struct gt__agg_layer *l = &r->layers[i];
        if (l->up >= 0)
            continue;
        t.fwd_us += l->fwd_us;
        t.rc_us += l->rc_us;
        t.bwd_us += l->bwd_us;
        t.nodes += l->bwd_nodes;
    }
    t.bwd_us += r->rest.un_us;
    t.nodes += r->rest.un_nodes;
    return t;
}

static void print_csv(const struct gt__agg *r)
{
    printf("layer,class,fwd_calls,fwd_ms,bwd_spans,bwd_ms,bwd_nodes,"
           "recompute_calls,recompute_ms,bwd_self_ms,bwd_self_nodes,"
           "accumulate_grad_ms,bwd_wall_ms,second_order_nodes,parent,depth,"
           "container\n");
    for (size_t i = 0; i < r->n; i++) {
        const struct gt__agg_layer *l = &r->layers[i];
        printf("%s,%s,%llu,%.3f,%llu,%.3f,%llu,%llu,%.3f,%.3f,%llu,%.3f,"
               "%.3f,%llu,%s,%d,%d\n",
               l->path, l->cls ? l->cls : "", (unsigned long long)l->fwd_calls,
               l->fwd_us / 1e3, (unsigned long long)l->bwd_spans,
               l->bwd_us / 1e3, (unsigned long long)l->bwd_nodes,
               (unsigned long long)l->rc_calls, l->rc_us / 1e3,
               l->bwd_self_us / 1e3, (unsigned long long)l->bwd_self_nodes,
               l->accg_us / 1e3, l->bwd_wall_us / 1e3,
               (unsigned long long)l->order2,
               l->up >= 0 ? r->layers[l->up].path : "", l->depth,
               l->container);
    }
    struct totals t = sum_roots(r);
    printf("(unattributed),,0,0.000,0,%.3f,%llu,0,0.000,%.3f,%llu,0.000,0.000,"
           "0,,0,0\n",
           r->rest.un_us / 1e3, (unsigned long long)r->rest.un_nodes,
           r->rest.un_us / 1e3, (unsigned long long)r->rest.un_nodes);
    printf("(total),,0,%.3f,0,%.3f,%llu,0,%.3f,0.000,0,0.000,0.000,%llu,,0,0\n",
           t.fwd_us / 1e3, t.bwd_us / 1e3, (unsigned long long)t.nodes,
           t.rc_us / 1e3, (unsigned long long)r->rest.order2);
}

static void print_row(const struct gt__agg_layer *l, int w, int indent)
{
    char ratio[16] = "-", calls[24] = "-", name[128];
    int d = indent ? 2 * (l->depth < 8 ? l->depth : 8) : 0;
    if (l->fwd_us > 0 && l->bwd_spans)
        snprintf(ratio, sizeof(ratio), "%.2f", l->bwd_us / l->fwd_us);
    if (!l->container)
        snprintf(calls, sizeof(calls), "%llu", (unsigned long long)l->fwd_calls);
    snprintf(name, sizeof(name), "%*s%s", d, "", l->path);
    printf("%-*.*s  %-14.14s %6s %11.3f %5llu %9.3f %11.3f %11.3f %9llu %8s\n",
           w, w, name, l->cls ? l->cls : "", calls, l->fwd_us / 1e3,
           (unsigned long long)l->rc_calls, l->rc_us / 1e3, l->bwd_us / 1e3,
           l->bwd_self_us / 1e3, (unsigned long long)l->bwd_nodes, ratio);
}

static void print_table(const struct gt__agg *r, int csv, int indent)
{
    int w = 14;

    if (csv) {
        print_csv(r);
        return;
    }
    for (size_t i = 0; i < r->n; i++) {
        int len = (int)strlen(r->layers[i].path) +
                  (indent ? 2 * (r->layers[i].depth < 8 ? r->layers[i].depth : 8) : 0);
        if (len > w)
            w = len < 60 ? len : 60;
    }
    printf("%-*s  %-14s %6s %11s %5s %9s %11s %11s %9s %8s\n", w, "layer", "class",
           "fwd n", "fwd ms", "rc n", "rc ms", "bwd ms", "self ms", "bwd nodes",
           "bwd/fwd");
    for (size_t i = 0; i < r->n; i++)
        print_row(&r->layers[i], w, indent);
    struct totals t = sum_roots(r);
    printf("%-*s  %-14s %6s %11s %5s %9s %11.3f %11.3f %9llu %8s\n", w,
           "(unattributed)", "", "", "", "", "", r->rest.un_us / 1e3,
           r->rest.un_us / 1e3, (unsigned long long)r->rest.un_nodes, "");
    printf("%-*s  %-14s %6s %11.3f %5s %9.3f %11.3f %11s %9llu %8s\n", w, "total", "",
           "", t.fwd_us / 1e3, "", t.rc_us / 1e3, t.bwd_us / 1e3, "",
           (unsigned long long)t.nodes, "");
    if (r->steps)
        printf("%llu iterations, %.3f ms each on average\n", (unsigned long long)r->steps,
               r->step_us / 1e3 / (double)r->steps);
    printf("times are inclusive of sub-layers; bwd ms sums the layer's node times "
           "(self ms: its own nodes);\ncontainers (fwd n -) show their children's "
           "sums; total = top-level rows + (unattributed)");
    if (r->rest.un_accg || r->rest.order2)
        printf(";\n%llu AccumulateGrad nodes without a layer (input leaves), "
               "%llu nodes made by backward (second order)",
               (unsigned long long)r->rest.un_accg, (unsigned long long)r->rest.order2);
    printf("\n");
}

static const struct option report_opts[] = {
    {"help", no_argument, NULL, 'h'},
    {"csv", no_argument, NULL, 'c'},
    {"sort", required_argument, NULL, 's'},
    {NULL, 0, NULL, 0},
};

/* The --sort value. @return its order, or -1. */
static int sort_order(const char *s)
{
    static const char *const names[] = {
        [GT__AGG_MODEL] = "model", [GT__AGG_FWD] = "fwd",
        [GT__AGG_BWD] = "bwd", [GT__AGG_NAME] = "name"};
    for (int i = 0; i < (int)(sizeof(names) / sizeof(names[0])); i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

/*
 * Parses the options. @return -1 to go on (TRACEs from argv[optind]), or
 * the exit status: 0 after --help, 2 on a usage error (message printed).
 */
static int parse_args(int argc, char **argv, int *csv, int *order)
{
    int ch;
    optind = 0; /* glibc: rescan from argv[1], whatever ran before */
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":h", report_opts, NULL)) != -1) {
        switch (ch) {
        case 'h':
            fputs(report_usage, stdout);
            return 0;
        case 'c':
            *csv = 1;
            break;
        case 's':
            if ((*order = sort_order(optarg)) < 0) {
                fprintf(stderr, "gradtrace report: --sort: expected model, "
                                "fwd, bwd or name, got '%s'\n%s",
                        optarg, report_usage);
                return 2;
            }
            break;
        case ':':
            fprintf(stderr, "gradtrace report: %s needs a value\n%s",
                    argv[optind - 1], report_usage);
            return 2;
        default:
            fprintf(stderr, "gradtrace report: unknown option '%s'\n%s",
                    argv[optind - 1], report_usage);
            return 2;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "gradtrace report: expected at least one TRACE\n%s",
                report_usage);
        return 2;
    }
    return -1;
}

static int is_gtr(const char *path)
{
    size_t n = strlen(path);
    return n > 4 && strcmp(path + n - 4, ".gtr") == 0;
}

int gt__cmd_report(int argc, char **argv)
{
    struct gt__agg r;
    int csv = 0, order = GT__AGG_MODEL, status;

    if ((status = parse_args(argc, argv, &csv, &order)) >= 0)
        return status;
    gt__agg_init(&r);
    for (int i = optind; i < argc; i++) {
        int rc = is_gtr(argv[i]) ? read_gtr(&r, argv[i])
                                 : gt__report_read_json(&r, argv[i]);
        if (rc < 0) {
            status = 1;
            goto out_free;
        }
    }
    if (r.n == 0) {
        fprintf(stderr, "gradtrace report: no per-layer spans in the input (was the "
                        "program a PyTorch run under gradtrace record?)\n");
        status = 1;
        goto out_free;
    }
    gt__agg_finish(&r);
    gt__agg_sort(&r, (enum gt__agg_order)order);
    print_table(&r, csv, order == GT__AGG_MODEL);
    status = 0;
out_free:
    gt__agg_close(&r);
    return status;
}
