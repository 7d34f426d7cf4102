/*
 * What the daemon's status reads of a converter instead of walking each
 * chunk itself (daemon/server/agent_conv.c): the stream's lost counts
 * (gt__conv_summary) and its job route (gt__conv_job_route). They must
 * hold every GT_R_LOST and GT_R_JOB_ROUTE fed, also those of records the
 * converter did not convert: a chunk skipped at a full disk, the rest of
 * a chunk after a write error, a chunk arriving after one.
 *
 * A write error without a full disk: RLIMIT_FSIZE with SIGXFSZ ignored
 * makes writes past the limit fail with EFBIG (Criterion runs each test
 * in its own process, so the limit stays in it); a file rotated within a
 * chunk is written out there, so the error stops the chunk midway.
 */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/codec.h"
#include "daemon/convert/convert.h"
#include "tests/unit/conv_fixture.h"

/* max_events: rotate past so many events (0: the default). */
static void open_fx(struct conv_fx *f, uint64_t max_events)
{
    fx_open_named(f, "/tmp/gt-cst-XXXXXX", max_events, "status");
}

static void lost(struct conv_fx *f, uint32_t tid, uint32_t what, uint64_t n)
{
    struct gt_r_lost r = {{GT_R_LOST, sizeof(r)}, tid, what, n};
    add(f, &r, sizeof(r));
}

static void route(struct conv_fx *f, uint32_t up)
{
    struct gt_r_job_route r = {{GT_R_JOB_ROUTE, sizeof(r)}, up};
    add(f, &r, sizeof(r));
}

static void instants(struct conv_fx *f, uint32_t tid, int n)
{
    static uint64_t us = 100;

    thr(f, tid);
    for (int i = 0; i < n; i++) {
        struct gt_r_instant r = {{GT_R_INSTANT, sizeof(r)}, 1, T0 + (us++) * 1000};
        add(f, &r, sizeof(r));
    }
}

static int feed_rc(struct conv_fx *f)
{
    struct gt_chunk_header h;
    int rc;

    memset(&h, 0, sizeof(h));
    h.record_count = f->b.count;
    rc = gt__conv_chunk(f->c, &h, f->b.data, f->b.len);
    gt__recbuf_reset(&f->b);
    return rc;
}

static struct gt__conv_summary sum(const struct conv_fx *f)
{
    struct gt__conv_summary s;

    gt__conv_summary(f->c, &s);
    return s;
}

/* Cumulative counts: the newest per (thread, kind), summed over threads,
 * for more threads than the daemon's status used to keep (64). */
Test(conv_status, lost_counts_are_the_newest_per_thread, .timeout = 10)
{
    struct conv_fx f;

    open_fx(&f, 0);
    for (uint32_t tid = 1; tid <= 100; tid++) {
        lost(&f, tid, GT_LOST_EVENTS, 1);
        lost(&f, tid, GT_LOST_EVENTS, 3); /* replaces the 1 */
        lost(&f, tid, GT_LOST_CHUNKS, 2);
    }
    lost(&f, 0, GT_LOST_CUPTI, 7);
    cr_assert_eq(feed_rc(&f), 0);
    cr_expect_eq(sum(&f).lost_events, 300);
    cr_expect_eq(sum(&f).lost_chunks, 200);
    cr_expect_eq(sum(&f).lost_cupti, 7);
    cr_assert_eq(gt__conv_finish(f.c, NULL, 0), 0);
    fx_close(&f);
}

Test(conv_status, job_route_follows_the_last_record, .timeout = 10)
{
    struct conv_fx f;

    open_fx(&f, 0);
    cr_expect_eq(gt__conv_job_route(f.c), 0, "no record yet: down");
    route(&f, 1);
    cr_assert_eq(feed_rc(&f), 0);
    cr_expect_eq(gt__conv_job_route(f.c), 1);
    route(&f, 0);
    cr_assert_eq(feed_rc(&f), 0);
    cr_expect_eq(gt__conv_job_route(f.c), 0);
    /* A chunk skipped at a full disk still says it. */
    route(&f, 1);
    gt__conv_skip(f.c, f.b.data, f.b.len);
    gt__recbuf_reset(&f.b);
    cr_expect_eq(gt__conv_job_route(f.c), 1);
    cr_assert_eq(gt__conv_finish(f.c, NULL, 0), 0);
    fx_close(&f);
}

/* The writer fails within a chunk: the lost counts and route after the
 * record that failed count all the same, and so do a later chunk's. */
Test(conv_status, counts_after_a_write_error_still_count, .timeout = 10)
{
    struct rlimit lim = {.rlim_cur = 64 * 1024, .rlim_max = RLIM_INFINITY};
    struct conv_fx f;

    signal(SIGXFSZ, SIG_IGN);
    open_fx(&f, 1000);
    lost(&f, 5, GT_LOST_EVENTS, 1);
    cr_assert_eq(feed_rc(&f), 0);
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    /* A rotation within the chunk writes the file out, past the limit. */
    instants(&f, 5, 5000);
    lost(&f, 5, GT_LOST_EVENTS, 11);
    lost(&f, 6, GT_LOST_CUPTI, 4);
    route(&f, 1);
    cr_assert_lt(feed_rc(&f), 0, "the writes past the limit failed");
    cr_expect_eq(sum(&f).lost_events, 11);
    cr_expect_eq(sum(&f).lost_cupti, 4);
    cr_expect_eq(gt__conv_job_route(f.c), 1);
    lost(&f, 6, GT_LOST_CUPTI, 9);
    cr_assert_lt(feed_rc(&f), 0, "the error is sticky");
    cr_expect_eq(sum(&f).lost_cupti, 9);
    lim.rlim_cur = RLIM_INFINITY;
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    cr_expect_lt(gt__conv_finish(f.c, NULL, 1), 0, "finishing reports the error");
    fx_close(&f);
}
