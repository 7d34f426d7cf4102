/*
 * Converter: capture windows become their own files (daemon/convert/window.c).
 * Streams are built record by record, converted, and the files read back
 * with cJSON: which events landed in which file, the files' names and
 * window metadata, the main file's absence when only windows recorded,
 * GPU activity following its launch, and the bound on open windows.
 */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/codec.h"
#include "daemon/convert/convert.h"
#include "tests/unit/conv_fixture.h"


static void wfx_open(struct conv_fx *f, const char *out_path, int keep_empty,
                     uint64_t max_events)
{
    memset(f, 0, sizeof(*f));
    strcpy(f->dir, "/tmp/gt-convw-XXXXXX");
    cr_assert_not_null(mkdtemp(f->dir));
    char path[128];
    if (out_path)
        snprintf(path, sizeof(path), "%s/%s", f->dir, out_path);
    struct gt__conv_opts o = {.out_dir = f->dir, .stem = "t",
                             .out_path = out_path ? path : NULL,
                             .keep_empty_main = keep_empty,
                             .max_file_events = max_events};
    f->c = gt__conv_create(&o);
    cr_assert_not_null(f->c);
    fx_hello(f, 4242, 1, 0, 2, "python3 train.py");
}

static void win(struct conv_fx *f, uint16_t type, uint32_t id, uint32_t spec,
                uint64_t us, uint64_t it)
{
    struct gt_r_window r = {{type, sizeof(r)}, id, spec, 0, T0 + us * 1000, it};
    add(f, &r, sizeof(r));
}

static void api(struct conv_fx *f, uint32_t corr, uint64_t b_us)
{
    struct gt_r_cuda_api r = {{GT_R_CUDA_API, sizeof(r)}, 7, 211, corr, 3,
                              T0 + b_us * 1000, T0 + b_us * 1000 + 500};
    add(f, &r, sizeof(r));
}

static void kernel(struct conv_fx *f, uint32_t corr, uint32_t name, uint64_t b_us)
{
    struct gt_r_gpu_kernel r;
    memset(&r, 0, sizeof(r));
    r.h.type = GT_R_GPU_KERNEL;
    r.h.size = sizeof(r);
    r.stream = 7;
    r.name = name;
    r.corr = corr;
    r.start = T0 + b_us * 1000;
    r.end = r.start + 2000;
    add(f, &r, sizeof(r));
}

/* Events with this phase and name (or cat when name is NULL). */
static int count(const cJSON *doc, const char *ph, const char *name,
                 const char *cat)
{
    int n = 0;
    const cJSON *ev;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(doc, "traceEvents")) {
        if (strcmp(s_of(ev, "ph"), ph))
            continue;
        if (name && (!s_of(ev, "name") || strcmp(s_of(ev, "name"), name)))
            continue;
        if (cat && (!s_of(ev, "cat") || strcmp(s_of(ev, "cat"), cat)))
            continue;
        n++;
    }
    return n;
}

static const cJSON *window_meta(const cJSON *doc)
{
    return cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "gradtrace"), "window");
}

static size_t finish(struct conv_fx *f, const char *const **paths)
{
    cr_assert_eq(gt__conv_finish(f->c, NULL, 0), 0);
    return gt__conv_files(f->c, paths);
}

static int exists(const char *dir, const char *name)
{
    char p[256];
    struct stat st;
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    return stat(p, &st) == 0;
}

/* ------------------------------------------------------------ tests */

Test(convert_window, records_inside_segments_go_to_the_window_file, .timeout = 10)
{
    struct conv_fx f;
    wfx_open(&f, NULL, 0, 0);
    str(&f, 1, "layer=blocks.17,phase=backward,iteration=3,count=1");
    str(&f, 2, "outside");
    str(&f, 3, "AddmmBackward0");
    str(&f, 4, "blocks.17.fc1");
    thr(&f, 100);
    user_scope(&f, 2, 10, 20);
    created(&f, 4, 5, 30);
    win(&f, GT_R_WINDOW_BEGIN, 1, 1, 100, 3);
    node(&f, 3, 5, 110, 120);
    win(&f, GT_R_WINDOW_END, 1, 1, 130, 3);
    feed(&f);
    thr(&f, 100);
    user_scope(&f, 2, 140, 150); /* after the segment: main */
    win(&f, GT_R_WINDOW_DONE, 1, 1, 160, 3);
    feed(&f);

    const struct gt__conv_window *w;
    cr_assert_eq(gt__conv_windows(f.c, &w), 1);
    cr_assert_eq(w[0].state, GT__CONV_WIN_DONE, "DONE finished the window");
    cr_assert_eq(w[0].segments, 1);
    cr_assert_str_eq(w[0].phase, "backward");
    const char *const *paths;
    cr_assert_eq(finish(&f, &paths), 2);
    cr_assert(exists(f.dir, "t.pt.trace.json"));
    cr_assert(exists(f.dir, "t-w1-blocks.17-backward-it3.pt.trace.json"));
    cr_assert_not_null(strstr(w[0].file, "t-w1-blocks.17-backward-it3.pt.trace.json"));

    cJSON *m = load(strstr(paths[0], "-w1-") ? paths[1] : paths[0]);
    cJSON *d = load(w[0].file);
    cr_assert_eq(count(m, "X", "outside", NULL), 2, "both scopes in main");
    const cJSON *wf = cJSON_GetObjectItem(cJSON_GetObjectItem(m, "gradtrace"), "window_files");
    cr_assert_eq(cJSON_GetArraySize(wf), 1, "main lists where its window went");
    cr_assert_str_eq(s_of(cJSON_GetArrayItem(wf, 0), "file"), w[0].file);
    cr_assert_str_eq(s_of(cJSON_GetArrayItem(wf, 0), "state"), "done");
    cr_assert_eq(count(m, "X", "AddmmBackward0", NULL), 0);
    cr_assert_null(window_meta(m));
    cr_assert_eq(count(d, "X", "outside", NULL), 0);
    cr_assert_eq(count(d, "X", "AddmmBackward0", NULL), 1);
    /* The creation was read in main before the window opened; the node
     * still has its layer only when the agent replays it (next test). */
    const cJSON *meta = window_meta(d);
    cr_assert_not_null(meta);
    cr_assert_str_eq(s_of(meta, "spec"), "layer=blocks.17,phase=backward,iteration=3,count=1");
    cr_assert_str_eq(s_of(meta, "layer"), "blocks.17");
    cr_assert_str_eq(s_of(meta, "phase"), "backward");
    cr_assert_str_eq(s_of(meta, "state"), "done");
    cr_assert_eq(cJSON_GetObjectItem(meta, "iteration")->valueint, 3);
    cr_assert_eq(cJSON_GetObjectItem(meta, "segments")->valueint, 1);
    /* Its own metadata: rank and the same clock as main. */
    cr_assert_eq(cJSON_GetObjectItem(cJSON_GetObjectItem(d, "distributedInfo"),
                                     "rank")->valueint, 1);
    cr_assert_eq(cJSON_GetObjectItem(d, "baseTimeNanoseconds")->valuedouble,
                 cJSON_GetObjectItem(m, "baseTimeNanoseconds")->valuedouble);
    cJSON_Delete(m);
    cJSON_Delete(d);
    fx_close(&f);
}

Test(convert_window, a_trigger_only_stream_leaves_no_main_file, .timeout = 10)
{
    struct conv_fx f;
    wfx_open(&f, NULL, 0, 0);
    str(&f, 1, "layer=blocks.1,phase=forward");
    str(&f, 2, "blocks.1 forward work");
    thr(&f, 100);
    struct gt_r_lost lost = {{GT_R_LOST, sizeof(lost)}, 100, GT_LOST_EVENTS, 4};
    add(&f, &lost, sizeof(lost));
    win(&f, GT_R_WINDOW_BEGIN, 1, 1, 100, 0);
    user_scope(&f, 2, 110, 120);
    win(&f, GT_R_WINDOW_END, 1, 1, 130, 0);
    win(&f, GT_R_WINDOW_DONE, 1, 1, 140, 0);
    feed(&f);
    const char *const *paths;
    cr_assert_eq(finish(&f, &paths), 1, "the window file only");
    cr_assert(!exists(f.dir, "t.pt.trace.json"));
    cJSON *d = load(paths[0]);
    cr_assert_eq(count(d, "X", "blocks.1 forward work", NULL), 1);
    /* Metadata read before the window still reaches its file. */
    const cJSON *l = cJSON_GetObjectItem(cJSON_GetObjectItem(d, "gradtrace"), "lost");
    cr_assert_eq(cJSON_GetObjectItem(l, "events")->valueint, 4);
    cJSON_Delete(d);
    fx_close(&f);

    /* Nothing at all: no file in the daemon's mode, one when asked for. */
    wfx_open(&f, NULL, 0, 0);
    str(&f, 1, "x");
    feed(&f);
    cr_assert_eq(finish(&f, &paths), 0);
    fx_close(&f);
    wfx_open(&f, "out.json", 1, 0);
    str(&f, 1, "x");
    feed(&f);
    cr_assert_eq(finish(&f, &paths), 1);
    cr_assert(exists(f.dir, "out.json"));
    fx_close(&f);
}

/* Found by fuzz_convert: a stream that reuses a window id must not make
 * the second window overwrite the first's file. */
Test(convert_window, a_reused_window_id_never_overwrites_a_file, .timeout = 10)
{
    struct conv_fx f;
    const char *const *paths;

    wfx_open(&f, NULL, 0, 0);
    str(&f, 1, "layer=blocks.1,phase=forward");
    str(&f, 2, "first");
    str(&f, 3, "second");
    thr(&f, 100);
    for (int i = 0; i < 2; i++) {
        win(&f, GT_R_WINDOW_BEGIN, 1, 1, 100 + 100 * (uint64_t)i, 0);
        user_scope(&f, i ? 3 : 2, 110 + 100 * (uint64_t)i, 120 + 100 * (uint64_t)i);
        win(&f, GT_R_WINDOW_END, 1, 1, 130 + 100 * (uint64_t)i, 0);
        win(&f, GT_R_WINDOW_DONE, 1, 1, 140 + 100 * (uint64_t)i, 0);
    }
    feed(&f);
    cr_assert_eq(finish(&f, &paths), 2);
    cr_assert_str_neq(paths[0], paths[1]);
    for (int i = 0; i < 2; i++) {
        cJSON *d = load(paths[i]);
        cr_assert_eq(count(d, "X", i ? "second" : "first", NULL), 1, "%s", paths[i]);
        cJSON_Delete(d);
    }
    fx_close(&f);
}

Test(convert_window, replayed_creations_keep_one_span_per_layer, .timeout = 10)
{
    struct conv_fx f;
    wfx_open(&f, "out.json", 1, 0);
    str(&f, 1, "layer=blocks.17,phase=backward,iteration=2");
    str(&f, 2, "blocks.17.fc1");
    str(&f, 3, "blocks.17.fc2");
    str(&f, 4, "Node");
    thr(&f, 100);
    win(&f, GT_R_WINDOW_BEGIN, 1, 1, 1000, 2);
    /* As the agent replays them: each creation (forward time, long
     * before) just before its node. */
    created(&f, 3, 12, 30);
    node(&f, 4, 12, 1010, 1020);
    created(&f, 3, 11, 28);
    node(&f, 4, 11, 1021, 1030);
    created(&f, 2, 10, 20);
    node(&f, 4, 10, 1031, 1040);
    win(&f, GT_R_WINDOW_END, 1, 1, 1050, 2);
    win(&f, GT_R_WINDOW_DONE, 1, 1, 1060, 2);
    feed(&f);
    const char *const *paths;
    cr_assert_eq(finish(&f, &paths), 1);
    cr_assert_not_null(strstr(paths[0], "/out-w1-blocks.17-backward-it2.json"),
                       "convert -o names windows after the output: %s", paths[0]);
    cJSON *d = load(paths[0]);
    cr_assert_eq(count(d, "X", "blocks.17 backward", "layer_backward"), 1);
    cr_assert_eq(count(d, "X", "blocks.17.fc2 backward", "layer_backward"), 1);
    cr_assert_eq(count(d, "X", "blocks.17.fc1 backward", "layer_backward"), 1);
    cr_assert_eq(count(d, "s", NULL, "fwdbwd"), 3, "creations kept their arrows");
    const cJSON *an = cJSON_GetObjectItem(cJSON_GetObjectItem(d, "gradtrace"), "anomalies");
    cr_assert_eq(cJSON_GetObjectItem(an, "time_backwards")->valueint, 0);
    cJSON_Delete(d);
    fx_close(&f);
}

Test(convert_window, gpu_activity_follows_its_launch_until_done, .timeout = 10)
{
    struct conv_fx f;
    wfx_open(&f, NULL, 0, 0);
    str(&f, 1, "layer=blocks.0,phase=forward");
    str(&f, 2, "work");
    str(&f, 3, "cudaLaunchKernel");
    str(&f, 4, "k_in");
    str(&f, 5, "k_out");
    str(&f, 6, "k_late");
    thr(&f, 100);
    win(&f, GT_R_WINDOW_BEGIN, 1, 1, 100, 0);
    user_scope(&f, 2, 110, 190);
    api(&f, 50, 120); /* launched inside */
    win(&f, GT_R_WINDOW_END, 1, 1, 200, 0);
    api(&f, 51, 300); /* launched outside */
    feed(&f);
    /* CUPTI's batch: a launch from inside the segment read after it, and
     * the kernels of all three launches. */
    api(&f, 52, 150);
    kernel(&f, 50, 4, 400);
    kernel(&f, 52, 4, 410);
    kernel(&f, 51, 5, 420);
    feed(&f);
    win(&f, GT_R_WINDOW_DONE, 1, 1, 500, 0);
    feed(&f);
    kernel(&f, 50, 6, 600); /* after DONE: main */
    feed(&f);
    const struct gt__conv_window *w;
    cr_assert_eq(gt__conv_windows(f.c, &w), 1);
    const char *const *paths;
    cr_assert_eq(finish(&f, &paths), 2);
    cJSON *d = load(w[0].file);
    char mp[128];
    snprintf(mp, sizeof(mp), "%s/t.pt.trace.json", f.dir);
    cJSON *m = load(mp);
    cr_assert_eq(count(d, "X", "k_in", NULL), 2);
    cr_assert_eq(count(d, "X", "k_out", NULL), 0);
    cr_assert_eq(count(d, "X", "cudaLaunchKernel", NULL), 2);
    cr_assert_eq(count(d, "s", NULL, "ac2g"), 2, "launch arrows in the window");
    cr_assert_eq(count(m, "X", "k_out", NULL), 1);
    cr_assert_eq(count(m, "X", "k_late", NULL), 1);
    cr_assert_eq(count(m, "X", "k_in", NULL), 0);
    cJSON_Delete(d);
    cJSON_Delete(m);
    fx_close(&f);
}

Test(convert_window, open_windows_are_bounded_and_cut_ones_say_so, .timeout = 20)
{
    struct conv_fx f;
    wfx_open(&f, NULL, 0, 0);
    str(&f, 1, "layer=a/../../b c,phase=both,iteration=next");
    str(&f, 2, "work");
    thr(&f, 100);
    for (uint32_t id = 1; id <= 10; id++) {
        win(&f, GT_R_WINDOW_BEGIN, id, 1, id * 100, id);
        user_scope(&f, 2, id * 100 + 10, id * 100 + 20);
        win(&f, GT_R_WINDOW_END, id, 1, id * 100 + 30, id);
        /* never DONE */
    }
    feed(&f);
    const struct gt__conv_window *w;
    cr_assert_eq(gt__conv_windows(f.c, &w), 10);
    int cut = 0, open = 0;
    for (int i = 0; i < 10; i++) {
        cut += w[i].state == GT__CONV_WIN_CUT;
        open += w[i].state == GT__CONV_WIN_OPEN;
    }
    cr_assert_eq(cut, 6, "beyond four open windows the oldest are cut");
    cr_assert_eq(open, 4);
    const char *const *paths;
    cr_assert_eq(finish(&f, &paths), 10, "every window kept its events");
    for (int i = 0; i < 10; i++) {
        cr_assert_eq(w[i].state, GT__CONV_WIN_CUT);
        const char *base = strrchr(w[i].file, '/') + 1;
        cr_assert_eq(strncmp(w[i].file, f.dir, strlen(f.dir)), 0);
        cr_assert_eq(strspn(base, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"),
                     strlen(base), "unsafe name %s", base);
        cr_assert_null(strstr(base, ".."));
        cJSON *d = load(w[i].file);
        cr_assert_eq(count(d, "X", "work", NULL), 1);
        cr_assert_str_eq(s_of(window_meta(d), "state"), "cut");
        cr_assert_str_eq(s_of(window_meta(d), "phase"), "both");
        cJSON_Delete(d);
    }
    fx_close(&f);
}

Test(convert_window, a_window_rotates_like_any_trace, .timeout = 20)
{
    struct conv_fx f;
    wfx_open(&f, NULL, 0, 50);
    str(&f, 1, "layer=x,phase=forward");
    str(&f, 2, "work");
    thr(&f, 100);
    win(&f, GT_R_WINDOW_BEGIN, 1, 1, 10, 4);
    for (uint64_t i = 0; i < 120; i++)
        user_scope(&f, 2, 20 + i * 10, 25 + i * 10);
    win(&f, GT_R_WINDOW_END, 1, 1, 2000, 4);
    win(&f, GT_R_WINDOW_DONE, 1, 1, 2001, 4);
    feed(&f);
    const char *const *paths;
    size_t n = finish(&f, &paths);
    cr_assert_geq(n, 3);
    int total = 0;
    for (size_t i = 0; i < n; i++) {
        cr_assert_not_null(strstr(paths[i], "t-w1-x-forward-it4"), "%s", paths[i]);
        cJSON *d = load(paths[i]);
        total += count(d, "X", "work", NULL);
        cr_assert_not_null(window_meta(d), "every part says which window");
        cJSON_Delete(d);
    }
    cr_assert_eq(total, 120);
    fx_close(&f);
}

/* The last name given to thread tid in doc (a rename is written again
 * before the thread's next event), or NULL. */
static const char *thread_name_of(const cJSON *doc, int tid)
{
    const cJSON *ev;
    const char *name = NULL;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(doc, "traceEvents")) {
        const cJSON *t = cJSON_GetObjectItem(ev, "tid");
        if (!strcmp(s_of(ev, "ph"), "M") && s_of(ev, "name") &&
            !strcmp(s_of(ev, "name"), "thread_name") && cJSON_IsNumber(t) &&
            t->valueint == tid)
            name = s_of(cJSON_GetObjectItem(ev, "args"), "name");
    }
    return name;
}

Test(convert_window, a_window_reads_strings_and_names_defined_after_it_opened,
     .timeout = 10)
{
    struct conv_fx f;
    wfx_open(&f, NULL, 0, 0);
    str(&f, 1, "layer=enc,phase=forward");
    str(&f, 2, "before");
    thr(&f, 100);
    user_scope(&f, 2, 10, 20);
    win(&f, GT_R_WINDOW_BEGIN, 1, 1, 30, 0);
    /* Defined while the window is open: the stream has them once, and
     * the window's writer reads them from there. */
    str(&f, 3, "late");
    str(&f, 4, "worker-late");
    struct gt_r_thread_info ti = {{GT_R_THREAD_INFO, sizeof(ti)}, 100, 4};
    add(&f, &ti, sizeof(ti));
    thr(&f, 100);
    user_scope(&f, 3, 40, 45);
    win(&f, GT_R_WINDOW_END, 1, 1, 50, 0);
    win(&f, GT_R_WINDOW_DONE, 1, 1, 51, 0);
    feed(&f);
    /* Redefined after the window closed: main's later events use it. */
    str(&f, 3, "later");
    thr(&f, 100);
    user_scope(&f, 3, 60, 70);
    feed(&f);

    const struct gt__conv_window *w;
    cr_assert_eq(gt__conv_windows(f.c, &w), 1);
    const char *const *paths;
    cr_assert_eq(finish(&f, &paths), 2);
    cJSON *d = load(w[0].file);
    cJSON *m = load(strstr(paths[0], "-w1-") ? paths[1] : paths[0]);
    cr_assert_eq(count(d, "X", "late", NULL), 1, "the window names its scope");
    cr_assert_eq(count(d, "X", "(unknown string)", NULL), 0);
    cr_assert_str_eq(thread_name_of(d, 100), "worker-late");
    cr_assert_eq(count(m, "X", "before", NULL), 1);
    cr_assert_eq(count(m, "X", "later", NULL), 1, "main sees the redefinition");
    cr_assert_eq(count(m, "X", "late", NULL), 0);
    cr_assert_str_eq(thread_name_of(m, 100), "worker-late");
    cJSON_Delete(m);
    cJSON_Delete(d);
    fx_close(&f);
}
