/*
 * common/util.c: the helpers every room shares (clocks, write-all, FNV-1a,
 * number parsing, error formatting).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/util.h"

Test(util, clocks_advance_and_differ)
{
    uint64_t a = gt__mono_ns(), b = gt__mono_ns();
    cr_assert(b >= a);
    /* Realtime is seconds since 1970; monotonic since boot: far apart. */
    cr_assert(gt__real_ns() > 1500000000ull * 1000000000ull);
}

Test(util, fnv1a_known_values)
{
    /* Published FNV-1a test vectors. */
    cr_assert_eq(gt__fnv1a64(GT__FNV64_INIT, "", 0), 0xcbf29ce484222325ull);
    cr_assert_eq(gt__fnv1a64(GT__FNV64_INIT, "a", 1), 0xaf63dc4c8601ec8cull);
    cr_assert_eq(gt__fnv1a32("a", 1), 0xe40c292cu);
    cr_assert_eq(gt__fnv1a32("foobar", 6), 0xbf9cf968u);
    /* Continuing a 64-bit hash equals hashing the concatenation. */
    cr_assert_eq(gt__fnv1a64(gt__fnv1a64(GT__FNV64_INIT, "foo", 3), "bar", 3),
                 gt__fnv1a64(GT__FNV64_INIT, "foobar", 6));
}

Test(util, parse_u64_accepts_decimal_in_range)
{
    uint64_t v = 0;
    cr_assert_eq(gt__parse_u64("0", 0, 10, &v), 0);
    cr_assert_eq(v, 0);
    cr_assert_eq(gt__parse_u64("18446744073709551615", 0, UINT64_MAX, &v), 0);
    cr_assert_eq(v, UINT64_MAX);
    cr_assert_eq(gt__parse_u64n("12345", 3, 0, 1000, &v), 0);
    cr_assert_eq(v, 123);
}

Test(util, parse_u64_rejects_what_is_not_a_plain_number)
{
    uint64_t v = 7;
    cr_assert_eq(gt__parse_u64("", 0, 10, &v), -EINVAL);
    cr_assert_eq(gt__parse_u64("-1", 0, 10, &v), -EINVAL);
    cr_assert_eq(gt__parse_u64("+1", 0, 10, &v), -EINVAL);
    cr_assert_eq(gt__parse_u64(" 1", 0, 10, &v), -EINVAL);
    cr_assert_eq(gt__parse_u64("1k", 0, 10, &v), -EINVAL);
    cr_assert_eq(gt__parse_u64("11", 0, 10, &v), -ERANGE);
    cr_assert_eq(gt__parse_u64("3", 4, 10, &v), -ERANGE);
    cr_assert_eq(gt__parse_u64("18446744073709551616", 0, UINT64_MAX, &v), -ERANGE);
    cr_assert_eq(gt__parse_u64("000000000000000000001", 0, 10, &v), -ERANGE);
    cr_assert_eq(v, 7, "a failed parse leaves *out alone");
}

Test(util, parse_i64_signs_and_limits)
{
    int64_t v = 0;
    cr_assert_eq(gt__parse_i64("-1", -1, 5, &v), 0);
    cr_assert_eq(v, -1);
    cr_assert_eq(gt__parse_i64("-9223372036854775808", INT64_MIN, 0, &v), 0);
    cr_assert_eq(v, INT64_MIN);
    cr_assert_eq(gt__parse_i64("9223372036854775808", INT64_MIN, INT64_MAX, &v), -ERANGE);
    cr_assert_eq(gt__parse_i64("-2", -1, 5, &v), -ERANGE);
    cr_assert_eq(gt__parse_i64("-", -1, 5, &v), -EINVAL);
}

Test(util, write_all_writes_everything_through_a_pipe)
{
    int p[2];
    char buf[200000], back[200000];
    cr_assert_eq(pipe(p), 0);
    for (size_t i = 0; i < sizeof(buf); i++)
        buf[i] = (char)(i * 7);
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        _exit(gt__write_all(p[1], buf, sizeof(buf), 0, 0) == 0 ? 0 : 1);
    }
    close(p[1]);
    size_t got = 0;
    ssize_t n;
    while ((n = read(p[0], back + got, sizeof(back) - got)) > 0)
        got += (size_t)n;
    cr_assert_eq(got, sizeof(buf));
    cr_assert_eq(memcmp(buf, back, sizeof(buf)), 0);
}

Test(util, write_all_times_out_on_a_full_nonblocking_socket, .timeout = 10)
{
    int sv[2];
    static char buf[1 << 22];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    fcntl(sv[0], F_SETFL, O_NONBLOCK);
    /* Nobody reads sv[1]: 4 MiB cannot fit the socket buffers. */
    cr_assert_eq(gt__write_all(sv[0], buf, sizeof(buf), GT__WRITE_SOCKET, 50),
                 -ETIMEDOUT);
    close(sv[1]);
    /* A closed peer is an error, not a SIGPIPE. */
    cr_assert_eq(gt__write_all(sv[0], buf, 1, GT__WRITE_SOCKET, 0), -EPIPE);
}

Test(util, fail_formats_and_returns_rc)
{
    char err[16];
    cr_assert_eq(gt__fail(err, sizeof(err), -EINVAL, "bad %s=%d", "count", 12345678), -EINVAL);
    cr_assert_str_eq(err, "bad count=12345", "cut to the buffer, NUL-terminated");
    cr_assert_eq(gt__fail(NULL, 0, -ENOMEM, "x"), -ENOMEM);
}

/* Agent text: invalid UTF-8 and every control character (C0, DEL, C1
 * such as U+009B, a one-byte CSI) become '?'; valid text is kept. */
Test(util, text_clean_makes_utf8_without_controls)
{
    char a[] = "ok \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80";
    char b[] = "x\xc2\x9b" "31m\x1b[0m\xff\xfe\xc0\xaf\xed\xa0\x80\x7f\ny\xe2\x82";
    char c[] = "\xc2\xa0nbsp";

    cr_assert_eq(gt__text_clean(a), strlen("ok \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
    cr_assert_str_eq(a, "ok \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
    gt__text_clean(b);
    cr_assert_str_eq(b, "x?31m?[0m?????????y??", "%s", b);
    gt__text_clean(c);
    cr_assert_str_eq(c, "\xc2\xa0nbsp", "U+00A0 is not a control");
}

Test(util, utf8_len_follows_rfc3629)
{
    cr_assert_eq(gt__utf8_len((const unsigned char *)"a", 1), 1);
    cr_assert_eq(gt__utf8_len((const unsigned char *)"\xc3\xa9", 2), 2);
    cr_assert_eq(gt__utf8_len((const unsigned char *)"\xc3\xa9", 1), 0);
    cr_assert_eq(gt__utf8_len((const unsigned char *)"\xe0\x80\x80", 3), 0);
    cr_assert_eq(gt__utf8_len((const unsigned char *)"\xf4\x90\x80\x80", 4), 0);
    cr_assert_eq(gt__utf8_len((const unsigned char *)"", 0), 0);
}

/* What gt__text_clean changes is exactly what gt__text_is_clean refuses. */
Test(util, text_is_clean_matches_text_clean)
{
    static const char *const cases[] = {
        "layers.0.fc1 (Linear) forward", "ok \xc3\xa9 \xe2\x82\xac", "",
        "a\x1b]0;t\x07b", "\x1b[2J", "c1 \xc2\x9b", "raw \x9b", "\xff\xfe",
        "nel \xc2\x85", "del \x7f", "nbsp \xc2\xa0", "cut \xe2\x82"};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char buf[64];
        snprintf(buf, sizeof(buf), "%s", cases[i]);
        gt__text_clean(buf);
        cr_assert_eq(gt__text_is_clean(cases[i]), strcmp(buf, cases[i]) == 0,
                     "case %zu", i);
        cr_assert(gt__text_is_clean(buf), "case %zu cleaned", i);
    }
}
