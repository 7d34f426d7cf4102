/*
 * How the converter creates files (issue #13, items 8, 11, 12): never over
 * an existing file or through a symlink planted in the output directory,
 * and readable by the user only, since traces hold command lines.
 */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/codec.h"
#include "daemon/convert/convert.h"
#include "tests/unit/conv_fixture.h"

static void open_in(struct conv_fx *f, const char *dir)
{
    memset(f, 0, sizeof(*f));
    snprintf(f->dir, sizeof(f->dir), "%s", dir);
    struct gt__conv_opts o = {.out_dir = dir, .stem = "t"};
    f->c = gt__conv_create(&o);
    cr_assert_not_null(f->c);
    fx_hello(f, 4242, 1, 0, 2, "python3 train.py");
}

static void win(struct conv_fx *f, uint16_t type, uint32_t id, uint64_t us)
{
    struct gt_r_window r = {{type, sizeof(r)}, id, 1, 0, T0 + us * 1000, 0};
    add(f, &r, sizeof(r));
}

/* One trigger-only stream: window 1 holding one scope named what. */
static const char *window_stream(struct conv_fx *f, const char *dir,
                                 const char *what)
{
    const char *const *paths;

    open_in(f, dir);
    str(f, 1, "layer=blocks.1,phase=forward");
    str(f, 2, what);
    thr(f, 100);
    win(f, GT_R_WINDOW_BEGIN, 1, 100);
    user_scope(f, 2, 110, 120);
    win(f, GT_R_WINDOW_END, 1, 130);
    win(f, GT_R_WINDOW_DONE, 1, 140);
    feed(f);
    cr_assert_eq(gt__conv_finish(f->c, NULL, 0), 0);
    cr_assert_eq(gt__conv_files(f->c, &paths), 1);
    return paths[0];
}

static int has_span(const char *path, const char *name)
{
    cJSON *d = load(path), *ev;
    int n = 0;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(d, "traceEvents"))
        n += s_of(ev, "name") && strcmp(s_of(ev, "name"), name) == 0;
    cJSON_Delete(d);
    return n;
}

static void rm_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[512];
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
        unlink(p);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

/* Two streams with the same pid and program (a recycled pid, two
 * containers) get the same stem; the second window file must not replace
 * the first. */
Test(convert_files, same_stem_windows_never_overwrite, .timeout = 10)
{
    char dir[] = "/tmp/gt-convf-XXXXXX";
    struct conv_fx a, b;
    struct stat st;

    cr_assert_not_null(mkdtemp(dir));
    char *pa = strdup(window_stream(&a, dir, "first stream"));
    char *pb = strdup(window_stream(&b, dir, "second stream"));
    cr_assert_str_neq(pa, pb, "both streams wrote %s", pa);
    cr_assert_eq(has_span(pa, "first stream"), 1, "%s lost its window", pa);
    cr_assert_eq(has_span(pb, "second stream"), 1);
    cr_assert_eq(stat(pa, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0600, "trace mode %o", st.st_mode & 0777);
    gt__conv_free(a.c);
    gt__conv_free(b.c);
    gt__recbuf_free(&a.b);
    gt__recbuf_free(&b.b);
    free(pa);
    free(pb);
    rm_dir(dir);
}

/* A dangling symlink planted where the trace will go: the converter
 * writes a trace of its own in the directory, never the link's target. */
Test(convert_files, planted_symlink_not_followed, .timeout = 10)
{
    char dir[] = "/tmp/gt-convf-XXXXXX", victim[128], link[128];
    const char *const *paths;
    struct conv_fx f;

    cr_assert_not_null(mkdtemp(dir));
    snprintf(victim, sizeof(victim), "%s-victim", dir);
    snprintf(link, sizeof(link), "%s/t.pt.trace.json", dir);
    cr_assert_eq(symlink(victim, link), 0);
    open_in(&f, dir);
    str(&f, 2, "work");
    thr(&f, 100);
    user_scope(&f, 2, 10, 20);
    feed(&f);
    cr_assert_eq(gt__conv_finish(f.c, NULL, 0), 0);
    cr_assert_eq(access(victim, F_OK), -1, "wrote through the planted link");
    cr_assert_eq(gt__conv_files(f.c, &paths), 1);
    cr_assert_str_neq(paths[0], link);
    cr_assert_eq(has_span(paths[0], "work"), 1);
    gt__conv_free(f.c);
    gt__recbuf_free(&f.b);
    rm_dir(dir);
}

/* ------------------------------------------------------------ times */

/* The JSON file's text (caller frees). */
static char *slurp(const char *path)
{
    FILE *fp = fopen(path, "rb");
    cr_assert_not_null(fp);
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    cr_assert_eq(fread(b, 1, (size_t)n, fp), (size_t)n);
    b[n] = 0;
    fclose(fp);
    return b;
}

/* A span that begins before the stream's base starts at 0 and ends where
 * it ended: clamping its start must not stretch it over its siblings. */
Test(convert_files, span_before_base_keeps_its_end, .timeout = 10)
{
    char dir[] = "/tmp/gt-convf-XXXXXX";
    const char *const *paths;
    struct conv_fx f;

    cr_assert_not_null(mkdtemp(dir));
    open_in(&f, dir);
    str(&f, 2, "early");
    str(&f, 3, "sibling");
    thr(&f, 100);
    struct gt_r_scope_begin b = {{GT_R_SCOPE_BEGIN, sizeof(b)}, GT_SCOPE_USER,
                                 0, 2, 0, T0 - 5000000};
    add(&f, &b, sizeof(b));
    struct gt_r_scope_end e = {{GT_R_SCOPE_END, sizeof(e)}, GT_SCOPE_USER, 0,
                               2, T0 + 2000000};
    add(&f, &e, sizeof(e));
    user_scope(&f, 3, 3000, 9000);
    feed(&f);
    cr_assert_eq(gt__conv_finish(f.c, NULL, 0), 0);
    cr_assert_eq(gt__conv_files(f.c, &paths), 1);
    cJSON *d = load(paths[0]), *ev;
    int seen = 0;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(d, "traceEvents")) {
        if (!s_of(ev, "name") || strcmp(s_of(ev, "name"), "early"))
            continue;
        seen++;
        cr_assert_float_eq(cJSON_GetObjectItem(ev, "ts")->valuedouble, 0, 1e-9);
        cr_assert_float_eq(cJSON_GetObjectItem(ev, "dur")->valuedouble, 2000, 1e-6,
                           "dur %f: the part before the base was kept",
                           cJSON_GetObjectItem(ev, "dur")->valuedouble);
    }
    cr_assert_eq(seen, 1);
    cJSON_Delete(d);
    gt__conv_free(f.c);
    gt__recbuf_free(&f.b);
    rm_dir(dir);
}

/* Extreme hello times: base + (real - mono) must be computed without
 * signed overflow (UBSan aborted here) and still give real at the base. */
Test(convert_files, extreme_hello_times_do_not_overflow, .timeout = 10)
{
    char dir[] = "/tmp/gt-convf-XXXXXX";
    const char *const *paths;
    struct conv_fx f;
    const uint64_t mono = 0x6000000000000000ull, real = 2 * mono;

    cr_assert_not_null(mkdtemp(dir));
    memset(&f, 0, sizeof(f));
    struct gt__conv_opts o = {.out_dir = dir, .stem = "t"};
    f.c = gt__conv_create(&o);
    struct gt__hello_info *h = calloc(1, sizeof(*h));
    h->h.pid = 1;
    h->h.rank = -1;
    h->h.start_mono_ns = mono;
    h->h.start_real_ns = real;
    cr_assert_eq(gt__conv_hello(f.c, h), 0);
    free(h);
    str(&f, 2, "x");
    thr(&f, 100);
    struct gt_r_scope_begin b = {{GT_R_SCOPE_BEGIN, sizeof(b)}, GT_SCOPE_USER,
                                 0, 2, 0, mono + 1000};
    struct gt_r_scope_end e = {{GT_R_SCOPE_END, sizeof(e)}, GT_SCOPE_USER, 0,
                               2, UINT64_MAX};
    add(&f, &b, sizeof(b));
    add(&f, &e, sizeof(e));
    feed(&f);
    cr_assert_eq(gt__conv_finish(f.c, NULL, 0), 0);
    cr_assert_eq(gt__conv_files(f.c, &paths), 1);
    char *text = slurp(paths[0]);
    const char *k = strstr(text, "\"baseTimeNanoseconds\":");
    cr_assert_not_null(k);
    unsigned long long got = strtoull(k + 22, NULL, 10);
    cr_assert_eq(got, real - mono % 1000000u, "baseTimeNanoseconds %llu", got);
    free(text);
    cJSON_Delete(load(paths[0]));
    gt__conv_free(f.c);
    gt__recbuf_free(&f.b);
    rm_dir(dir);
}

/* ------------------------------------------------------------ caps */

/* A stream of n windows, window i beginning at start_us + i * every_us,
 * each of two segments (forward, then backward: the agent's windows with
 * phase=both) holding one scope named "in window"; then finished. */
static void windows_stream(struct conv_fx *f, const char *dir, uint32_t n,
                           uint64_t start_us, uint64_t every_us)
{
    open_in(f, dir);
    str(f, 1, "layer=blocks.1,phase=both");
    str(f, 2, "in window");
    thr(f, 100);
    for (uint32_t i = 0; i < n; i++) {
        uint64_t us = start_us + (uint64_t)i * every_us;
        win(f, GT_R_WINDOW_BEGIN, i + 1, us);
        user_scope(f, 2, us + 1, us + 2);
        win(f, GT_R_WINDOW_END, i + 1, us + 3);
        win(f, GT_R_WINDOW_BEGIN, i + 1, us + 4);
        win(f, GT_R_WINDOW_END, i + 1, us + 5);
        win(f, GT_R_WINDOW_DONE, i + 1, us + 6);
        if (f->b.len > (1u << 20) - 4096) {
            feed(f);
            thr(f, 100); /* each chunk names its thread again */
        }
    }
    feed(f);
    cr_assert_eq(gt__conv_finish(f->c, NULL, 0), 0);
}

/* Anomaly k of the main file among paths (n of them); 0 when there is
 * none (a stream whose every event went to windows has no main file). */
static double main_anomaly(const char *const *paths, size_t n, const char *k)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(strrchr(paths[i], '/'), "/t.pt.trace.json") != 0)
            continue;
        cJSON *d = load(paths[i]);
        const cJSON *an = cJSON_GetObjectItem(cJSON_GetObjectItem(d, "gradtrace"),
                                              "anomalies");
        double v = cJSON_GetObjectItem(an, k)->valuedouble;
        cJSON_Delete(d);
        return v;
    }
    return 0;
}

/* How many of paths (n of them) are window files. */
static size_t window_files(const char *const *paths, size_t n)
{
    size_t w = 0;
    for (size_t i = 0; i < n; i++)
        w += strstr(paths[i], "/t-w") != NULL;
    return w;
}

/* Issue 23, item 11: a fast model (2 ms steps) capturing every step of its
 * first 300 gets all 300 windows. The cap of 100 begun per second of
 * stream time refused 200 of them, and counted each refusal twice (once
 * per segment). */
Test(convert_files, fast_model_windows_all_accepted, .timeout = 30)
{
    char dir[] = "/tmp/gt-convf-XXXXXX";
    const char *const *paths;
    struct conv_fx f;

    cr_assert_not_null(mkdtemp(dir));
    windows_stream(&f, dir, 300, 1000, 2000);
    size_t n = gt__conv_files(f.c, &paths);
    double refused = main_anomaly(paths, n, "windows_refused");
    cr_assert_eq(window_files(paths, n), 300u, "%zu window files, %.0f refused",
                 window_files(paths, n), refused);
    cr_assert_eq(refused, 0, "%.0f refused", refused);
    gt__conv_free(f.c);
    gt__recbuf_free(&f.b);
    rm_dir(dir);
}

/* One stream opening 20,000 windows (issue #13, item 9) made 20,004 files
 * and kept the daemon's loop busy for 18 s. A stream gets at most 1,000
 * windows; each refused window is counted once, whatever its number of
 * segments, and its records stay in the main file. */
Test(convert_files, windows_capped_per_stream_counted_once, .timeout = 60)
{
    char dir[] = "/tmp/gt-convf-XXXXXX";
    const char *const *paths;
    struct conv_fx f;

    cr_assert_not_null(mkdtemp(dir));
    windows_stream(&f, dir, 20000, 1000, 1000); /* one per ms */
    size_t n = gt__conv_files(f.c, &paths);
    cr_assert_eq(window_files(paths, n), (size_t)GT__CONV_WIN_PER_STREAM,
                 "%zu window files", window_files(paths, n));
    double refused = main_anomaly(paths, n, "windows_refused");
    cr_assert_eq(refused, 20000 - GT__CONV_WIN_PER_STREAM, "refused %.0f", refused);
    cr_assert_eq(main_anomaly(paths, n, "windows_unmatched"), 0,
                 "a refused window is not also unmatched");
    const char *main_path = NULL;
    for (size_t i = 0; i < n; i++)
        if (strcmp(strrchr(paths[i], '/'), "/t.pt.trace.json") == 0)
            main_path = paths[i];
    cr_assert_not_null(main_path, "the refused windows' records go to main");
    int in_main = has_span(main_path, "in window");
    cr_assert_eq((double)in_main, refused, "main has %d, refused %.0f", in_main, refused);
    gt__conv_free(f.c);
    gt__recbuf_free(&f.b);
    rm_dir(dir);
}

/* A stream rotated into two files (two events each at most); the first
 * is closed and waits for its file_count until the stream finishes. */
static char *rotated_first_file(struct conv_fx *f, const char *dir)
{
    const char *const *paths;

    memset(f, 0, sizeof(*f));
    snprintf(f->dir, sizeof(f->dir), "%s", dir);
    struct gt__conv_opts o = {.out_dir = dir, .stem = "t", .max_file_events = 2};
    f->c = gt__conv_create(&o);
    cr_assert_not_null(f->c);
    fx_hello(f, 4242, 1, 0, 2, "python3 train.py");
    str(f, 1, "step");
    thr(f, 100);
    for (unsigned i = 0; i < 6; i++)
        user_scope(f, 1, 100 + 10 * i, 105 + 10 * i);
    feed(f);
    cr_assert_geq(gt__conv_files(f->c, &paths), 2, "no rotation");
    return strdup(paths[0]);
}

/* Issue 23 item 9: the closed part file is replaced by a FIFO before the
 * stream finishes. Patching its file_count must neither block (open of a
 * FIFO without a reader) nor write into it. */
Test(convert_files, replaced_part_fifo_never_blocks, .timeout = 10)
{
    char dir[] = "/tmp/gt-convf-XXXXXX";
    struct conv_fx f;
    struct stat st;

    cr_assert_not_null(mkdtemp(dir));
    char *p0 = rotated_first_file(&f, dir);
    cr_assert_eq(unlink(p0), 0);
    cr_assert_eq(mkfifo(p0, 0600), 0);
    cr_assert_eq(gt__conv_finish(f.c, NULL, 0), 0);
    cr_assert_eq(lstat(p0, &st), 0);
    cr_assert(S_ISFIFO(st.st_mode), "the FIFO was replaced");
    gt__conv_free(f.c);
    gt__recbuf_free(&f.b);
    free(p0);
    rm_dir(dir);
}

/* The same with a regular file planted there: not one byte of it changes. */
Test(convert_files, replaced_part_file_not_written, .timeout = 10)
{
    char dir[] = "/tmp/gt-convf-XXXXXX", buf[64] = {0};
    static const char planted[] = "someone else's file, 48 bytes long ........\n";
    struct conv_fx f;

    cr_assert_not_null(mkdtemp(dir));
    char *p0 = rotated_first_file(&f, dir);
    cr_assert_eq(unlink(p0), 0);
    FILE *fp = fopen(p0, "w");
    cr_assert_not_null(fp);
    fputs(planted, fp);
    fclose(fp);
    cr_assert_eq(gt__conv_finish(f.c, NULL, 0), 0);
    fp = fopen(p0, "r");
    cr_assert_not_null(fp);
    size_t n = fread(buf, 1, sizeof(buf) - 1, fp);
    fclose(fp);
    cr_assert_eq(n, sizeof(planted) - 1, "%zu bytes now", n);
    cr_assert_str_eq(buf, planted, "the planted file was written into");
    /* The files still ours are patched as before. */
    const char *const *paths;
    gt__conv_files(f.c, &paths);
    cJSON *d = load(paths[1]);
    cJSON *fc = cJSON_GetObjectItem(cJSON_GetObjectItem(d, "gradtrace"), "file_count");
    cr_assert(cJSON_IsNumber(fc) && fc->valuedouble >= 2, "file_count not patched");
    cJSON_Delete(d);
    gt__conv_free(f.c);
    gt__recbuf_free(&f.b);
    free(p0);
    rm_dir(dir);
}
