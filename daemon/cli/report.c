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
 * layer_backward, iteration) are parsed with cJSON: memory is bounded by
 * the number of layers, never by the trace's size. A file that is not
 * line-structured (a foreign, minified trace) is parsed whole instead.
 *
 * Times are inclusive: a parent's forward contains its children's, as the
 * spans in the viewer do.
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
    "  Prints one row per layer (module path): forward calls and total time,\n"
    "  backward spans, total time and node count, inclusive of sub-layers.\n"
    "  TRACE: gradtrace trace files (.json, every rotated file of a stream)\n"
    "  or a recording (.gtr), decoded on the fly.\n"
    "  --sort   model (order of first forward call, the default), fwd or bwd (total time,\n"
    "           largest first), name\n"
    "  --csv    comma-separated output for scripts\n"
    "exit status: 0 ok, 1 unreadable input or no layer spans, 2 usage\n";

/* One trace event into the table, when it is a layer or iteration span. */
static int add_event(struct gt__agg *r, const cJSON *ev)
{
    const cJSON *cat = cJSON_GetObjectItemCaseSensitive(ev, "cat");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(ev, "name");
    const cJSON *dur = cJSON_GetObjectItemCaseSensitive(ev, "dur");
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(ev, "args");
    const cJSON *ts = cJSON_GetObjectItemCaseSensitive(ev, "ts");
    const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(args, "nodes");
    double t = cJSON_IsNumber(ts) ? ts->valuedouble : 0;

    if (!cJSON_IsString(cat) || !cJSON_IsString(name) || !cJSON_IsNumber(dur))
        return 0;
    if (strcmp(cat->valuestring, "iteration") == 0) {
        gt__agg_iteration(r, dur->valuedouble);
        return 0;
    }
    if (strcmp(cat->valuestring, "layer_forward") == 0)
        return gt__agg_span(r, 1, name->valuestring, t, dur->valuedouble, 0);
    if (strcmp(cat->valuestring, "layer_backward") == 0)
        return gt__agg_span(r, 0, name->valuestring, t, dur->valuedouble,
                            cJSON_IsNumber(nodes) ? nodes->valuedouble : 0);
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
        if (!strstr(line, "\"cat\":\"layer_") && !strstr(line, "\"cat\":\"iteration\""))
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

static void print_table(const struct gt__agg *r, int csv)
{
    int w = 5;

    for (size_t i = 0; i < r->n; i++) {
        int len = (int)strlen(r->layers[i].path);
        if (len > w)
            w = len < 60 ? len : 60;
    }
    if (csv) {
        printf("layer,class,fwd_calls,fwd_ms,bwd_spans,bwd_ms,bwd_nodes\n");
        for (size_t i = 0; i < r->n; i++) {
            const struct gt__agg_layer *l = &r->layers[i];
            printf("%s,%s,%llu,%.3f,%llu,%.3f,%llu\n", l->path, l->cls ? l->cls : "",
                   (unsigned long long)l->fwd_calls, l->fwd_us / 1e3,
                   (unsigned long long)l->bwd_spans, l->bwd_us / 1e3,
                   (unsigned long long)l->bwd_nodes);
        }
        return;
    }
    printf("%-*s  %-14s %6s %11s %6s %11s %9s %8s\n", w, "layer", "class", "fwd n",
           "fwd ms", "bwd n", "bwd ms", "bwd nodes", "bwd/fwd");
    for (size_t i = 0; i < r->n; i++) {
        const struct gt__agg_layer *l = &r->layers[i];
        char ratio[16] = "-";
        if (l->fwd_us > 0 && l->bwd_spans)
            snprintf(ratio, sizeof(ratio), "%.2f", l->bwd_us / l->fwd_us);
        printf("%-*.*s  %-14.14s %6llu %11.3f %6llu %11.3f %9llu %8s\n", w, w, l->path,
               l->cls ? l->cls : "", (unsigned long long)l->fwd_calls, l->fwd_us / 1e3,
               (unsigned long long)l->bwd_spans, l->bwd_us / 1e3,
               (unsigned long long)l->bwd_nodes, ratio);
    }
    if (r->steps)
        printf("%llu iterations, %.3f ms each on average; times are inclusive of "
               "sub-layers\n",
               (unsigned long long)r->steps, r->step_us / 1e3 / (double)r->steps);
    else
        printf("times are inclusive of sub-layers\n");
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
        if (r.steps)
            fprintf(stderr, "gradtrace report: no per-layer spans in the "
                    "input: %llu iterations were captured, but no backward "
                    "node has a layer, so no layer source was active. Python "
                    "runs get layers from gradtrace record; a C++ or CUDA C "
                    "program from NVTX ranges with GRADTRACE_LAYERS=nvtx (see "
                    "README, Agent configuration) or from gt_module_begin/end\n",
                    (unsigned long long)r.steps);
        else
            fprintf(stderr, "gradtrace report: no per-layer spans and no "
                    "backward passes in the input (was the program a PyTorch "
                    "run under gradtrace record?)\n");
        status = 1;
        goto out_free;
    }
    gt__agg_sort(&r, (enum gt__agg_order)order);
    print_table(&r, csv);
    status = 0;
out_free:
    gt__agg_close(&r);
    return status;
}
