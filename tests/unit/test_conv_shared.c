/*
 * A window begun while capture was on (GT_R_WINDOW_BEGIN_SHARED): its
 * segment's records are the main trace's as well as the window's, except
 * the node creations the agent replays into the window (timed before the
 * segment: main has the original).
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/convert/agg.h"
#include "daemon/convert/consumer.h"
#include "tests/unit/conv_fixture.h"

static int count(const char *path, const char *name, const char *ph)
{
    cJSON *doc = load(path), *ev;
    int n = 0;

    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(doc, "traceEvents"))
        n += s_of(ev, "name") && strcmp(s_of(ev, "name"), name) == 0 &&
             s_of(ev, "ph") && strcmp(s_of(ev, "ph"), ph) == 0;
    cJSON_Delete(doc);
    return n;
}

static void window(struct conv_fx *f, uint16_t type, uint64_t us)
{
    struct gt_r_window r = {{type, sizeof(r)}, 1, 1, 0, T0 + us * 1000, 0};
    add(f, &r, sizeof(r));
}

static void run(int shared, char *main_path, char *win_path, size_t cap)
{
    struct conv_fx f;
    const char *const *paths;

    memset(&f, 0, sizeof(f));
    strcpy(f.dir, "/tmp/gt-shared.XXXXXX");
    cr_assert_not_null(mkdtemp(f.dir));
    struct gt__conv_opts o = {.out_dir = f.dir, .stem = "t"};
    f.c = gt__conv_create(&o);
    cr_assert_not_null(f.c);
    fx_hello(&f, 4242, -1, -1, -1, "python3 train.py");
    str(&f, 1, "layer=blocks.1,phase=backward");
    str(&f, 2, "before");
    str(&f, 3, "inside");
    str(&f, 4, "MmBackward0");
    thr(&f, 100);
    created(&f, 0, 7, 90);                /* in the forward, main's */
    user_scope(&f, 2, 100, 110);
    window(&f, shared ? GT_R_WINDOW_BEGIN_SHARED : GT_R_WINDOW_BEGIN, 200);
    created(&f, 0, 7, 90);                /* the agent's replay */
    node(&f, 4, 7, 205, 210);
    user_scope(&f, 3, 211, 215);
    window(&f, GT_R_WINDOW_END, 220);
    window(&f, GT_R_WINDOW_DONE, 230);
    feed(&f);
    cr_assert_eq(gt__conv_finish(f.c, NULL, 0), 0);
    cr_assert_eq(gt__conv_files(f.c, &paths), 2);
    snprintf(main_path, cap, "%s", paths[0]);
    snprintf(win_path, cap, "%s", paths[1]);
    cr_assert(strstr(win_path, "-w1-") != NULL, "%s", win_path);
    /* Files stay for the caller to read; removed in check(). */
    gt__conv_free(f.c);
    gt__recbuf_free(&f.b);
}

static void cleanup(const char *a, const char *b)
{
    char dir[128];
    unlink(a);
    unlink(b);
    snprintf(dir, sizeof(dir), "%s", a);
    *strrchr(dir, '/') = '\0';
    cr_assert_eq(rmdir(dir), 0);
}

Test(conv_shared, shared_segment_is_in_main_and_window, .timeout = 10)
{
    char m[256], w[256];

    run(1, m, w, sizeof(m));
    cr_assert_eq(count(m, "inside", "X"), 1, "main keeps the segment's scope");
    cr_assert_eq(count(m, "MmBackward0", "X"), 1, "and its node");
    cr_assert_eq(count(m, "fwdbwd", "s"), 1, "one creation in main, not the replay too");
    cr_assert_eq(count(w, "inside", "X"), 1, "the window has it as well");
    cr_assert_eq(count(w, "MmBackward0", "X"), 1);
    cr_assert_eq(count(w, "fwdbwd", "s"), 1, "the replay joins the window's node");
    cr_assert_eq(count(m, "window #1", "X"), 1, "main marks where the window was");
    cleanup(m, w);
}

Test(conv_shared, plain_segment_is_the_windows_only, .timeout = 10)
{
    char m[256], w[256];

    run(0, m, w, sizeof(m));
    cr_assert_eq(count(m, "inside", "X"), 0);
    cr_assert_eq(count(m, "MmBackward0", "X"), 0);
    cr_assert_eq(count(w, "inside", "X"), 1);
    cleanup(m, w);
}

/* The aggregation consumer (gradtrace report on a .gtr) counts a shared
 * window's spans once: main holds a copy of each. A plain window's are
 * counted: main has none of them. */
static double window_bwd_us(uint16_t type)
{
    struct gt__agg a;
    struct gt__recbuf b;
    struct gt_chunk_header h;
    memset(&b, 0, sizeof(b));
    memset(&h, 0, sizeof(h));
    gt__agg_init(&a);
    struct gt__consumer *k = gt__agg_consumer_create(&a);
    cr_assert_not_null(k);
    struct gt__hello_info *hi = calloc(1, sizeof(*hi));
    hi->h.pid = 4242;
    hi->h.rank = -1;
    hi->h.start_mono_ns = T0;
    cr_assert_eq(k->ops->hello(k, hi), 0);
    free(hi);
    struct conv_fx f = {.b = b};
    str(&f, 1, "layer=blk,phase=backward");
    str(&f, 4, "MmBackward0");
    str(&f, 5, "blk");
    thr(&f, 100);
    created(&f, 5, 7, 90);
    window(&f, type, 200);
    created(&f, 5, 7, 90); /* the agent's replay */
    node(&f, 4, 7, 205, 215);
    window(&f, GT_R_WINDOW_END, 220);
    window(&f, GT_R_WINDOW_DONE, 230);
    h.record_count = f.b.count;
    cr_assert_eq(k->ops->chunk(k, &h, f.b.data, f.b.len), 0);
    cr_assert_eq(k->ops->finish(k, NULL, 0), 0);
    gt__agg_finish(&a);
    const struct gt__agg_layer *l = gt__agg_find(&a, "blk");
    double us = l ? l->bwd_us : -1;
    gt__consumer_free(k);
    gt__agg_close(&a);
    gt__recbuf_free(&f.b);
    return us;
}

Test(conv_shared, report_counts_a_shared_windows_backward_once, .timeout = 10)
{
    cr_assert_eq(window_bwd_us(GT_R_WINDOW_BEGIN_SHARED), 10.0);
    cr_assert_eq(window_bwd_us(GT_R_WINDOW_BEGIN), 10.0);
}
