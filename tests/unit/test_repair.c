/*
 * Repair of trace files whose writer died (issue #13, item 1): a finished
 * trace cut at any byte becomes valid JSON marked repaired and truncated,
 * keeps every whole event before the cut, and never keeps half a flow.
 */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/codec.h"
#include "daemon/convert/convert.h"
#include "daemon/convert/repair.h"
#include "tests/unit/conv_fixture.h"

/* A finished trace with scopes and fwdbwd flows; returns its text. */
static char *make_trace(size_t *len)
{
    struct conv_fx f;
    const char *const *paths;

    memset(&f, 0, sizeof(f));
    strcpy(f.dir, "/tmp/gt-repair-XXXXXX");
    cr_assert_not_null(mkdtemp(f.dir));
    struct gt__conv_opts o = {.out_dir = f.dir, .stem = "t"};
    f.c = gt__conv_create(&o);
    fx_hello(&f, 7, 0, 0, 1, "python3 \"quoted\\\" train.py");
    str(&f, 1, "layer \"one\" {x}");
    str(&f, 2, "MulBackward0");
    thr(&f, 100);
    for (uint64_t i = 0; i < 20; i++)
        created(&f, 1, i + 1, 10 + i);
    for (uint64_t i = 0; i < 20; i++)
        node(&f, 2, 20 - i, 100 + 10 * i, 105 + 10 * i);
    feed(&f);
    cr_assert_eq(gt__conv_finish(f.c, NULL, 0), 0);
    cr_assert_eq(gt__conv_files(f.c, &paths), 1);
    FILE *fp = fopen(paths[0], "rb");
    fseek(fp, 0, SEEK_END);
    *len = (size_t)ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *b = malloc(*len + 1);
    cr_assert_eq(fread(b, 1, *len, fp), *len);
    b[*len] = 0;
    fclose(fp);
    fx_close(&f);
    return b;
}

static int count_ph(const cJSON *doc, const char *ph)
{
    int n = 0;
    const cJSON *ev;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(doc, "traceEvents"))
        n += strcmp(s_of(ev, "ph"), ph) == 0;
    return n;
}

static cJSON *repair_prefix(const char *text, size_t cut, int *rc)
{
    char path[] = "/tmp/gt-repair-file-XXXXXX";
    struct gt__repair_info info;
    int fd = mkstemp(path);

    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, text, cut), (ssize_t)cut);
    close(fd);
    *rc = gt__trace_repair(path, &info);
    cJSON *doc = *rc >= 0 ? load(path) : NULL;
    unlink(path);
    return doc;
}

Test(repair, every_cut_becomes_a_valid_truncated_trace, .timeout = 60)
{
    size_t len;
    char *text = make_trace(&len);
    int last_x = 0, rc;

    for (size_t cut = 0; cut < len; cut++) {
        cJSON *doc = repair_prefix(text, cut, &rc);
        if (rc == 0 && cut == len - 1) {
            /* Only the last newline is missing: the JSON is whole. */
            cJSON_Delete(doc);
            continue;
        }
        cr_assert_eq(rc, 1, "cut at %zu of %zu: rc %d", cut, len, rc);
        const cJSON *g = cJSON_GetObjectItem(doc, "gradtrace");
        cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(g, "repaired")), "cut %zu", cut);
        cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(g, "stream"),
                                                   "truncated")));
        cr_assert_not_null(cJSON_GetObjectItem(cJSON_GetObjectItem(g, "anomalies"),
                                               "before_base"));
        cr_assert_eq(count_ph(doc, "s"), count_ph(doc, "f"), "half a flow at cut %zu", cut);
        int x = count_ph(doc, "X");
        cr_assert_geq(x, last_x, "a longer prefix kept fewer spans (cut %zu)", cut);
        last_x = x;
        cJSON_Delete(doc);
    }
    cJSON *whole = cJSON_Parse(text);
    cr_assert_eq(last_x, count_ph(whole, "X"), "a cut in the metadata keeps every span");
    cr_assert_gt(last_x, 20);
    cJSON_Delete(whole);
    free(text);
}

Test(repair, finished_and_foreign_files_are_left_alone)
{
    size_t len;
    char *text = make_trace(&len);
    int rc;
    cJSON *doc = repair_prefix(text, len, &rc);

    cr_assert_eq(rc, 0, "a finished trace is whole");
    cr_assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "gradtrace"), "repaired"));
    cJSON_Delete(doc);
    doc = repair_prefix("[1,2,3", 6, &rc);
    cr_assert_eq(rc, -EINVAL);
    cJSON_Delete(doc);
    free(text);
}

/* A daemon's file (ack marks): a repair keeps only what precedes the last
 * mark, i.e. what the agent was told is written. */
Test(repair, a_marked_file_is_cut_back_to_its_last_mark)
{
    const char *ev = "{\"ph\":\"i\",\"s\":\"t\",\"name\":\"a\\tb\",\"pid\":1,\"tid\":2,\"ts\":1}";
    char text[1024];
    int rc;

    snprintf(text, sizeof(text), "{\"traceEvents\":[\t\n%s,\n%s\t,\n%s,\n%s", ev, ev, ev, ev);
    cJSON *doc = repair_prefix(text, strlen(text), &rc);
    cr_assert_eq(rc, 1);
    cr_assert_eq(count_ph(doc, "i"), 2, "the events after the last mark are cut");
    cJSON_Delete(doc);
    /* No mark after the first: nothing was acknowledged. */
    snprintf(text, sizeof(text), "{\"traceEvents\":[\t\n%s,\n%s", ev, ev);
    doc = repair_prefix(text, strlen(text), &rc);
    cr_assert_eq(rc, 1);
    cr_assert_eq(count_ph(doc, "i"), 0);
    cJSON_Delete(doc);
    /* Cut in the metadata of a marked file: the mark still rules. */
    snprintf(text, sizeof(text), "{\"traceEvents\":[\t\n%s\t,\n%s\n],\n\"displayTimeUnit\"", ev, ev);
    doc = repair_prefix(text, strlen(text), &rc);
    cr_assert_eq(rc, 1);
    cr_assert_eq(count_ph(doc, "i"), 1);
    cJSON_Delete(doc);
}

/* A repair whose tail a full disk cut short (the daemon tries again when
 * space is back) keeps the mark it cut at, so the next try cuts there
 * too. Before, the first try cut the mark off with what followed it, and
 * the next went back to the mark before it (often the file's first: 0
 * events, every acknowledged one gone). */
Test(repair, a_repair_cut_short_keeps_its_mark)
{
    const char *ev = "{\"ph\":\"i\",\"s\":\"t\",\"name\":\"a\",\"pid\":1,\"tid\":2,\"ts\":1}";
    char text[1024], path[] = "/tmp/gt-repair-file-XXXXXX";
    struct gt__repair_info info;
    struct stat st;
    int fd = mkstemp(path);

    cr_assert_geq(fd, 0);
    snprintf(text, sizeof(text), "{\"traceEvents\":[\t\n%s,\n%s,\n%s\t,\n%s", ev, ev, ev, ev);
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    cr_assert_eq(gt__trace_repair_fd(fd, &info, 1), 1);
    cr_assert_eq(info.events, 3);
    cr_assert_eq(fstat(fd, &st), 0);
    /* The tail written only in part, as a write to a full disk ends. */
    cr_assert_eq(ftruncate(fd, st.st_size / 2 + (off_t)strlen(text) / 2), 0);
    cr_assert_eq(gt__trace_repair_fd(fd, &info, 1), 1);
    close(fd);
    cJSON *doc = load(path);
    cr_expect_eq(count_ph(doc, "i"), 3, "the second try cut back further");
    cJSON_Delete(doc);
    unlink(path);
}
