/*
 * The streaming JSON writer (daemon/jsonw.c): string escaping and UTF-8
 * repair, number formatting, buffered output and sticky write errors.
 * Output is parsed back with cJSON wherever it is meant to be JSON.
 */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/convert/jsonw.h"

/* Escapes s as a JSON string literal and returns cJSON's reading of it. */
static char *roundtrip(const char *s, size_t n)
{
    char *buf = malloc(GT__JSON_ESCAPED_MAX(n) + 3);
    cr_assert_not_null(buf);
    buf[0] = '"';
    size_t k = gt__json_escape(buf + 1, s, n);
    buf[k + 1] = '"';
    buf[k + 2] = 0;
    cJSON *j = cJSON_Parse(buf);
    cr_assert_not_null(j, "escaped output is not JSON: %s", buf);
    cr_assert(cJSON_IsString(j));
    char *out = strdup(j->valuestring);
    cJSON_Delete(j);
    free(buf);
    return out;
}

Test(jsonw, escapes_quotes_backslashes_and_controls)
{
    const char in[] = "a\"b\\c\nd\te\rf\bg\fh\x01i\x1fj\x7fk";
    char out[128];
    size_t k = gt__json_escape(out, in, sizeof(in) - 1);
    out[k] = 0;
    cr_assert_str_eq(out, "a\\\"b\\\\c\\nd\\te\\rf\\bg\\fh\\u0001i\\u001fj\x7fk");
    char *back = roundtrip(in, sizeof(in) - 1);
    cr_assert_str_eq(back, in);
    free(back);
}

Test(jsonw, escapes_nul_bytes_inside_strings)
{
    const char in[] = {'x', 0, 'y'};
    char out[32];
    size_t k = gt__json_escape(out, in, 3);
    cr_assert_eq(k, 8);
    cr_assert(memcmp(out, "x\\u0000y", 8) == 0);
}

Test(jsonw, keeps_valid_utf8)
{
    const char in[] = "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf";
    char out[64];
    size_t k = gt__json_escape(out, in, sizeof(in) - 1);
    cr_assert_eq(k, sizeof(in) - 1);
    cr_assert(memcmp(out, in, k) == 0);
}

Test(jsonw, replaces_invalid_utf8_with_fffd)
{
    static const struct {
        const char *in;
        const char *want;
    } cases[] = {
        {"a\x80z", "a\xef\xbf\xbdz"},                    /* lone continuation */
        {"\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd"},        /* overlong 2-byte */
        {"\xe0\x80\xaf", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* overlong */
        {"\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"}, /* surrogate */
        {"\xf4\x90\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
        {"\xf5", "\xef\xbf\xbd"},
        {"ab\xe2\x82", "ab\xef\xbf\xbd\xef\xbf\xbd"},    /* truncated at end */
        {"\xff\xfe", "\xef\xbf\xbd\xef\xbf\xbd"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *back = roundtrip(cases[i].in, strlen(cases[i].in));
        cr_assert_str_eq(back, cases[i].want, "case %zu", i);
        free(back);
    }
}

Test(jsonw, every_single_byte_roundtrips_or_becomes_fffd)
{
    for (int i = 1; i < 256; i++) {
        char in[2] = {(char)i, 'x'}, want[8];
        if (i < 0x80)
            snprintf(want, sizeof(want), "%cx", i);
        else
            snprintf(want, sizeof(want), "\xef\xbf\xbdx");
        char *back = roundtrip(in, 2);
        cr_assert_str_eq(back, want, "byte 0x%02x", i);
        free(back);
    }
}

static void check_u64(uint64_t v)
{
    char got[32], want[32];
    char *e = gt__fmt_u64(got, v);
    *e = 0;
    snprintf(want, sizeof(want), "%" PRIu64, v);
    cr_assert_str_eq(got, want);
}

Test(jsonw, formats_integers_like_printf)
{
    uint64_t p = 1;
    check_u64(0);
    check_u64(UINT64_MAX);
    for (int i = 0; i < 20; i++, p *= 10) {
        check_u64(p);
        check_u64(p - 1);
        check_u64(p + 1);
    }
    srand(42);
    for (int i = 0; i < 100000; i++)
        check_u64(((uint64_t)rand() << 40) ^ ((uint64_t)rand() << 20) ^
                  (uint64_t)rand());
    char got[32];
    *gt__fmt_i64(got, INT64_MIN) = 0;
    cr_assert_str_eq(got, "-9223372036854775808");
    *gt__fmt_i64(got, -42) = 0;
    cr_assert_str_eq(got, "-42");
}

Test(jsonw, formats_microseconds_with_nanosecond_fraction)
{
    static const struct {
        uint64_t ns;
        const char *want;
    } cases[] = {{0, "0.000"},        {1, "0.001"},      {42, "0.042"},
                 {999, "0.999"},      {1000, "1.000"},   {1001, "1.001"},
                 {1234567, "1234.567"}, {UINT64_MAX, "18446744073709551.615"}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char got[40];
        *gt__fmt_us(got, cases[i].ns) = 0;
        cr_assert_str_eq(got, cases[i].want);
    }
    /* Parsed back as JSON numbers, they give the nanoseconds again. */
    srand(7);
    for (int i = 0; i < 10000; i++) {
        uint64_t ns = (((uint64_t)rand() << 20) ^ (uint64_t)rand()) %
                      (1ull << 50);
        char got[40];
        *gt__fmt_us(got, ns) = 0;
        cJSON *j = cJSON_Parse(got);
        cr_assert(cJSON_IsNumber(j), "%s", got);
        cr_assert_eq((uint64_t)llround(j->valuedouble * 1000.0), ns, "%s", got);
        cJSON_Delete(j);
    }
}

static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    cr_assert_eq(fread(b, 1, (size_t)n, f), (size_t)n);
    b[n] = 0;
    fclose(f);
    *len = (size_t)n;
    return b;
}

Test(jsonw, streams_large_documents_through_a_small_buffer, .timeout = 20)
{
    char dir[] = "/tmp/gt-jsonw-XXXXXX", path[64];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/out.json", dir);
    struct gt__jw w;
    cr_assert_eq(gt__jw_init(&w, 0), 0);
    w.fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    cr_assert(w.fd >= 0);
    /* A long string with multi-byte characters across the writer's
     * internal slice boundaries, then many small values. */
    size_t n = 3u << 20;
    char *big = malloc(n);
    for (size_t i = 0; i < n; i++)
        big[i] = "a\xc3\xa9\xe2\x82\xac\"\n"[i % 8];
    gt__jw_puts(&w, "{\"s\":");
    gt__jw_str(&w, big, n);
    gt__jw_puts(&w, ",\"v\":[");
    for (int i = 0; i < 200000; i++) {
        if (i)
            gt__jw_puts(&w, ",");
        gt__jw_i64(&w, (int64_t)i * 7919 - 1000000);
    }
    gt__jw_puts(&w, "]}");
    cr_assert_eq(gt__jw_flush(&w), 0);
    uint64_t produced = w.bytes;
    close(w.fd);
    gt__jw_close(&w);

    size_t len;
    char *text = read_all(path, &len);
    cr_assert_eq(len, produced);
    cJSON *doc = cJSON_Parse(text);
    cr_assert_not_null(doc);
    const cJSON *s = cJSON_GetObjectItem(doc, "s");
    cr_assert(cJSON_IsString(s));
    /* 8 bytes per period: only a cut between whole sequences roundtrips. */
    cr_assert_eq(strlen(s->valuestring), n);
    cr_assert(memcmp(s->valuestring, big, n) == 0);
    const cJSON *v = cJSON_GetObjectItem(doc, "v");
    cr_assert_eq(cJSON_GetArraySize(v), 200000);
    cr_assert_eq(cJSON_GetArrayItem(v, 199999)->valuedouble,
                 199999.0 * 7919 - 1000000);
    cJSON_Delete(doc);
    free(text);
    free(big);
    unlink(path);
    rmdir(dir);
}

Test(jsonw, write_errors_are_sticky, .timeout = 10)
{
    struct gt__jw w;
    cr_assert_eq(gt__jw_init(&w, 0), 0);
    w.fd = open("/dev/full", O_WRONLY);
    if (w.fd < 0)
        cr_skip_test("no /dev/full");
    gt__jw_puts(&w, "[1,2,3]");
    int rc = gt__jw_flush(&w);
    cr_assert(rc < 0, "writing to /dev/full must fail");
    gt__jw_puts(&w, "more");
    cr_assert_eq(gt__jw_flush(&w), rc);
    close(w.fd);
    gt__jw_close(&w);
}
