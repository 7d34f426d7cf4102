/*
 * The strict JSON checker (daemon/convert/jsonchk.h) that merge and repair
 * use on untrusted trace files: what RFC 8259 calls JSON passes, and what
 * a lax scanner (cJSON, a brace counter) lets through does not.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "daemon/convert/jsonchk.h"

static int ok(const char *s)
{
    return gt__json_check(s, strlen(s));
}

Test(jsonchk, accepts_json)
{
    static const char *const good[] = {
        "{}", "[]", " {\"a\":1} \n", "0", "-0.5e+3", "1E9", "\"\"", "true",
        "null", "[false,[],{}]",
        "{\"ph\":\"X\",\"ts\":5002.110,\"dur\":1.200,\"name\":\"l (Linear) forward\"}",
        "\"\\u001b \\ud83d\\ude00 \\\" \\\\ \\/ \\n\"", "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"",
        "{\"a\":{\"b\":[1,2,{\"c\":null}]}}", "\t[1]\t"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        cr_assert(ok(good[i]), "refused %zu: %s", i, good[i]);
}

Test(jsonchk, refuses_what_lax_readers_take)
{
    static const char *const bad[] = {
        "", "{", "{\"a\":1,}", "[1,]", "{\"a\" 1}", "{a:1}", "{\"a\":01}",
        "+1", "1.", ".5", "1e", "NaN", "Infinity", "tru", "nul", "[1] x",
        "{}{}", "\"a\x1b\"", "\"a\nb\"", "\"\xff\"", "\"\xc0\xaf\"",
        "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"", "\"\xe2\x82\"", "\"\\x\"",
        "\"\\ud800\"", "\"\\udc00\"", "\"\\ud800\\u0041\"", "\"\\u12\"",
        "[}", "{]", "]", "{\"a\":1}}", "{\"a\":\"b\"\x01}", "-", "--1",
        "{\"ph\":\"X\",garbage}", "[\"a\" \"b\"]"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        cr_assert(!ok(bad[i]), "accepted %zu: %s", i, bad[i]);
}

Test(jsonchk, bounds_nesting)
{
    char deep[2 * GT__JCHK_DEPTH + 3];
    size_t n = GT__JCHK_DEPTH;
    memset(deep, '[', n);
    memset(deep + n, ']', n);
    cr_assert(gt__json_check(deep, 2 * n), "%zu levels refused", n);
    memset(deep, '[', n + 1);
    memset(deep + n + 1, ']', n + 1);
    cr_assert(!gt__json_check(deep, 2 * n + 2), "%zu levels accepted", n + 1);
}

Test(jsonchk, byte_at_a_time_stops_at_the_first_bad_byte)
{
    static const char text[] = "{\"traceEvents\":[\n{\"ph\":\"X\"},\n{\"ph\":\x01}";
    struct gt__jchk j;
    size_t i;
    gt__jchk_init(&j);
    for (i = 0; i < sizeof(text) - 1; i++)
        if (gt__jchk_byte(&j, (unsigned char)text[i]) < 0)
            break;
    cr_assert_eq(text[i], '\x01', "stopped at %zu", i);
    cr_assert(!gt__jchk_whole(&j));
}
