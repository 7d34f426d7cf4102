/*
 * `gradtrace report`: the per-layer table, without opening a viewer.
 *
 * Input is what gradtrace writes (schema/trace-output.md): one or more
 * trace files of one stream (rotated files are summed), or a .gtr
 * recording, which is first converted into a private temporary directory
 * with the same converter as `gradtrace convert`.
 *
 * The converter writes one event per line, so the report reads line by
 * line and parses only the lines of the categories it sums (layer_forward,
 * layer_backward, iteration) with cJSON: memory is bounded by the number of
 * layers, never by the trace's size. A file that is not line-structured
 * (a foreign, minified trace) is parsed whole as a fallback.
 *
 * Times are inclusive: a parent's forward contains its children's, as the
 * spans in the viewer do.
 */
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cJSON.h>

#include "common/alloc.h"
#include "daemon/cli/cli.h"
#include "daemon/convert/convert.h"

static const char report_usage[] =
    "usage: gradtrace report [--sort model|fwd|bwd|name] [--csv] TRACE...\n"
    "  Prints one row per layer (module path): forward calls and total time,\n"
    "  backward spans, total time and node count, inclusive of sub-layers.\n"
    "  TRACE: gradtrace trace files (.json, every rotated file of a stream)\n"
    "  or a recording (.gtr), converted on the fly.\n"
    "  --sort   model (order of first forward call, the default), fwd or bwd (total time,\n"
    "           largest first), name\n"
    "  --csv    comma-separated output for scripts\n"
    "exit status: 0 ok, 1 unreadable input or no layer spans, 2 usage\n";

struct layer {
    char *path;
    char *cls;
    double first_fwd_ts; /* earliest forward start, or -1 */
    double first_ts;     /* earliest start of any span */
    uint64_t fwd_calls;
    double fwd_us;
    uint64_t bwd_spans;
    double bwd_us;
    uint64_t bwd_nodes;
};

struct report {
    struct layer *layers;
    size_t n, cap;
    uint64_t steps;
    double step_us;
    uint64_t events_seen;
};

static struct layer *layer_get(struct report *r, const char *path, size_t len)
{
    struct layer *l;

    /* Linear search is fine up to thousands of layers; the table is small
     * next to parsing the events. Index the most recent hit first. */
    for (size_t i = r->n; i-- > 0;)
        if (strlen(r->layers[i].path) == len && memcmp(r->layers[i].path, path, len) == 0)
            return &r->layers[i];
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 64;
        struct layer *nl = gt__realloc(r->layers, cap * sizeof(*nl));
        if (!nl)
            return NULL;
        r->layers = nl;
        r->cap = cap;
    }
    l = &r->layers[r->n];
    memset(l, 0, sizeof(*l));
    l->path = gt__malloc(len + 1);
    if (!l->path)
        return NULL;
    memcpy(l->path, path, len);
    l->path[len] = '\0';
    r->n++;
    l->first_fwd_ts = -1;
    l->first_ts = -1;
    return l;
}

/*
 * Splits "<path> (<Class>) forward" (or "... backward", or without the
 * class) into path and class. @return 0, or -1 when name has no phase.
 */
static int split_name(const char *name, const char *phase, size_t *path_len,
                      const char **cls, size_t *cls_len)
{
    size_t n = strlen(name), pl = strlen(phase);

    if (n < pl + 2 || strcmp(name + n - pl, phase) != 0 || name[n - pl - 1] != ' ')
        return -1;
    n -= pl + 1;
    *cls = NULL;
    *cls_len = 0;
    if (n > 0 && name[n - 1] == ')') {
        for (size_t i = n - 1; i > 1; i--) {
            if (name[i] == '(' && name[i - 1] == ' ') {
                *cls = name + i + 1;
                *cls_len = n - 1 - (i + 1);
                n = i - 1;
                break;
            }
        }
    }
    *path_len = n;
    return n ? 0 : -1;
}

static int add_event(struct report *r, const cJSON *ev)
{
    const cJSON *cat = cJSON_GetObjectItemCaseSensitive(ev, "cat");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(ev, "name");
    const cJSON *dur = cJSON_GetObjectItemCaseSensitive(ev, "dur");
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(ev, "args");
    const cJSON *ts = cJSON_GetObjectItemCaseSensitive(ev, "ts");
    double t = cJSON_IsNumber(ts) ? ts->valuedouble : 0;
    int fwd;
    size_t path_len, cls_len;
    const char *cls;
    struct layer *l;

    if (!cJSON_IsString(cat) || !cJSON_IsString(name) || !cJSON_IsNumber(dur))
        return 0;
    if (strcmp(cat->valuestring, "iteration") == 0) {
        r->steps++;
        r->step_us += dur->valuedouble;
        return 0;
    }
    if (strcmp(cat->valuestring, "layer_forward") == 0)
        fwd = 1;
    else if (strcmp(cat->valuestring, "layer_backward") == 0)
        fwd = 0;
    else
        return 0;
    if (split_name(name->valuestring, fwd ? "forward" : "backward", &path_len, &cls,
                   &cls_len) < 0)
        return 0;
    l = layer_get(r, name->valuestring, path_len);
    if (!l)
        return -ENOMEM;
    if (cls && !l->cls) {
        l->cls = gt__malloc(cls_len + 1);
        if (!l->cls)
            return -ENOMEM;
        memcpy(l->cls, cls, cls_len);
        l->cls[cls_len] = '\0';
    }
    if (l->first_ts < 0 || t < l->first_ts)
        l->first_ts = t;
    if (fwd) {
        if (l->first_fwd_ts < 0 || t < l->first_fwd_ts)
            l->first_fwd_ts = t;
        l->fwd_calls++;
        l->fwd_us += dur->valuedouble;
    } else {
        const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(args, "nodes");
        l->bwd_spans++;
        l->bwd_us += dur->valuedouble;
        if (cJSON_IsNumber(nodes) && nodes->valuedouble > 0)
            l->bwd_nodes += (uint64_t)nodes->valuedouble;
    }
    r->events_seen++;
    return 0;
}

/* Parses a whole trace document (fallback for files without line structure). */
static int add_document(struct report *r, const char *text)
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

static int read_json(struct report *r, const char *path)
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

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static int json_file(const struct dirent *e)
{
    size_t n = strlen(e->d_name);
    return n > 5 && strcmp(e->d_name + n - 5, ".json") == 0;
}

/* Converts a .gtr into a temporary directory and reads its files. */
static int read_gtr(struct report *r, const char *path)
{
    char dir[] = "/tmp/gradtrace-report.XXXXXX";
    char out[sizeof(dir) + 16];
    char *argv[6];
    int rc;

    if (!mkdtemp(dir)) {
        fprintf(stderr, "gradtrace report: mkdtemp: %s\n", strerror(errno));
        return -errno;
    }
    snprintf(out, sizeof(out), "%s/t.json", dir);
    argv[0] = (char *)"convert";
    argv[1] = (char *)path;
    argv[2] = (char *)"-o";
    argv[3] = out;
    argv[4] = (char *)"--quiet";
    argv[5] = NULL;
    rc = gt__cmd_convert(5, argv) == 0 ? 0 : -EINVAL;
    if (rc == 0) {
        /* Every file the conversion wrote: t.json and its rotations when
         * something was recorded outside capture windows, and each
         * window's t-w<id>-....json (their records are disjoint). */
        struct dirent **ents;
        int n = scandir(dir, &ents, json_file, alphasort);
        if (n <= 0)
            rc = -ENOENT;
        for (int i = 0; i < n; i++) {
            char p[sizeof(dir) + 260];
            snprintf(p, sizeof(p), "%s/%s", dir, ents[i]->d_name);
            if (rc == 0)
                rc = read_json(r, p);
            free(ents[i]);
        }
        if (n > 0)
            free(ents);
    }
    nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
    return rc;
}

static int cmp_sort;

static int cmp_layers(const void *a, const void *b)
{
    const struct layer *x = a, *y = b;
    switch (cmp_sort) {
    case 1:
        return x->fwd_us < y->fwd_us ? 1 : x->fwd_us > y->fwd_us ? -1 : 0;
    case 2:
        return x->bwd_us < y->bwd_us ? 1 : x->bwd_us > y->bwd_us ? -1 : 0;
    case 3:
        return strcmp(x->path, y->path);
    default:
        /* Model order: by first forward call (a parent starts before its
         * children), then layers never called forward (containers such as
         * ModuleList) by their first backward; ties by path. */
        if ((x->first_fwd_ts < 0) != (y->first_fwd_ts < 0))
            return x->first_fwd_ts < 0 ? 1 : -1;
        {
            double a_ts = x->first_fwd_ts < 0 ? x->first_ts : x->first_fwd_ts;
            double b_ts = y->first_fwd_ts < 0 ? y->first_ts : y->first_fwd_ts;
            if (a_ts != b_ts)
                return a_ts < b_ts ? -1 : 1;
        }
        return strcmp(x->path, y->path);
    }
}

static void print_table(const struct report *r, int csv)
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
            const struct layer *l = &r->layers[i];
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
        const struct layer *l = &r->layers[i];
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

int gt__cmd_report(int argc, char **argv)
{
    struct report r;
    int csv = 0, first = 0, status = 0;

    memset(&r, 0, sizeof(r));
    cmp_sort = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(report_usage, stdout);
            return 0;
        } else if (strcmp(argv[i], "--csv") == 0) {
            csv = 1;
        } else if (strcmp(argv[i], "--sort") == 0 && i + 1 < argc) {
            const char *s = argv[++i];
            cmp_sort = strcmp(s, "model") == 0 ? 0 : strcmp(s, "fwd") == 0 ? 1
                     : strcmp(s, "bwd") == 0   ? 2 : strcmp(s, "name") == 0 ? 3 : -1;
            if (cmp_sort < 0) {
                fprintf(stderr, "gradtrace report: --sort: expected model, fwd, bwd or name, got '%s'\n%s",
                        s, report_usage);
                return 2;
            }
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "gradtrace report: unknown option '%s'\n%s", argv[i], report_usage);
            return 2;
        } else if (!first) {
            first = i;
        }
    }
    if (!first) {
        fprintf(stderr, "gradtrace report: expected at least one TRACE\n%s", report_usage);
        return 2;
    }
    for (int i = first; i < argc; i++) {
        size_t n = strlen(argv[i]);
        int rc;
        if (argv[i][0] == '-' && argv[i][1])
            continue;
        if (i > first && strcmp(argv[i - 1], "--sort") == 0)
            continue;
        rc = n > 4 && strcmp(argv[i] + n - 4, ".gtr") == 0 ? read_gtr(&r, argv[i])
                                                          : read_json(&r, argv[i]);
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
    qsort(r.layers, r.n, sizeof(*r.layers), cmp_layers);
    print_table(&r, csv);
out_free:
    for (size_t i = 0; i < r.n; i++) {
        gt__free(r.layers[i].path);
        gt__free(r.layers[i].cls);
    }
    gt__free(r.layers);
    return status;
}
