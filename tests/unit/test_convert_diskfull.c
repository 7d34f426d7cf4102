/*
 * Disk-full accounting of the converter (issue 23, item 4), without a
 * full disk: the daemon's calls (gt__conv_disk_pause at a full disk,
 * gt__conv_skip for a chunk arriving meanwhile, gt__conv_resume when space
 * is back) made directly, and the per-thread counts read back from the
 * files: per thread, instants in the files + lost.threads[].disk_full =
 * instants fed, exactly, over several fill/free cycles.
 */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/codec.h"
#include "daemon/convert/convert.h"
#include "tests/unit/conv_fixture.h"

static uint64_t g_us = 100;

static void open_rotating(struct conv_fx *f, uint64_t max_events)
{
    fx_open_named(f, "/tmp/gt-df-XXXXXX", max_events, "paced");
}

static void open_marked(struct conv_fx *f)
{
    open_rotating(f, 0);
}

/* n instants on each of threads 100 and 200, as one chunk's records. */
static void instants(struct conv_fx *f, int n)
{
    for (uint32_t tid = 100; tid <= 200; tid += 100) {
        thr(f, tid);
        for (int i = 0; i < n; i++) {
            struct gt_r_instant r = {{GT_R_INSTANT, sizeof(r)}, 1,
                                     T0 + (g_us++) * 1000};
            add(f, &r, sizeof(r));
        }
    }
}

static void skip(struct conv_fx *f, int n)
{
    instants(f, n);
    gt__conv_skip(f->c, f->b.data, f->b.len);
    gt__recbuf_reset(&f->b);
}

/* Per thread, instants in every file + the largest disk_full count a
 * file says (each file has the stream's running totals). */
static void account(struct conv_fx *f, uint64_t out[2])
{
    const char *const *paths;
    size_t n = gt__conv_files(f->c, &paths);
    uint64_t dfull[2] = {0, 0};

    out[0] = out[1] = 0;
    for (size_t i = 0; i < n; i++) {
        cJSON *d = load(paths[i]), *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItem(d, "traceEvents")) {
            const cJSON *tid = cJSON_GetObjectItem(e, "tid");
            if (s_of(e, "name") && strcmp(s_of(e, "name"), "paced") == 0 &&
                cJSON_IsNumber(tid))
                out[tid->valueint == 200]++;
        }
        cJSON *lost = cJSON_GetObjectItem(cJSON_GetObjectItem(d, "gradtrace"),
                                          "lost");
        cJSON_ArrayForEach(e, cJSON_GetObjectItem(lost, "threads")) {
            const cJSON *df = cJSON_GetObjectItem(e, "disk_full");
            int k = cJSON_GetObjectItem(e, "tid")->valueint == 200;
            if (cJSON_IsNumber(df) && (uint64_t)df->valuedouble > dfull[k])
                dfull[k] = (uint64_t)df->valuedouble;
        }
        cJSON_Delete(d);
    }
    out[0] += dfull[0];
    out[1] += dfull[1];
}

/* Three cycles, no mark between them (as when the disk fills again
 * within a second of space coming back): before, each pause counted the
 * records since the start of the stream again (+10 and +30 per thread). */
Test(convert_diskfull, cycles_count_each_record_once, .timeout = 10)
{
    struct conv_fx f;
    uint64_t got[2];

    open_marked(&f);
    for (int cycle = 0; cycle < 3; cycle++) {
        instants(&f, 10); /* converted, not yet marked: lost with the cut */
        feed(&f);
        gt__conv_disk_pause(f.c);
        skip(&f, 7);
        cr_assert_eq(gt__conv_resume(f.c), 0);
    }
    instants(&f, 5);
    feed(&f);
    cr_assert_eq(gt__conv_ack_mark(f.c), 0);
    cr_assert_eq(gt__conv_finish(f.c, NULL, 0), 0);
    account(&f, got);
    cr_expect_eq(got[0], 3 * 17 + 5, "thread 100: %llu", (unsigned long long)got[0]);
    cr_expect_eq(got[1], 3 * 17 + 5, "thread 200: %llu", (unsigned long long)got[1]);
    fx_close(&f);
}

/* A mark between two chunks: what it covered stays in the file and is
 * not counted; only what came after it is. */
Test(convert_diskfull, a_mark_keeps_what_it_covered, .timeout = 10)
{
    struct conv_fx f;
    uint64_t got[2];

    open_marked(&f);
    instants(&f, 4);
    feed(&f);
    cr_assert_eq(gt__conv_ack_mark(f.c), 0);
    instants(&f, 6);
    feed(&f);
    gt__conv_disk_pause(f.c);
    skip(&f, 3);
    cr_assert_eq(gt__conv_resume(f.c), 0);
    instants(&f, 2);
    feed(&f);
    cr_assert_eq(gt__conv_ack_mark(f.c), 0);
    instants(&f, 1);
    feed(&f);
    gt__conv_disk_pause(f.c);
    cr_assert_eq(gt__conv_resume(f.c), 0);
    cr_assert_eq(gt__conv_finish(f.c, NULL, 0), 0);
    account(&f, got);
    cr_expect_eq(got[0], 4 + 6 + 3 + 2 + 1, "thread 100: %llu", (unsigned long long)got[0]);
    cr_expect_eq(got[1], 4 + 6 + 3 + 2 + 1, "thread 200: %llu", (unsigned long long)got[1]);
    fx_close(&f);
}

/* A chunk skipped while the disk is full still says what the stream says
 * of itself: its agent's cumulative lost counts and its goodbye. Before,
 * a stream ending while full was marked truncated and kept older counts. */
Test(convert_diskfull, a_skipped_chunk_keeps_lost_counts_and_goodbye, .timeout = 10)
{
    struct conv_fx f;
    const char *const *paths;
    struct gt_r_lost l = {{GT_R_LOST, sizeof(l)}, 100, GT_LOST_EVENTS, 9};
    struct gt_r_goodbye g = {{GT_R_GOODBYE, sizeof(g)}, 0, T0 + 999000};

    open_marked(&f);
    instants(&f, 3);
    feed(&f);
    gt__conv_disk_pause(f.c);
    instants(&f, 2);
    add(&f, &l, sizeof(l));
    add(&f, &g, sizeof(g));
    gt__conv_skip(f.c, f.b.data, f.b.len);
    gt__recbuf_reset(&f.b);
    cr_assert_eq(gt__conv_resume(f.c), 0);
    cr_assert(gt__conv_goodbye(f.c), "the skipped goodbye was not seen");
    cr_assert_eq(gt__conv_finish(f.c, NULL, !gt__conv_goodbye(f.c)), 0);
    size_t n = gt__conv_files(f.c, &paths);
    cJSON *d = load(paths[n - 1]);
    cJSON *g2 = cJSON_GetObjectItem(d, "gradtrace");
    cJSON *lost = cJSON_GetObjectItem(g2, "lost"), *e;
    cr_expect_eq(cJSON_GetObjectItem(lost, "events")->valueint, 9);
    cr_expect(cJSON_IsFalse(cJSON_GetObjectItem(cJSON_GetObjectItem(g2, "stream"),
                                                 "truncated")));
    uint64_t dfull = 0;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(lost, "threads"))
        if (cJSON_GetObjectItem(e, "tid")->valueint == 100 &&
            cJSON_GetObjectItem(e, "disk_full"))
            dfull = (uint64_t)cJSON_GetObjectItem(e, "disk_full")->valuedouble;
    cr_expect_eq(dfull, 3 + 2);
    cJSON_Delete(d);
    fx_close(&f);
}

/* A file finished between the last mark and the full disk (here a main
 * file rotated inside a chunk) keeps its events: they must not be
 * counted as lost too. Before, that chunk's records were both in the
 * rotated file and counted (+40 per thread). */
Test(convert_diskfull, a_file_finished_since_the_mark_is_not_counted, .timeout = 10)
{
    struct conv_fx f;
    uint64_t got[2];
    const char *const *paths;

    open_rotating(&f, 30);
    instants(&f, 5);
    feed(&f);
    cr_assert_eq(gt__conv_ack_mark(f.c), 0);
    instants(&f, 20); /* 40 events: the file rotates inside this chunk */
    feed(&f);
    cr_assert_geq(gt__conv_files(f.c, &paths), 2, "no rotation");
    gt__conv_disk_pause(f.c);
    skip(&f, 3);
    cr_assert_eq(gt__conv_resume(f.c), 0);
    cr_assert_eq(gt__conv_finish(f.c, NULL, 0), 0);
    account(&f, got);
    cr_expect_eq(got[0], 5 + 20 + 3, "thread 100: %llu", (unsigned long long)got[0]);
    cr_expect_eq(got[1], 5 + 20 + 3, "thread 200: %llu", (unsigned long long)got[1]);
    fx_close(&f);
}
