/*
 * gradtrace report's inputs (daemon/cli/report.h): a Chrome trace read
 * line by line (only the categories summed are parsed with cJSON, and the
 * metadata lines for what was lost, the rank and the process), a foreign
 * trace whole, a recording (.gtr) through the aggregation consumer.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "common/alloc.h"
#include "common/util.h"
#include "daemon/cli/cli.h"
#include "daemon/cli/report.h"
#include "daemon/convert/agg.h"
#include "daemon/convert/consumer.h"

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
        .un_us = num_of(args, "unattributed_us", 0),
        .comm_us = num_of(args, "comm_us", 0)};
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
            .comm_us = num_of(args, "comm_us", 0),
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


static void max_u64(uint64_t *d, double v)
{
    if (v > (double)*d)
        *d = (uint64_t)v;
}

/* A metadata line "lost":{...} or "stream":{...} into jl. */
static void add_lost_line(struct gt__rep_in *jl, const char *line)
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

/* A number after key ("\"pid\":") in line, or dflt. */
static int64_t line_num(const char *line, const char *key, int64_t dflt)
{
    const char *p = strstr(line, key);
    return p ? strtoll(p + strlen(key), NULL, 10) : dflt;
}

/* A string after key ("\"hostname\":\"") in line into out (cap bytes,
 * escapes left as they are: an identity, not display text). */
static void line_str(const char *line, const char *key, char *out, size_t cap)
{
    const char *p = strstr(line, key);
    size_t n = 0;
    if (p) {
        p += strlen(key);
        while (p[n] && p[n] != '"' && n + 1 < cap)
            n += p[n] == '\\' && p[n + 1] ? 2 : 1;
        if (n + 1 > cap)
            n = cap - 1;
        memcpy(out, p, n);
    }
    out[n] = '\0';
}

/* The trace's "gradtrace":{...} line: which process wrote it. */
static void note_process(struct gt__rep_in *jl, const char *line)
{
    jl->pid = line_num(line, "\"pid\":", -1);
    jl->ppid = line_num(line, "\"ppid\":", -1);
    if (jl->rank < 0)
        jl->rank = (int32_t)line_num(line, "\"rank\":", -1);
    line_str(line, "\"hostname\":\"", jl->host, sizeof(jl->host));
    line_str(line, "\"cmdline\":\"", jl->cmd, sizeof(jl->cmd));
}

static int read_json(struct gt__agg *r, const char *path, struct gt__rep_in *jl)
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
        if (strncmp(line, "\"gradtrace\":{", 13) == 0) {
            note_process(jl, line);
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
    struct gt__rep_in jl = {.rank = -1};
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


void gt__report_in_prog(const char *prog)
{
    load_prog = prog;
}

static int is_gtr(const char *path)
{
    size_t n = strlen(path);
    return n > 4 && strcmp(path + n - 4, ".gtr") == 0;
}

int gt__report_read_input(struct gt__agg *t, const char *path,
                          struct gt__rep_in *jl)
{
    jl->rank = -1;
    int rc = is_gtr(path) ? read_gtr(t, path) : read_json(t, path, jl);
    if (!is_gtr(path))
        t->rank = jl->rank;
    return rc;
}
