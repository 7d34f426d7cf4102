/*
 * The converter (daemon/convert.c and friends) on hand-built record
 * streams: each test builds records with gt__recbuf, feeds them through
 * gt__conv_hello/chunk/finish into a mkdtemp directory, parses the output
 * with cJSON and checks the events it names, plus structural validity
 * (per-track nesting, flow pairs, metadata) on every file.
 */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/codec.h"
#include "daemon/convert/convert.h"
#include "tests/unit/conv_fixture.h"

#define PID 777u

/* ------------------------------------------------------------ helpers */

static void fx_open_bytes(struct conv_fx *f, uint64_t max_events,
                          uint32_t max_nodes, uint64_t max_bytes)
{
    memset(f, 0, sizeof(*f));
    strcpy(f->dir, "/tmp/gt-conv-XXXXXX");
    cr_assert_not_null(mkdtemp(f->dir));
    struct gt__conv_opts o = {.out_dir = f->dir, .stem = "t",
                             .max_file_events = max_events,
                             .max_file_bytes = max_bytes,
                             .max_pending_nodes = max_nodes};
    f->c = gt__conv_create(&o);
    cr_assert_not_null(f->c);
    fx_hello(f, PID, 3, 1, 8, "/usr/bin/python3 train.py");
}

static void fx_open(struct conv_fx *f, uint64_t max_events, uint32_t max_nodes)
{
    fx_open_bytes(f, max_events, max_nodes, 0);
}

static void sb(struct conv_fx *f, uint16_t kind, uint32_t name, uint32_t cls,
               uint64_t us)
{
    struct gt_r_scope_begin r = {{GT_R_SCOPE_BEGIN, sizeof(r)}, kind, 0, name,
                                 cls, T0 + us * 1000};
    add(f, &r, sizeof(r));
}

static void se(struct conv_fx *f, uint16_t kind, uint32_t name, uint64_t us)
{
    struct gt_r_scope_end r = {{GT_R_SCOPE_END, sizeof(r)}, kind, 0, name,
                               T0 + us * 1000};
    add(f, &r, sizeof(r));
}

static void mark(struct conv_fx *f, uint16_t type, uint64_t us, uint64_t v)
{
    struct gt_r_mark r = {{type, sizeof(r)}, 0, T0 + us * 1000, v};
    add(f, &r, sizeof(r));
}

static int64_t ns_of(const cJSON *ev, const char *key)
{
    const cJSON *v = cJSON_GetObjectItem(ev, key);
    cr_assert(cJSON_IsNumber(v), "missing %s", key);
    cr_assert(v->valuedouble >= 0);
    return llround(v->valuedouble * 1000.0);
}

static int i_of(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItem(o, key);
    cr_assert(cJSON_IsNumber(v), "missing %s", key);
    return (int)v->valuedouble;
}

struct span {
    int pid, tid;
    int64_t s, e;
};

static int span_cmp(const void *a, const void *b)
{
    const struct span *x = a, *y = b;
    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    if (x->s != y->s)
        return x->s < y->s ? -1 : 1;
    return x->e > y->e ? -1 : x->e < y->e;
}

/* Structural checks every file must pass (as tests/tools/validate_trace.py). */
static void check_file(const cJSON *doc)
{
    const cJSON *evs = cJSON_GetObjectItem(doc, "traceEvents");
    cr_assert(cJSON_IsArray(evs));
    cr_assert_str_eq(s_of(doc, "displayTimeUnit"), "ns");
    cr_assert(cJSON_IsNumber(cJSON_GetObjectItem(doc, "baseTimeNanoseconds")));
    const cJSON *g = cJSON_GetObjectItem(doc, "gradtrace");
    cr_assert(cJSON_IsObject(g));
    cr_assert_not_null(s_of(g, "converter_version"));
    int n = cJSON_GetArraySize(evs);
    struct span *sp = calloc((size_t)n + 1, sizeof(*sp));
    int ns = 0, flows_s = 0, flows_f = 0;
    long long idsum_s = 0, idsum_f = 0;
    const cJSON *ev;
    cJSON_ArrayForEach(ev, evs) {
        const char *ph = s_of(ev, "ph");
        cr_assert_not_null(ph);
        if (!strcmp(ph, "X")) {
            sp[ns].pid = i_of(ev, "pid");
            sp[ns].tid = i_of(ev, "tid");
            sp[ns].s = ns_of(ev, "ts");
            sp[ns].e = sp[ns].s + ns_of(ev, "dur");
            ns++;
        } else if (!strcmp(ph, "s")) {
            flows_s++;
            idsum_s += i_of(ev, "id");
        } else if (!strcmp(ph, "f")) {
            flows_f++;
            idsum_f += i_of(ev, "id");
            cr_assert_str_eq(s_of(ev, "bp"), "e");
        }
    }
    /* Every flow half lies in a slice on its own track, as viewers bind
     * them (tests/tools/validate_trace.py: the flow rule). */
    cJSON_ArrayForEach(ev, evs) {
        const char *ph = s_of(ev, "ph");
        if (strcmp(ph, "s") && strcmp(ph, "f"))
            continue;
        int pid = i_of(ev, "pid"), tid = i_of(ev, "tid"), in = 0;
        int64_t ts = ns_of(ev, "ts");
        for (int i = 0; i < ns && !in; i++)
            in = sp[i].pid == pid && sp[i].tid == tid && sp[i].s <= ts &&
                 (ts < sp[i].e || (sp[i].s == sp[i].e && ts == sp[i].s));
        cr_assert(in, "flow %s id %d at %lld on tid %d is in no slice", ph,
                  i_of(ev, "id"), (long long)ts, tid);
    }
    cr_assert_eq(flows_s, flows_f, "flow starts and finishes must pair");
    cr_assert_eq(idsum_s, idsum_f);
    qsort(sp, (size_t)ns, sizeof(*sp), span_cmp);
    int64_t stack[512];
    int depth = 0;
    for (int i = 0; i < ns; i++) {
        if (i == 0 || sp[i].pid != sp[i - 1].pid || sp[i].tid != sp[i - 1].tid)
            depth = 0;
        while (depth > 0 && stack[depth - 1] <= sp[i].s)
            depth--;
        cr_assert(depth == 0 || sp[i].e <= stack[depth - 1],
                  "bad nesting on pid %d tid %d at %lld", sp[i].pid,
                  sp[i].tid, (long long)sp[i].s);
        cr_assert(depth < 512);
        stack[depth++] = sp[i].e;
    }
    free(sp);
}

/* Finishes, checks every file, returns the first file parsed. */
static cJSON *finish(struct conv_fx *f, size_t *nfiles)
{
    cr_assert_eq(gt__conv_finish(f->c, NULL, 0), 0);
    const char *const *paths;
    size_t n = gt__conv_files(f->c, &paths);
    cr_assert(n >= 1);
    for (size_t i = 1; i < n; i++) {
        cJSON *d = load(paths[i]);
        check_file(d);
        cJSON_Delete(d);
    }
    if (nfiles)
        *nfiles = n;
    cJSON *doc = load(paths[0]);
    check_file(doc);
    return doc;
}

/* The n-th (0-based) event with this phase and name, or NULL. */
static const cJSON *find(const cJSON *doc, const char *ph, const char *name,
                         int nth)
{
    const cJSON *ev;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(doc, "traceEvents")) {
        if (!strcmp(s_of(ev, "ph"), ph) && s_of(ev, "name") &&
            !strcmp(s_of(ev, "name"), name) && nth-- == 0)
            return ev;
    }
    return NULL;
}

static int count(const cJSON *doc, const char *ph, const char *cat)
{
    int n = 0;
    const cJSON *ev;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(doc, "traceEvents")) {
        if (!strcmp(s_of(ev, "ph"), ph) &&
            (!cat || (s_of(ev, "cat") && !strcmp(s_of(ev, "cat"), cat))))
            n++;
    }
    return n;
}

static int anomaly(const cJSON *doc, const char *name)
{
    const cJSON *g = cJSON_GetObjectItem(doc, "gradtrace");
    return i_of(cJSON_GetObjectItem(g, "anomalies"), name);
}

/* Name of the track (pid, tid) from its thread_name metadata. */
static const char *track_name(const cJSON *doc, int pid, int tid)
{
    const cJSON *ev;
    const char *name = NULL;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(doc, "traceEvents")) {
        if (!strcmp(s_of(ev, "ph"), "M") &&
            !strcmp(s_of(ev, "name"), "thread_name") &&
            i_of(ev, "pid") == pid && i_of(ev, "tid") == tid)
            name = s_of(cJSON_GetObjectItem(ev, "args"), "name");
    }
    return name;
}

/* ------------------------------------------------------------ tests */

Test(convert, scopes_nest_on_their_thread_with_metadata, .timeout = 10)
{
    struct conv_fx f;
    fx_open(&f, 0, 0);
    str(&f, 1, "model");
    str(&f, 2, "Net");
    str(&f, 3, "fc");
    str(&f, 4, "Linear");
    str(&f, 5, "data loading");
    thr(&f, 100);
    sb(&f, GT_SCOPE_MODULE, 1, 2, 10);
    sb(&f, GT_SCOPE_MODULE, 3, 4, 12);
    se(&f, GT_SCOPE_MODULE, 3, 20);
    se(&f, GT_SCOPE_MODULE, 1, 30);
    sb(&f, GT_SCOPE_USER, 5, 0, 40);
    se(&f, GT_SCOPE_USER, 5, 45);
    feed(&f);
    cJSON *doc = finish(&f, NULL);

    const cJSON *m = find(doc, "X", "model (Net) forward", 0);
    cr_assert_not_null(m);
    cr_assert_eq(i_of(m, "pid"), (int)PID);
    cr_assert_eq(i_of(m, "tid"), 100);
    cr_assert_eq(ns_of(m, "ts"), 10000);
    cr_assert_eq(ns_of(m, "dur"), 20000);
    const cJSON *fc = find(doc, "X", "fc (Linear) forward", 0);
    cr_assert_eq(ns_of(fc, "ts"), 12000);
    cr_assert_eq(ns_of(fc, "dur"), 8000);
    const cJSON *u = find(doc, "X", "data loading", 0);
    cr_assert_str_eq(s_of(u, "cat"), "user");
    cr_assert_eq(i_of(u, "tid"), 100);
    /* The layers-forward track repeats module scopes only. */
    const cJSON *lf = find(doc, "X", "model (Net) forward", 1);
    cr_assert_not_null(lf);
    cr_assert_str_eq(s_of(lf, "cat"), "layer_forward");
    cr_assert_neq(i_of(lf, "tid"), 100);
    cr_assert_eq(count(doc, "X", "layer_forward"), 2);
    cr_assert_not_null(strstr(track_name(doc, PID, i_of(lf, "tid")),
                              "layers forward"));
    /* Process named with command, rank and pid; Kineto-style keys. */
    const cJSON *pn = find(doc, "M", "process_name", 0);
    cr_assert_str_eq(s_of(cJSON_GetObjectItem(pn, "args"), "name"),
                     "python3 [rank 3] pid 777");
    const cJSON *di = cJSON_GetObjectItem(doc, "distributedInfo");
    cr_assert_eq(i_of(di, "rank"), 3);
    /* As HTA finds a file's rank: "rank":\s+(\d+) in the file's text. */
    {
        const char *const *paths;
        cr_assert_eq(gt__conv_files(f.c, &paths), 1);
        FILE *fp = fopen(paths[0], "rb");
        char text[1 << 16];
        size_t tn = fread(text, 1, sizeof(text) - 1, fp);
        fclose(fp);
        text[tn] = 0;
        cr_assert_not_null(strstr(text, "\"rank\": 3"));
        cr_assert_null(strstr(text, "\"rank\": 0"));
    }
    cr_assert_eq(i_of(di, "world_size"), 8);
    /* ts 0 is the hello's monotonic start; base is its realtime. */
    cr_assert_eq(cJSON_GetObjectItem(doc, "baseTimeNanoseconds")->valuedouble,
                 1700000000000000000.0);
    cJSON_Delete(doc);
    fx_close(&f);
}

Test(convert, unbalanced_input_never_breaks_nesting, .timeout = 10)
{
    struct conv_fx f;
    fx_open(&f, 0, 0);
    str(&f, 1, "A");
    str(&f, 2, "B");
    str(&f, 3, "C");
    thr(&f, 100);
    se(&f, GT_SCOPE_USER, 3, 5);       /* end without begin */
    sb(&f, GT_SCOPE_USER, 1, 0, 10);
    sb(&f, GT_SCOPE_USER, 2, 0, 12);
    se(&f, GT_SCOPE_USER, 1, 20);      /* A ends while B is open */
    se(&f, GT_SCOPE_USER, 2, 25);      /* B was closed with A: ignored */
    sb(&f, GT_SCOPE_USER, 3, 0, 30);
    se(&f, GT_SCOPE_USER, 3, 28);      /* time goes backwards: clamped */
    sb(&f, GT_SCOPE_USER, 1, 0, 40);   /* never ended */
    sb(&f, GT_SCOPE_USER, 2, 0, 41);   /* never ended */
    thr(&f, 200);
    sb(&f, GT_SCOPE_USER, 3, 0, 90);
    se(&f, GT_SCOPE_USER, 3, 100);     /* the last time seen */
    feed(&f);
    /* A record before any THREAD in a chunk has no thread: dropped. */
    sb(&f, GT_SCOPE_USER, 1, 0, 50);
    feed(&f);
    cJSON *doc = finish(&f, NULL);

    const cJSON *b = find(doc, "X", "B", 0);
    cr_assert_eq(ns_of(b, "ts"), 12000);
    cr_assert_eq(ns_of(b, "dur"), 8000, "B closed when A ended");
    const cJSON *a = find(doc, "X", "A", 0);
    cr_assert_eq(ns_of(a, "ts"), 10000);
    cr_assert_eq(ns_of(a, "dur"), 10000);
    const cJSON *c = find(doc, "X", "C", 0);
    cr_assert_eq(ns_of(c, "dur"), 0, "clamped end equals the begin");
    /* Open at the end: closed at the last time seen, and marked. */
    const cJSON *a2 = find(doc, "X", "A", 1);
    cr_assert_eq(ns_of(a2, "ts"), 40000);
    cr_assert_eq(ns_of(a2, "ts") + ns_of(a2, "dur"), 100000);
    cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(a2, "args"),
                                               "unclosed")));
    cr_assert_eq(anomaly(doc, "end_without_begin"), 2);
    cr_assert_eq(anomaly(doc, "closed_implicitly"), 1);
    cr_assert_eq(anomaly(doc, "time_backwards"), 1);
    cr_assert_eq(anomaly(doc, "closed_at_finish"), 2);
    cr_assert_eq(anomaly(doc, "no_thread"), 1);
    cJSON_Delete(doc);
    fx_close(&f);
}

Test(convert, backward_nodes_get_layer_and_fwdbwd_flows, .timeout = 10)
{
    struct conv_fx f;
    fx_open(&f, 0, 0);
    str(&f, 1, "fc");
    str(&f, 2, "Linear");
    str(&f, 3, "AddmmBackward0");
    str(&f, 4, "Mystery\"Backward\"");
    thr(&f, 100);
    sb(&f, GT_SCOPE_MODULE, 1, 2, 10);
    created(&f, 1, 41, 11);
    se(&f, GT_SCOPE_MODULE, 1, 20);
    thr(&f, 101); /* the engine's worker thread */
    node(&f, 3, 41, 50, 60);
    node(&f, 4, 99, 61, 62); /* no creation seen */
    struct gt_r_bwd_node_begin ub = {{GT_R_BWD_NODE_BEGIN, sizeof(ub)}, 4,
                                     T0 + 63000, UINT64_MAX, 0};
    struct gt_r_bwd_node_end ue = {{GT_R_BWD_NODE_END, sizeof(ue)}, 0,
                                   T0 + 64000, UINT64_MAX, 0};
    add(&f, &ub, sizeof(ub));
    add(&f, &ue, sizeof(ue));
    feed(&f);
    cJSON *doc = finish(&f, NULL);

    const cJSON *n = find(doc, "X", "AddmmBackward0", 0);
    cr_assert_not_null(n);
    const cJSON *args = cJSON_GetObjectItem(n, "args");
    cr_assert_eq(i_of(args, "seq"), 41);
    cr_assert_eq(i_of(args, "fwd_tid"), 1);
    cr_assert_str_eq(s_of(args, "layer"), "fc");
    cr_assert_not_null(strstr(track_name(doc, PID, i_of(n, "tid")),
                              "backward nodes"));
    const cJSON *s = find(doc, "s", "fwdbwd", 0);
    const cJSON *fl = find(doc, "f", "fwdbwd", 0);
    cr_assert_not_null(s);
    cr_assert_not_null(fl);
    cr_assert_eq(i_of(s, "id"), i_of(fl, "id"));
    cr_assert_eq(i_of(s, "tid"), 100, "flow starts on the forward thread");
    cr_assert_eq(ns_of(s, "ts"), 11000, "at the node's creation");
    cr_assert_eq(i_of(fl, "tid"), i_of(n, "tid"));
    cr_assert_eq(ns_of(fl, "ts"), ns_of(n, "ts"));
    cr_assert_eq(count(doc, "s", "fwdbwd"), 1);
    /* seq 99 waits for a creation that never comes, so it is written
     * after the seq-less node: tell them apart by their args. */
    const cJSON *m = find(doc, "X", "Mystery\"Backward\"", 0);
    const cJSON *u = find(doc, "X", "Mystery\"Backward\"", 1);
    if (cJSON_GetObjectItem(cJSON_GetObjectItem(m, "args"), "seq") == NULL) {
        const cJSON *t = m;
        m = u;
        u = t;
    }
    cr_assert_eq(i_of(cJSON_GetObjectItem(m, "args"), "seq"), 99);
    cr_assert(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetObjectItem(m, "args"),
                                               "layer")));
    cr_assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(u, "args"), "seq"));
    cr_assert_eq(anomaly(doc, "nodes_without_creation"), 1,
                 "seq 99 only: an unknown seq is the agent's own report");
    cJSON_Delete(doc);
    fx_close(&f);
}

Test(convert, node_map_is_bounded_and_counts_evictions, .timeout = 10)
{
    struct conv_fx f;
    fx_open(&f, 0, 4);
    str(&f, 1, "fc");
    str(&f, 3, "AddmmBackward0");
    thr(&f, 100);
    for (uint64_t i = 0; i < 10; i++)
        created(&f, 1, i, 10 + i);
    for (uint64_t i = 10; i-- > 0;)
        node(&f, 3, i, 100 + 10 * (9 - i), 105 + 10 * (9 - i));
    feed(&f);
    cJSON *doc = finish(&f, NULL);
    cr_assert_eq(count(doc, "X", "backward"), 10);
    cr_assert_eq(count(doc, "s", "fwdbwd"), 4, "only the 4 newest kept");
    cr_assert_eq(anomaly(doc, "node_map_evicted"), 6);
    cr_assert_eq(anomaly(doc, "nodes_without_creation"), 6);
    cJSON_Delete(doc);
    fx_close(&f);
}

/* Creates module scopes for path (class cls) around one node each. */
static void fwd_node(struct conv_fx *f, uint32_t path, uint32_t cls, uint64_t seq,
                     uint64_t us)
{
    sb(f, GT_SCOPE_MODULE, path, cls, us);
    created(f, path, seq, us + 1);
    se(f, GT_SCOPE_MODULE, path, us + 2);
}

Test(convert, per_layer_backward_spans_nest_and_cover_descendants,
     .timeout = 10)
{
    struct conv_fx f;
    fx_open(&f, 0, 0);
    str(&f, 1, "Net");
    str(&f, 2, "layers.0");
    str(&f, 3, "layers.0.fc1");
    str(&f, 4, "layers.0.fc2");
    str(&f, 5, "layers.1");
    str(&f, 6, "layers.1.fc1");
    str(&f, 7, "Linear");
    str(&f, 8, "Block");
    str(&f, 9, "AddmmBackward0");
    thr(&f, 100);
    sb(&f, GT_SCOPE_MODULE, 1, 1, 1);
    sb(&f, GT_SCOPE_MODULE, 2, 8, 2);
    fwd_node(&f, 3, 7, 0, 3);
    fwd_node(&f, 4, 7, 1, 6);
    se(&f, GT_SCOPE_MODULE, 2, 9);
    sb(&f, GT_SCOPE_MODULE, 5, 8, 10);
    fwd_node(&f, 6, 7, 2, 11);
    se(&f, GT_SCOPE_MODULE, 5, 14);
    se(&f, GT_SCOPE_MODULE, 1, 15);
    mark(&f, GT_R_BWD_PASS_BEGIN, 100, 0);
    node(&f, 9, 2, 110, 120); /* layers.1.fc1 */
    node(&f, 9, 1, 130, 140); /* layers.0.fc2 */
    node(&f, 9, 0, 150, 160); /* layers.0.fc1 */
    mark(&f, GT_R_BWD_PASS_END, 170, 0);
    feed(&f);
    cJSON *doc = finish(&f, NULL);

    static const struct {
        const char *name;
        int64_t s, e;
    } want[] = {
        {"Net (Net) backward", 110, 160},
        {"layers backward", 110, 160},
        {"layers.1 (Block) backward", 110, 120},
        {"layers.1.fc1 (Linear) backward", 110, 120},
        {"layers.0 (Block) backward", 130, 160},
        {"layers.0.fc2 (Linear) backward", 130, 140},
        {"layers.0.fc1 (Linear) backward", 150, 160},
        {"backward pass #0", 100, 170},
    };
    int tid = -1;
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        const cJSON *e = find(doc, "X", want[i].name, 0);
        cr_assert_not_null(e, "%s", want[i].name);
        cr_assert_eq(ns_of(e, "ts"), want[i].s * 1000, "%s", want[i].name);
        cr_assert_eq(ns_of(e, "ts") + ns_of(e, "dur"), want[i].e * 1000, "%s",
                     want[i].name);
        if (tid < 0)
            tid = i_of(e, "tid");
        cr_assert_eq(i_of(e, "tid"), tid, "all on one track: %s",
                     want[i].name);
    }
    cr_assert_str_eq(track_name(doc, PID, tid), "Layers backward");
    const cJSON *l0 = find(doc, "X", "layers.0 (Block) backward", 0);
    cr_assert_eq(i_of(cJSON_GetObjectItem(l0, "args"), "nodes"), 2);
    /* The pass end without step marks makes the iteration span. */
    const cJSON *it = find(doc, "X", "ProfilerStep#0", 0);
    cr_assert_not_null(it);
    cr_assert_eq(ns_of(it, "ts") + ns_of(it, "dur"), 170000);
    cJSON_Delete(doc);
    fx_close(&f);
}

Test(convert, interleaved_sibling_layers_go_to_an_overlap_track,
     .timeout = 10)
{
    struct conv_fx f;
    fx_open(&f, 0, 0);
    str(&f, 1, "a");
    str(&f, 2, "b");
    str(&f, 3, "Node");
    thr(&f, 100);
    created(&f, 1, 0, 1);
    created(&f, 2, 1, 2);
    created(&f, 1, 2, 3);
    mark(&f, GT_R_BWD_PASS_BEGIN, 10, 4);
    node(&f, 3, 0, 20, 21); /* a: 20..41 */
    node(&f, 3, 1, 30, 31); /* b: 30..31, inside a's span: nests */
    node(&f, 3, 2, 40, 41);
    mark(&f, GT_R_BWD_PASS_END, 50, 4);
    mark(&f, GT_R_BWD_PASS_BEGIN, 60, 5);
    node(&f, 3, 0, 70, 71); /* nothing re-created: no layer, no span */
    mark(&f, GT_R_BWD_PASS_END, 80, 5);
    feed(&f);
    thr(&f, 100);
    created(&f, 1, 10, 81);
    created(&f, 2, 11, 82);
    created(&f, 1, 12, 83);
    created(&f, 2, 13, 84);
    mark(&f, GT_R_BWD_PASS_BEGIN, 90, 6);
    node(&f, 3, 10, 100, 101); /* a: 100..121 */
    node(&f, 3, 11, 110, 111); /* b: 110..131 overlaps a partially */
    node(&f, 3, 12, 120, 121);
    node(&f, 3, 13, 130, 131);
    mark(&f, GT_R_BWD_PASS_END, 140, 6);
    feed(&f);
    cJSON *doc = finish(&f, NULL);
    const cJSON *a = find(doc, "X", "a backward", 1);
    const cJSON *b = find(doc, "X", "b backward", 1);
    cr_assert_not_null(a);
    cr_assert_not_null(b);
    cr_assert_eq(ns_of(b, "ts"), 110000);
    cr_assert_neq(i_of(a, "tid"), i_of(b, "tid"), "overlap moved away");
    cr_assert_not_null(strstr(track_name(doc, PID, i_of(b, "tid")),
                              "(overlap 1)"));
    cr_assert_eq(anomaly(doc, "overlap_moved"), 1);
    cr_assert_eq(count(doc, "X", "backward_pass"), 3);
    cJSON_Delete(doc);
    fx_close(&f);
}

static void api(struct conv_fx *f, uint32_t tid, uint32_t corr, uint64_t s,
                uint64_t e)
{
    struct gt_r_cuda_api r = {{GT_R_CUDA_API, sizeof(r)}, tid, 211, corr, 20,
                              T0 + s * 1000, T0 + e * 1000};
    add(f, &r, sizeof(r));
}

static void kernel(struct conv_fx *f, uint32_t dev, uint32_t stream, uint32_t corr,
                   uint64_t s, uint64_t e)
{
    struct gt_r_gpu_kernel r = {{GT_R_GPU_KERNEL, sizeof(r)}, dev, stream, 21,
                                corr, T0 + s * 1000, T0 + e * 1000,
                                {2, 3, 4}, {128, 1, 1}, 1024, 40};
    add(f, &r, sizeof(r));
}

Test(convert, gpu_activity_on_device_tracks_with_ac2g_flows, .timeout = 10)
{
    struct conv_fx f;
    fx_open(&f, 0, 0);
    str(&f, 20, "cudaLaunchKernel");
    str(&f, 21, "gemm<float>");
    str(&f, 22, "layers.3.fc1");
    struct gt_r_ext_corr x = {{GT_R_EXT_CORR, sizeof(x)}, GT_EXT_LAYER_BWD, 0,
                              7, 22};
    add(&f, &x, sizeof(x));
    api(&f, 100, 7, 10, 15);          /* API first ... */
    kernel(&f, 1, 13, 7, 20, 30);     /* ... then its kernel */
    kernel(&f, 1, 13, 8, 40, 50);     /* kernel first ... */
    api(&f, 100, 8, 35, 38);          /* ... then its API */
    kernel(&f, 1, 13, 9, 45, 48);     /* nests inside the previous: kept */
    kernel(&f, 1, 13, 10, 49, 60);    /* overlaps without nesting: moved */
    /* 9 and 10 never get their launch: no arrow for them. */
    struct gt_r_gpu_memcpy mc = {{GT_R_GPU_MEMCPY, sizeof(mc)}, 1, 14, 0, 1,
                                 0, 0, 0, 4096, T0 + 70000, T0 + 71000};
    add(&f, &mc, sizeof(mc));
    feed(&f);
    cJSON *doc = finish(&f, NULL);

    const cJSON *k = find(doc, "X", "gemm<float>", 0);
    cr_assert_not_null(k);
    cr_assert_eq(i_of(k, "pid"), 0x40000001, "GPU 1's pid");
    cr_assert_eq(i_of(k, "tid"), 13, "the stream is the tid");
    cr_assert_str_eq(s_of(k, "cat"), "kernel");
    const cJSON *ka = cJSON_GetObjectItem(k, "args");
    cr_assert_eq(i_of(ka, "correlation"), 7);
    cr_assert_eq(cJSON_GetArrayItem(cJSON_GetObjectItem(ka, "grid"), 2)
                     ->valueint, 4);
    cr_assert_str_eq(s_of(ka, "layer"), "layers.3.fc1");
    cr_assert_str_eq(s_of(ka, "phase"), "backward");
    cr_assert_str_eq(track_name(doc, 0x40000001, 13), "stream 13");
    const cJSON *pn;
    int gpu_named = 0;
    for (int i = 0; (pn = find(doc, "M", "process_name", i)); i++)
        if (i_of(pn, "pid") == 0x40000001)
            gpu_named = !strcmp(s_of(cJSON_GetObjectItem(pn, "args"), "name"),
                                "GPU 1");
    cr_assert(gpu_named);
    const cJSON *a = find(doc, "X", "cudaLaunchKernel", 0);
    cr_assert_eq(i_of(a, "pid"), (int)PID);
    cr_assert_not_null(strstr(track_name(doc, PID, i_of(a, "tid")),
                              "CUDA API"));
    cr_assert_eq(count(doc, "s", "ac2g"), 2, "both arrival orders link");
    const cJSON *s = find(doc, "s", "ac2g", 0);
    const cJSON *fl = find(doc, "f", "ac2g", 0);
    cr_assert_eq(ns_of(s, "ts"), 10000);
    cr_assert_eq(ns_of(fl, "ts"), 20000);
    cr_assert_eq(i_of(fl, "tid"), 13);
    cr_assert_eq(anomaly(doc, "overlap_moved"), 1);
    const cJSON *m = find(doc, "X", "Memcpy HtoD", 0);
    cr_assert_eq(i_of(cJSON_GetObjectItem(m, "args"), "bytes"), 4096);
    cJSON_Delete(doc);
    fx_close(&f);
}

Test(convert, rotation_keeps_every_file_whole_and_flows_paired,
     .timeout = 20)
{
    struct conv_fx f;
    fx_open(&f, 50, 0);
    str(&f, 1, "blk");
    str(&f, 2, "Block");
    str(&f, 3, "MulBackward0");
    for (int it = 0; it < 20; it++) {
        uint64_t t = 1000 * (uint64_t)it;
        thr(&f, 100);
        for (uint64_t k = 0; k < 5; k++)
            fwd_node(&f, 1, 2, (uint64_t)it * 5 + k, t + 10 * k);
        thr(&f, 101);
        for (uint64_t k = 5; k-- > 0;)
            node(&f, 3, (uint64_t)it * 5 + k, t + 500 + 10 * (4 - k),
                 t + 505 + 10 * (4 - k));
        feed(&f);
    }
    size_t nfiles;
    cJSON *doc = finish(&f, &nfiles);
    cr_assert(nfiles >= 5, "rotated into %zu files", nfiles);
    const char *const *paths;
    gt__conv_files(f.c, &paths);
    cr_assert_not_null(strstr(paths[1], "/t.1.pt.trace.json"));
    int flows = 0;
    for (size_t i = 0; i < nfiles; i++) {
        cJSON *d = load(paths[i]);
        const cJSON *g = cJSON_GetObjectItem(d, "gradtrace");
        cr_assert_eq(i_of(g, "file_index"), (int)i);
        cr_assert_eq(i_of(g, "file_count"), (int)nfiles);
        if (i + 1 < nfiles)
            cr_assert_str_eq(s_of(g, "next_file"), paths[i + 1]);
        else
            cr_assert(cJSON_IsNull(cJSON_GetObjectItem(g, "next_file")));
        /* Each file names its own process and threads. */
        cr_assert_not_null(find(d, "M", "process_name", 0));
        flows += count(d, "s", "fwdbwd");
        cJSON_Delete(d);
    }
    cr_assert_eq(flows, 100, "every node's arrow, none lost or split");
    cJSON_Delete(doc);
    fx_close(&f);
}

/* The compiled-graph records (wire types 40-44) are known to this
 * converter: skipped without counting them unknown; a wrong size is
 * bad, as for every fixed type. Nothing of them is in the trace yet. */
Test(convert, compiled_graph_records_are_known, .timeout = 10)
{
    struct conv_fx f;
    fx_open(&f, 0, 0);
    str(&f, 1, "k");
    thr(&f, 100);
    struct gt_r_compiled_graph g = {{GT_R_COMPILED_GRAPH, sizeof(g)}, 1, 1, 0, 0,
                                    GT_COMPILED_FORWARD, 0, 1, T0};
    add(&f, &g, sizeof(g));
    struct gt_r_compiled_call c = {{GT_R_COMPILED_CALL, sizeof(c)}, 1, 0, 1, 1, 1, 0,
                                   GT_COMPILED_FORWARD, 0};
    add(&f, &c, sizeof(c));
    struct gt_r_compiled_region rb = {{GT_R_COMPILED_BEGIN, sizeof(rb)}, 1, 0, 0, T0 + 1000};
    add(&f, &rb, sizeof(rb));
    struct gt_r_compiled_region re = {{GT_R_COMPILED_END, sizeof(re)}, 1, 0, 0, T0 + 2000};
    add(&f, &re, sizeof(re));
    struct gt_r_compile_span sp = {{GT_R_COMPILE_SPAN, sizeof(sp)}, 1, 0, T0, T0 + 500};
    add(&f, &sp, sizeof(sp));
    struct {
        struct gt_rec h;
        uint32_t graph;
    } shorty = {{GT_R_COMPILED_BEGIN, sizeof(shorty)}, 1};
    add(&f, &shorty, sizeof(shorty));
    struct gt_r_instant in = {{GT_R_INSTANT, sizeof(in)}, 1, T0 + 3000};
    add(&f, &in, sizeof(in));
    feed(&f);
    cJSON *doc = finish(&f, NULL);
    cr_assert_not_null(find(doc, "i", "k", 0), "records after them still convert");
    cr_assert_eq(anomaly(doc, "unknown_records"), 0);
    cr_assert_eq(anomaly(doc, "bad_records"), 1, "the short region record");
    cJSON_Delete(doc);
    fx_close(&f);
}

Test(convert, malformed_and_unknown_records_are_counted, .timeout = 10)
{
    struct conv_fx f;
    fx_open(&f, 0, 0);
    str(&f, 1, "ok\x01\xff");
    thr(&f, 100);
    struct {
        struct gt_rec h;
        uint8_t junk[12];
    } unknown = {{200, sizeof(unknown)}, {0}};
    add(&f, &unknown, sizeof(unknown));
    struct {
        struct gt_rec h;
        uint32_t x;
    } shorty = {{GT_R_SCOPE_BEGIN, sizeof(shorty)}, 1};
    add(&f, &shorty, sizeof(shorty));
    struct gt_r_instant in = {{GT_R_INSTANT, sizeof(in)}, 1, T0 + 5000};
    add(&f, &in, sizeof(in));
    struct gt_r_instant un = {{GT_R_INSTANT, sizeof(un)}, 999, T0 + 6000};
    add(&f, &un, sizeof(un));
    struct gt_r_lost lost = {{GT_R_LOST, sizeof(lost)}, 100, GT_LOST_EVENTS,
                             5};
    add(&f, &lost, sizeof(lost));
    lost.count = 9; /* cumulative: replaces the 5 */
    add(&f, &lost, sizeof(lost));
    feed(&f);
    cJSON *doc = finish(&f, NULL);
    const cJSON *i = find(doc, "i", "ok\x01\xef\xbf\xbd", 0);
    cr_assert_not_null(i, "instant with an escaped, repaired name");
    cr_assert_eq(ns_of(i, "ts"), 5000);
    cr_assert_not_null(find(doc, "i", "(unknown string)", 0));
    cr_assert_eq(anomaly(doc, "unknown_records"), 1);
    cr_assert_eq(anomaly(doc, "bad_records"), 1);
    cr_assert_eq(anomaly(doc, "unknown_strings"), 1);
    const cJSON *g = cJSON_GetObjectItem(doc, "gradtrace");
    cr_assert_eq(i_of(cJSON_GetObjectItem(g, "lost"), "events"), 9);
    cr_assert_eq(count(doc, "C", NULL), 2);
    cJSON_Delete(doc);
    fx_close(&f);
}

Test(convert, step_marks_define_profiler_steps, .timeout = 10)
{
    struct conv_fx f;
    fx_open(&f, 0, 0);
    str(&f, 1, "x");
    thr(&f, 100);
    sb(&f, GT_SCOPE_USER, 1, 0, 10);
    se(&f, GT_SCOPE_USER, 1, 20);
    mark(&f, GT_R_BWD_PASS_BEGIN, 30, 0);
    mark(&f, GT_R_BWD_PASS_END, 40, 0);
    mark(&f, GT_R_STEP, 50, 1); /* supersedes the pass-based boundary */
    mark(&f, GT_R_BWD_PASS_BEGIN, 60, 1);
    mark(&f, GT_R_BWD_PASS_END, 70, 1);
    mark(&f, GT_R_STEP, 80, 2);
    feed(&f);
    mark(&f, GT_R_STEP, 75, 3); /* no thread to clamp it: out of order */
    feed(&f);
    cJSON *doc = finish(&f, NULL);
    cr_assert_eq(count(doc, "X", "user_annotation"), 2);
    const cJSON *s1 = find(doc, "X", "ProfilerStep#1", 0);
    cr_assert_eq(ns_of(s1, "ts"), 10000, "from the first event");
    cr_assert_eq(ns_of(s1, "dur"), 40000);
    /* It starts with the scope at 10 but is written after it: viewers
     * nest equal starts by file order, so not on tid 100. */
    cr_assert_str_eq(track_name(doc, PID, i_of(s1, "tid")), "Iterations");
    cr_assert_eq(i_of(cJSON_GetObjectItem(s1, "args"), "step"), 1);
    const cJSON *s2 = find(doc, "X", "ProfilerStep#2", 0);
    cr_assert_eq(ns_of(s2, "ts"), 50000);
    cr_assert_eq(ns_of(s2, "dur"), 30000);
    cr_assert_eq(i_of(s2, "tid"), 100, "on the thread that ran the step");
    cr_assert_null(find(doc, "X", "ProfilerStep#0", 0));
    cr_assert_eq(anomaly(doc, "steps_out_of_order"), 1);
    cJSON_Delete(doc);
    fx_close(&f);
}

Test(convert, window_segments_are_spans_and_metadata_of_its_file, .timeout = 10)
{
    struct conv_fx f;
    fx_open(&f, 0, 0);
    str(&f, 1, "layer=layers.17,phase=backward");
    str(&f, 2, "layers.17");
    struct gt_r_window w = {{GT_R_WINDOW_BEGIN, sizeof(w)}, 1, 1, 2,
                            T0 + 100000, 200};
    add(&f, &w, sizeof(w));
    w.h.type = GT_R_WINDOW_END;
    w.ts = T0 + 150000;
    add(&f, &w, sizeof(w));
    w.h.type = GT_R_WINDOW_END; /* no begin */
    w.id = 9;
    add(&f, &w, sizeof(w));
    feed(&f);
    /* The window is its own file (test_convert_window.c has the routing);
     * its segments are spans and its metadata lists them. */
    size_t n;
    cJSON *doc = finish(&f, &n);
    cr_assert_eq(n, 1, "no main file: nothing was recorded outside");
    const cJSON *span = find(doc, "X", "window #1", 0);
    cr_assert_not_null(span);
    cr_assert_eq(ns_of(span, "dur"), 50000);
    const cJSON *g = cJSON_GetObjectItem(doc, "gradtrace");
    const cJSON *wl = cJSON_GetObjectItem(g, "windows");
    cr_assert_eq(cJSON_GetArraySize(wl), 1);
    cr_assert_str_eq(s_of(cJSON_GetArrayItem(wl, 0), "layer"), "layers.17");
    cr_assert_str_eq(s_of(cJSON_GetObjectItem(g, "window"), "state"), "cut");
    cJSON_Delete(doc);
    fx_close(&f);
}

Test(convert, rotation_by_size_splits_near_the_limit, .timeout = 20)
{
    struct conv_fx f;
    fx_open_bytes(&f, 0, 0, 8192);
    str(&f, 1, "a rather long scope name to fill files quickly");
    thr(&f, 100);
    for (uint64_t i = 0; i < 2000; i++) {
        sb(&f, GT_SCOPE_USER, 1, 0, 10 * i);
        se(&f, GT_SCOPE_USER, 1, 10 * i + 5);
    }
    feed(&f);
    size_t n;
    cJSON *doc = finish(&f, &n);
    cJSON_Delete(doc);
    const char *const *paths;
    gt__conv_files(f.c, &paths);
    cr_assert(n > 10, "%zu files", n);
    int total = 0;
    for (size_t i = 0; i < n; i++) {
        FILE *fp = fopen(paths[i], "rb");
        fseek(fp, 0, SEEK_END);
        long sz = ftell(fp);
        fclose(fp);
        /* Past the limit by at most one event plus the metadata tail. */
        cr_assert(sz < 8192 + 4096, "%s is %ld bytes", paths[i], sz);
        if (i + 1 < n)
            cr_assert(sz >= 8192, "%s rotated early (%ld)", paths[i], sz);
        cJSON *d = load(paths[i]);
        total += count(d, "X", "user");
        cJSON_Delete(d);
    }
    cr_assert_eq(total, 2000, "no span lost or duplicated by rotation");
    fx_close(&f);
}

Test(convert, without_pass_marks_each_backward_gets_its_own_spans,
     .timeout = 10)
{
    struct conv_fx f;
    fx_open(&f, 0, 0);
    str(&f, 1, "fc");
    str(&f, 2, "Linear");
    str(&f, 3, "AddmmBackward0");
    thr(&f, 100);
    for (uint64_t it = 0; it < 3; it++) {
        uint64_t t = 1000 * it;
        fwd_node(&f, 1, 2, 2 * it, t);
        fwd_node(&f, 1, 2, 2 * it + 1, t + 10);
        node(&f, 3, 2 * it + 1, t + 100, t + 110);
        node(&f, 3, 2 * it, t + 120, t + 130);
    }
    feed(&f);
    cJSON *doc = finish(&f, NULL);
    cr_assert_eq(count(doc, "X", "layer_backward"), 3, "one per backward");
    cr_assert_eq(count(doc, "X", "backward_pass"), 0);
    for (int it = 0; it < 3; it++) {
        const cJSON *e = find(doc, "X", "fc (Linear) backward", it);
        cr_assert_eq(ns_of(e, "ts"), (1000 * it + 100) * 1000);
        cr_assert_eq(ns_of(e, "dur"), 30000);
    }
    cJSON_Delete(doc);
    fx_close(&f);
}

Test(convert, pass_groups_follow_time_not_arrival_order, .timeout = 10)
{
    struct conv_fx f;
    fx_open(&f, 0, 0);
    str(&f, 1, "fc");
    str(&f, 2, "Linear");
    str(&f, 3, "AddmmBackward0");
    thr(&f, 100);
    for (uint64_t k = 0; k < 4; k++)
        fwd_node(&f, 1, 2, k, 10 * k);
    feed(&f);
    /* One chunk: the worker's block comes before the main thread's, which
     * holds the pass begin and end and the next forward's first node. */
    thr(&f, 101);
    node(&f, 3, 3, 110, 120);
    node(&f, 3, 2, 130, 140);
    thr(&f, 100);
    mark(&f, GT_R_BWD_PASS_BEGIN, 100, 0);
    mark(&f, GT_R_BWD_PASS_END, 200, 0);
    fwd_node(&f, 1, 2, 10, 300);
    feed(&f);
    /* The next chunk: the rest of that backward, late. */
    thr(&f, 101);
    node(&f, 3, 1, 150, 160);
    node(&f, 3, 0, 170, 180);
    feed(&f);
    thr(&f, 100); /* and one more chunk, after which the pass is closed */
    mark(&f, GT_R_STEP, 400, 1);
    feed(&f);
    thr(&f, 101);
    node(&f, 3, 10, 500, 510); /* no pass open: its own group */
    feed(&f);
    cJSON *doc = finish(&f, NULL);
    const cJSON *e = find(doc, "X", "fc (Linear) backward", 0);
    cr_assert_not_null(e);
    cr_assert_eq(ns_of(e, "ts"), 110000);
    cr_assert_eq(ns_of(e, "ts") + ns_of(e, "dur"), 180000);
    cr_assert_eq(i_of(cJSON_GetObjectItem(e, "args"), "nodes"), 4);
    cr_assert_eq(count(doc, "X", "backward_pass"), 1);
    const cJSON *late = find(doc, "X", "fc (Linear) backward", 1);
    cr_assert_eq(ns_of(late, "ts"), 500000);
    cr_assert_eq(count(doc, "X", "layer_backward"), 2);
    cJSON_Delete(doc);
    fx_close(&f);
}

Test(convert, creations_read_after_their_nodes_still_attribute, .timeout = 10)
{
    struct conv_fx f;
    fx_open(&f, 0, 0);
    str(&f, 1, "head");
    str(&f, 2, "Linear");
    str(&f, 3, "AddmmBackward0");
    /* The worker's block is read first: nodes 1 and 0 before the forward
     * thread's block that created them. */
    thr(&f, 101);
    node(&f, 3, 1, 100, 110);
    node(&f, 3, 0, 120, 130);
    thr(&f, 100);
    fwd_node(&f, 1, 2, 0, 10);
    feed(&f);
    thr(&f, 100);
    fwd_node(&f, 1, 2, 1, 20); /* one chunk later: still in time */
    feed(&f);
    thr(&f, 101);
    node(&f, 3, 7, 200, 210); /* its creation never comes */
    feed(&f);
    thr(&f, 100);
    feed(&f);
    thr(&f, 100);
    fwd_node(&f, 1, 2, 7, 300); /* two chunks late: too late */
    feed(&f);
    cJSON *doc = finish(&f, NULL);
    cr_assert_eq(count(doc, "s", "fwdbwd"), 2);
    for (int i = 0; i < 3; i++) {
        const cJSON *n = find(doc, "X", "AddmmBackward0", i);
        const cJSON *a = cJSON_GetObjectItem(n, "args");
        if (i_of(a, "seq") == 7)
            cr_assert(cJSON_IsNull(cJSON_GetObjectItem(a, "layer")));
        else
            cr_assert_str_eq(s_of(a, "layer"), "head");
    }
    cr_assert_eq(anomaly(doc, "nodes_without_creation"), 1);
    const cJSON *s = find(doc, "s", "fwdbwd", 0);
    cr_assert_eq(i_of(s, "tid"), 100);
    cJSON_Delete(doc);
    fx_close(&f);
}

Test(convert, parents_precede_children_that_start_with_them, .timeout = 10)
{
    struct conv_fx f;
    fx_open(&f, 0, 0);
    str(&f, 1, "outer");
    str(&f, 2, "middle");
    str(&f, 3, "inner");
    str(&f, 4, "later");
    thr(&f, 100);
    sb(&f, GT_SCOPE_USER, 1, 0, 10);
    sb(&f, GT_SCOPE_USER, 2, 0, 10);
    sb(&f, GT_SCOPE_USER, 3, 0, 10);
    se(&f, GT_SCOPE_USER, 3, 12);
    se(&f, GT_SCOPE_USER, 2, 14);
    sb(&f, GT_SCOPE_USER, 4, 0, 15);
    se(&f, GT_SCOPE_USER, 4, 16);
    se(&f, GT_SCOPE_USER, 1, 20);
    sb(&f, GT_SCOPE_USER, 1, 0, 30); /* left open: closed at finish */
    sb(&f, GT_SCOPE_USER, 2, 0, 30);
    feed(&f);
    cJSON *doc = finish(&f, NULL);
    /* File order of the X events: a same-start child never comes before
     * its parent (viewers nest equal starts by file order). */
    const char *order[8];
    int n = 0;
    const cJSON *ev;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(doc, "traceEvents")) {
        if (!strcmp(s_of(ev, "ph"), "X") && n < 8)
            order[n++] = s_of(ev, "name");
    }
    cr_assert_eq(n, 6);
    cr_assert_str_eq(order[0], "later"); /* starts later: written at once */
    cr_assert_str_eq(order[1], "outer");
    cr_assert_str_eq(order[2], "middle");
    cr_assert_str_eq(order[3], "inner");
    cr_assert_str_eq(order[4], "outer");
    cr_assert_str_eq(order[5], "middle");
    const cJSON *in = find(doc, "X", "inner", 0);
    cr_assert_eq(ns_of(in, "dur"), 2000, "held, not changed");
    cJSON_Delete(doc);
    fx_close(&f);
}

Test(convert, collectives_are_kept_as_metadata_newest_256, .timeout = 10)
{
    struct conv_fx f;
    fx_open(&f, 0, 0);
    str(&f, 1, "all_reduce");
    thr(&f, 100);
    user_scope(&f, 1, 1, 2); /* something for the main file */
    for (uint64_t k = 0; k < 300; k++) {
        struct gt_r_collective r = {{GT_R_COLLECTIVE, sizeof(r)}, 1, 0, 4, k,
                                    T0 + k * 1000, T0 + k * 1000 + 500};
        add(&f, &r, sizeof(r));
    }
    feed(&f);
    cJSON *doc = finish(&f, NULL);
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(doc, "gradtrace");
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(g, "collectives");
    cr_assert_eq(i_of(g, "collectives_total"), 300);
    cr_assert_eq(cJSON_GetArraySize(list), 256);
    const cJSON *first = cJSON_GetArrayItem(list, 0), *last = cJSON_GetArrayItem(list, 255);
    cr_assert_eq(i_of(first, "seq"), 44, "oldest kept first");
    cr_assert_eq(i_of(last, "seq"), 299);
    cr_assert_str_eq(s_of(last, "op"), "all_reduce");
    cr_assert_eq(i_of(last, "ranks"), 4);
    cr_assert_eq((int64_t)cJSON_GetObjectItemCaseSensitive(last, "end_ns")->valuedouble,
                 (int64_t)(T0 + 299 * 1000 + 500));
    cr_assert_eq(count(doc, "X", "collective"), 0, "metadata only");
    cJSON_Delete(doc);
    fx_close(&f);
}

/* ------------------------------------------------ Kineto conventions */

static void op(struct conv_fx *f, int begin, uint32_t name, uint64_t id,
               uint64_t seq, uint64_t us)
{
    if (begin) {
        struct gt_r_op_begin r = {{GT_R_OP_BEGIN, sizeof(r)}, name, 0,
                                  T0 + us * 1000, id, seq, 1};
        add(f, &r, sizeof(r));
    } else {
        struct gt_r_op_end r = {{GT_R_OP_END, sizeof(r)}, name,
                                T0 + us * 1000, id};
        add(f, &r, sizeof(r));
    }
}

/* The trace's "detail" says whether operators were captured: "all" when
 * the hello says every capture records them (GRADTRACE_OPS=1), "windows"
 * when only some were (a trigger's ops=1), "off" by default; op_events
 * counts the file's cpu_op events. */
static void detail_case(uint32_t flags, int with_op, const char *want, int64_t nops)
{
    struct conv_fx f;
    fx_open(&f, 0, 0);
    if (flags) /* the stream's hello again, with flags (a reconnect's) */
        fx_hello_flags(&f, PID, 3, 1, 8, "/usr/bin/python3 train.py", flags);
    str(&f, 3, "aten::addmm");
    thr(&f, 100);
    user_scope(&f, 3, 1, 2);
    if (with_op) {
        op(&f, 1, 3, 77, UINT64_MAX, 11);
        op(&f, 0, 3, 77, 0, 18);
    }
    feed(&f);
    cJSON *doc = finish(&f, NULL);
    const cJSON *d = cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "gradtrace"), "detail");
    cr_assert_not_null(d);
    cr_assert_str_eq(s_of(d, "ops"), want);
    cr_assert_eq(i_of(d, "op_events"), nops);
    cr_assert_eq(count(doc, "X", "cpu_op"), nops);
    cJSON_Delete(doc);
    fx_close(&f);
}

Test(convert, detail_says_whether_operators_were_captured, .timeout = 10)
{
    detail_case(0, 0, "off", 0);
    detail_case(0, 1, "windows", 1);
    detail_case(GT_HELLO_OPS, 0, "all", 0);
    detail_case(GT_HELLO_OPS, 1, "all", 1);
}

Test(convert, operators_are_cpu_ops_linked_to_their_launches, .timeout = 10)
{
    struct conv_fx f;
    fx_open(&f, 0, 0);
    str(&f, 1, "fc");
    str(&f, 2, "Linear");
    str(&f, 3, "aten::addmm");
    str(&f, 4, "AddmmBackward0");
    str(&f, 20, "cudaLaunchKernel");
    str(&f, 21, "gemm<float>");
    thr(&f, 100);
    sb(&f, GT_SCOPE_MODULE, 1, 2, 10);
    op(&f, 1, 3, 77, UINT64_MAX, 11); /* the agent does not know its seq */
    created(&f, 1, 41, 12);
    op(&f, 0, 3, 77, 0, 18);
    se(&f, GT_SCOPE_MODULE, 1, 20);
    thr(&f, 101);
    node(&f, 4, 41, 50, 60);
    struct gt_r_ext_corr x = {{GT_R_EXT_CORR, sizeof(x)}, GT_EXT_OP, 0, 7, 77};
    add(&f, &x, sizeof(x));
    api(&f, 100, 7, 13, 15);
    kernel(&f, 0, 7, 7, 20, 30);
    api(&f, 100, 8, 21, 22); /* launched outside any operator */
    kernel(&f, 0, 7, 8, 31, 32);
    feed(&f);
    cJSON *doc = finish(&f, NULL);

    const cJSON *o = find(doc, "X", "aten::addmm", 0);
    cr_assert_not_null(o);
    cr_assert_str_eq(s_of(o, "cat"), "cpu_op");
    cr_assert_eq(i_of(o, "tid"), 100, "on its thread, nested in the module");
    cr_assert_eq(ns_of(o, "ts"), 11000);
    cr_assert_eq(ns_of(o, "dur"), 7000);
    const cJSON *oa = cJSON_GetObjectItem(o, "args");
    cr_assert_eq(i_of(oa, "External id"), 77);
    cr_assert_eq(i_of(oa, "Record function id"), 77);
    cr_assert_eq(i_of(oa, "Sequence number"), 41, "from the node it created");
    cr_assert_eq(i_of(oa, "Fwd thread id"), 1);
    const cJSON *k = find(doc, "X", "gemm<float>", 0);
    const cJSON *ka = cJSON_GetObjectItem(k, "args");
    cr_assert_eq(i_of(ka, "External id"), 77, "the kernel names its operator");
    cr_assert_eq(i_of(ka, "stream"), 7);
    cr_assert_eq(i_of(ka, "device"), 0);
    cr_assert_eq(i_of(ka, "correlation"), 7);
    const cJSON *a = find(doc, "X", "cudaLaunchKernel", 0);
    cr_assert_eq(i_of(cJSON_GetObjectItem(a, "args"), "External id"), 77);
    cr_assert_eq(i_of(cJSON_GetObjectItem(a, "args"), "correlation"), 7);
    const cJSON *a2 = find(doc, "X", "cudaLaunchKernel", 1);
    cr_assert_eq(i_of(cJSON_GetObjectItem(a2, "args"), "External id"), 0,
                 "without an operator, 0 (Kineto's none)");
    /* The node's arrow starts on the operator that created it. */
    const cJSON *s = find(doc, "s", "fwdbwd", 0);
    cr_assert_eq(i_of(s, "tid"), 100);
    cr_assert_eq(ns_of(s, "ts"), 12000);
    cr_assert_eq(count(doc, "X", "node_created"), 0);
    cJSON_Delete(doc);
    fx_close(&f);
}

Test(convert, nccl_kernels_are_collectives_numbered_per_name, .timeout = 10)
{
    struct conv_fx f;
    fx_open(&f, 0, 0);
    str(&f, 21, "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*)");
    str(&f, 22, "ncclDevKernel_Broadcast_RING_LL(ncclDevComm*)");
    str(&f, 23, "volta_sgemm_128x64_nn");
    thr(&f, 100);
    user_scope(&f, 1, 1, 2);
    uint32_t names[] = {21, 23, 22, 21, 21};
    for (uint32_t i = 0; i < 5; i++) {
        struct gt_r_gpu_kernel r = {{GT_R_GPU_KERNEL, sizeof(r)}, 0, 7, names[i], 100 + i,
                                    T0 + i * 10000, T0 + i * 10000 + 900,
                                    {1, 1, 1}, {1, 1, 1}, 0, 0};
        add(&f, &r, sizeof(r));
    }
    feed(&f);
    cJSON *doc = finish(&f, NULL);
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(doc, "gradtrace");
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(g, "collectives");
    cr_assert_eq(cJSON_GetArraySize(list), 4, "the GEMM is no collective");
    const cJSON *a0 = cJSON_GetArrayItem(list, 0), *b0 = cJSON_GetArrayItem(list, 1);
    const cJSON *a2 = cJSON_GetArrayItem(list, 3);
    cr_assert_eq(i_of(a0, "seq"), 0);
    cr_assert_eq(i_of(b0, "seq"), 0, "numbered per kernel name");
    cr_assert_eq(i_of(a2, "seq"), 2);
    double ga = cJSON_GetObjectItemCaseSensitive(a0, "group")->valuedouble;
    cr_assert_geq(ga, 2147483648.0, "NCCL groups have the top bit");
    cr_assert_eq(ga, cJSON_GetObjectItemCaseSensitive(a2, "group")->valuedouble);
    cr_assert_neq(ga, cJSON_GetObjectItemCaseSensitive(b0, "group")->valuedouble);
    cr_assert_eq((int64_t)cJSON_GetObjectItemCaseSensitive(a2, "end_ns")->valuedouble,
                 (int64_t)(T0 + 40900));
    cr_assert_eq(count(doc, "X", "kernel"), 5, "kernels are still written");
    cJSON_Delete(doc);
    fx_close(&f);
}

Test(convert, arrows_of_nodes_created_outside_any_slice_start_on_one,
     .timeout = 10)
{
    struct conv_fx f;
    fx_open(&f, 0, 0);
    str(&f, 1, "fc");
    str(&f, 2, "Linear");
    str(&f, 3, "NllLossBackward0");
    str(&f, 4, "AddmmBackward0");
    thr(&f, 100);
    sb(&f, GT_SCOPE_MODULE, 1, 2, 10);
    created(&f, 1, 1, 11);
    se(&f, GT_SCOPE_MODULE, 1, 20);
    created(&f, 0, 2, 25); /* the loss: outside any module */
    sb(&f, GT_SCOPE_MODULE, 1, 2, 30);
    created(&f, 1, 3, 35); /* at the very end of its only slice: outside */
    se(&f, GT_SCOPE_MODULE, 1, 35);
    thr(&f, 101);
    node(&f, 3, 2, 50, 55);
    node(&f, 4, 1, 56, 60);
    node(&f, 4, 3, 61, 62);
    feed(&f);
    cJSON *doc = finish(&f, NULL); /* check_file: every arrow in a slice */
    cr_assert_eq(count(doc, "s", "fwdbwd"), 3);
    cr_assert_eq(count(doc, "X", "node_created"), 2,
                 "the loss's and the one at its slice's end");
    const cJSON *c = find(doc, "X", "NllLossBackward0 created", 0);
    cr_assert_not_null(c);
    cr_assert_eq(i_of(c, "tid"), 100);
    cr_assert_eq(ns_of(c, "ts"), 25000);
    cJSON_Delete(doc);
    fx_close(&f);
}

Test(convert, a_step_cut_inside_an_open_scope_goes_to_iterations,
     .timeout = 10)
{
    struct conv_fx f;
    fx_open(&f, 0, 0);
    str(&f, 1, "train");
    thr(&f, 100);
    sb(&f, GT_SCOPE_USER, 1, 0, 10);
    mark(&f, GT_R_STEP, 20, 1); /* inside "train": cannot nest on tid 100 */
    se(&f, GT_SCOPE_USER, 1, 30);
    mark(&f, GT_R_STEP, 40, 2); /* began inside it: cannot either */
    mark(&f, GT_R_STEP, 50, 3); /* clean at both ends */
    sb(&f, GT_SCOPE_USER, 1, 0, 50); /* starts with step 4 ... */
    se(&f, GT_SCOPE_USER, 1, 55);
    mark(&f, GT_R_STEP, 60, 4); /* ... which would be written after it */
    feed(&f);
    cJSON *doc = finish(&f, NULL);
    const cJSON *s1 = find(doc, "X", "ProfilerStep#1", 0);
    const cJSON *s2 = find(doc, "X", "ProfilerStep#2", 0);
    const cJSON *s3 = find(doc, "X", "ProfilerStep#3", 0);
    cr_assert_str_eq(s_of(s1, "cat"), "user_annotation");
    cr_assert_neq(i_of(s1, "tid"), 100);
    cr_assert_str_eq(track_name(doc, PID, i_of(s1, "tid")), "Iterations");
    cr_assert_neq(i_of(s2, "tid"), 100);
    cr_assert_eq(i_of(s3, "tid"), 100);
    const cJSON *s4 = find(doc, "X", "ProfilerStep#4", 0);
    cr_assert_neq(i_of(s4, "tid"), 100, "a slice starts with it");
    cJSON_Delete(doc);
    fx_close(&f);
}
