/*
 * `gradtrace merge`'s library parts: the event-line rewriter
 * (daemon/convert/mergeline.h) and the clock alignment from collectives
 * (daemon/convert/align.h), on synthetic inputs whose answers are known,
 * and how it reads its inputs' metadata (daemon/cli/merge_in.c).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <unistd.h>

#include "daemon/cli/merge.h"
#include "daemon/convert/align.h"
#include "daemon/convert/mergeline.h"

static const char *rw(const struct gt__mline *m, const char *in)
{
    static char out[4096];
    ssize_t n = gt__mline_rewrite(m, in, strlen(in), out, sizeof(out) - 1);
    cr_assert_geq(n, 0, "rewrite of %s: %zd", in, n);
    out[n] = '\0';
    return out;
}

Test(merge, line_moves_ts_pid_and_flow_id)
{
    struct gt__mline m = {.delta_ns = 1500, .pid = 2000, .id_base = 1ull << 32};
    cr_assert_str_eq(rw(&m, "{\"ph\":\"X\",\"cat\":\"module\",\"pid\":9076,\"tid\":9076,"
                            "\"ts\":882611.190,\"dur\":1.000,\"name\":\"a\"},\n"),
                     "{\"ph\":\"X\",\"cat\":\"module\",\"pid\":2000,\"tid\":9076,"
                     "\"ts\":882612.690,\"dur\":1.000,\"name\":\"a\"}");
    cr_assert_str_eq(rw(&m, "{\"ph\":\"s\",\"id\":7,\"pid\":1073741825,\"tid\":3,\"ts\":0.001}"),
                     "{\"ph\":\"s\",\"id\":4294967303,\"pid\":2002,\"tid\":3,\"ts\":1.501}");
}

Test(merge, line_touches_top_level_keys_only)
{
    struct gt__mline m = {.delta_ns = 1000000, .pid = 1000};
    /* "ts" inside args and inside a name stay as they are. */
    cr_assert_str_eq(rw(&m, "\t{\"name\":\"x \\\"ts\\\":1\",\"pid\":5,\"ts\":1.000,"
                            "\"args\":{\"ts\":3,\"pid\":4,\"id\":2}}"),
                     "{\"name\":\"x \\\"ts\\\":1\",\"pid\":1000,\"ts\":1001.000,"
                     "\"args\":{\"ts\":3,\"pid\":4,\"id\":2}}");
}

Test(merge, line_clamps_negative_time)
{
    struct gt__mline m = {.delta_ns = -5000, .pid = 1000};
    cr_assert_str_eq(rw(&m, "{\"pid\":1,\"ts\":2.000}"), "{\"pid\":1000,\"ts\":0.000}");
}

Test(merge, line_names_process_by_rank_and_sorts_it)
{
    struct gt__mline m = {.pid = 3000, .prefix = "rank 2 host h: ", .prefix_len = 15};
    cr_assert_str_eq(rw(&m, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":9,\"tid\":0,"
                            "\"args\":{\"name\":\"python3 pid 9\"}}"),
                     "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":3000,\"tid\":0,"
                     "\"args\":{\"name\":\"rank 2 host h: python3 pid 9\"}}");
    cr_assert_str_eq(rw(&m, "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":9,"
                            "\"tid\":0,\"args\":{\"sort_index\":0}}"),
                     "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":3000,"
                     "\"tid\":0,\"args\":{\"sort_index\":3000}}");
    /* A thread's name keeps its own. */
    cr_assert_str_eq(rw(&m, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":9,\"tid\":9,"
                            "\"args\":{\"name\":\"python3\"}}"),
                     "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":3000,\"tid\":9,"
                     "\"args\":{\"name\":\"python3\"}}");
}

Test(merge, line_refuses_what_is_not_an_event)
{
    struct gt__mline m = {.pid = 1};
    char out[512];
    const char *bad[] = {"", "],", "{\"pid\":1", "{\"ts\":\"x\"}", "{\"ts\":1e5}",
                         "{\"pid\":-3}", "{\"name\":\"unterminated}",
                         "{\"ts\":99999999999999999.000}"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        cr_assert_eq(gt__mline_rewrite(&m, bad[i], strlen(bad[i]), out, sizeof(out)),
                     -EINVAL, "%s", bad[i]);
    cr_assert_eq(gt__mline_rewrite(&m, "{}", 2, out, 8), -ENOSPC);
}

/* Collectives of two ranks whose clocks differ by `off` (rank 1 reads
 * off less): rank (k % 2) arrives `late` ns after the other, every rank
 * leaves `exit` ns after the last arrival, rank 1 `skew` ns later. */
static void make(struct gt__align_coll *a, struct gt__align_coll *b, int n,
                 int64_t off, int64_t late, int64_t exit, int64_t skew)
{
    for (int k = 0; k < n; k++) {
        int64_t t = 1000000000 + k * 10000000, last = t + late;
        a[k] = (struct gt__align_coll){0, (uint64_t)k, k % 2 ? t : last, last + exit};
        b[k] = (struct gt__align_coll){0, (uint64_t)k, (k % 2 ? last : t) - off,
                                       last + exit + skew - off};
    }
}

Test(merge, align_recovers_offset_within_its_bound)
{
    struct gt__align_coll a[40], b[40];
    struct gt__align_result r;
    const int64_t offs[] = {0, 123456, -987654321, 5};
    for (size_t i = 0; i < 4; i++) {
        make(a, b, 40, offs[i], 2000000, 30000, 8000);
        cr_assert_eq(gt__align_pair(a, 40, b, 40, &r), 0);
        cr_assert_eq(r.method, GT__ALIGN_COLLECTIVES);
        cr_assert_eq(r.matched, 40);
        /* [off - exit - skew, off + exit]: its middle, half its width. */
        cr_assert_eq(r.correction_ns, offs[i] - 4000);
        cr_assert_eq(r.uncertainty_ns, 34000);
        cr_assert_eq(r.lo_ns, offs[i] - 38000);
        cr_assert_eq(r.hi_ns, offs[i] + 30000);
        /* The ends differ by skew: their median says off - skew. */
        cr_assert_eq(r.end_median_ns, offs[i] - 8000);
        cr_assert_leq(r.correction_ns - r.uncertainty_ns, offs[i]);
        cr_assert_geq(r.correction_ns + r.uncertainty_ns, offs[i]);
    }
}

Test(merge, align_matches_by_group_and_seq)
{
    struct gt__align_coll a[10], b[10];
    struct gt__align_result r;
    make(a, b, 10, 777, 1000000, 1000, 0);
    /* Rank 1 holds only the last 6, in reverse order, plus one of another
     * group that the reference never saw. */
    struct gt__align_coll c[7];
    for (int i = 0; i < 6; i++)
        c[i] = b[9 - i];
    c[6] = (struct gt__align_coll){5, 0, 1, 2};
    cr_assert_eq(gt__align_pair(a, 10, c, 7, &r), 0);
    cr_assert_eq(r.matched, 6);
    cr_assert_eq(r.correction_ns, 777);
}

Test(merge, align_without_shared_collectives_is_realtime_only)
{
    struct gt__align_coll a[4], b[4];
    struct gt__align_result r;
    make(a, b, 4, 10, 1000, 10, 0);
    for (int i = 0; i < 4; i++)
        b[i].group = 9;
    cr_assert_eq(gt__align_pair(a, 4, b, 4, &r), 0);
    cr_assert_eq(r.method, GT__ALIGN_REALTIME);
    cr_assert_eq(r.correction_ns, 0);
    cr_assert_eq(r.uncertainty_ns, -1);
    cr_assert_eq(gt__align_pair(a, 0, b, 4, &r), 0);
    cr_assert_eq(r.method, GT__ALIGN_REALTIME);
}

Test(merge, align_flags_contradicting_bounds)
{
    struct gt__align_coll a[6], b[6];
    struct gt__align_result r;
    make(a, b, 6, 0, 100000, 10, 0);
    /* The clocks drift by 1 ms between collectives: no constant fits. */
    for (int i = 0; i < 6; i++) {
        b[i].begin_ns += i * 1000000;
        b[i].end_ns += i * 1000000;
    }
    cr_assert_eq(gt__align_pair(a, 6, b, 6, &r), 0);
    cr_assert_eq(r.method, GT__ALIGN_INCONSISTENT);
    cr_assert_gt(r.uncertainty_ns, 0);
}

/* ------------------------------------------------ inputs (daemon/cli/merge_in.c) */

static const char *write_tmp(const char *text)
{
    static char path[64];
    strcpy(path, "/tmp/gt-merge-XXXXXX");
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

#define EVENTS "{\"traceEvents\":[\t\n{\"ph\":\"X\",\"pid\":7,\"ts\":1.000,\"dur\":1.000,\"name\":\"a\"}\n],\n"

Test(merge, input_metadata_is_read_from_the_tail)
{
    struct gt__merge_file f = {0};
    const char *why;
    const char *p = write_tmp(
        EVENTS "\"displayTimeUnit\":\"ns\",\n\"baseTimeNanoseconds\":1700000000000000000,\n"
        "\"gradtrace\":{\"pid\":7,\"rank\":3,\"world_size\":4,\"hostname\":\"n1\",\n"
        "\"clock\":{\"base_mono_ns\":5000000000},\n\"collectives\":[{\"op\":\"barrier\","
        "\"group\":0,\"ranks\":4,\"seq\":9,\"begin_ns\":5000000100,\"end_ns\":5000000200},"
        "{\"op\":\"x\",\"seq\":1e30,\"begin_ns\":9,\"end_ns\":1},7]}\n}\n");
    cr_assert_eq(gt__merge_file_open(&f, p, &why), 0, "%s", why ? why : "");
    cr_assert_eq(f.rank, 3);
    cr_assert_eq(f.world, 4);
    cr_assert_eq(f.pid, 7);
    cr_assert_str_eq(f.host, "n1");
    cr_assert_eq(f.base_mono, 5000000000);
    cr_assert_eq(f.base_real, 1700000000000000000);
    cr_assert_eq(f.ncolls, 1, "the broken entries are left out");
    cr_assert_eq(f.colls[0].seq, 9);
    cr_assert_str_eq(f.colls[0].op, "barrier");
    /* The events end where "]," starts. */
    cr_assert_eq(f.events_end, (off_t)(strstr(EVENTS, "],") - EVENTS));
    gt__merge_file_close(&f);
    unlink(p);
}

Test(merge, unsuitable_inputs_say_why)
{
    static const struct {
        const char *text, *why;
    } cases[] = {
        {"[]", "must start with"},
        {"{\"traceEvents\":[\n{\"ph\":\"X\"},\n", "not a complete gradtrace trace"},
        {EVENTS "\"gradtrace\":{\"merge\":{}}\n}\n", "already a merged trace"},
        {EVENTS "\"baseTimeNanoseconds\":0,\"gradtrace\":{\"clock\":{\"base_mono_ns\":5}}\n}\n",
         "clock is unknown"},
        {EVENTS "\"gradtrace\":{}\n}\n", "no gradtrace clock metadata"},
        {EVENTS "\"gradtrace\":{\n", "metadata is not JSON"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct gt__merge_file f = {0};
        const char *why = NULL, *p = write_tmp(cases[i].text);
        cr_assert_eq(gt__merge_file_open(&f, p, &why), -EINVAL, "case %zu", i);
        cr_assert(why && strstr(why, cases[i].why), "case %zu: %s", i, why ? why : "(none)");
        gt__merge_file_close(&f);
        unlink(p);
    }
}
