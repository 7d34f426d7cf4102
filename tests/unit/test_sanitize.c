/*
 * File names from untrusted agent text: whatever the hello says, the stem
 * stays one safe, non-empty, bounded name inside the output directory.
 */
#include <errno.h>
#include <criterion/criterion.h>
#include <string.h>

#include "daemon/convert/names.h"

/* Every property the daemon relies on, checked for any output. */
static void assert_safe(const char *s)
{
    size_t n = strlen(s);

    cr_assert(n > 0, "empty name");
    cr_assert(n <= GT__NAME_PART_MAX, "name too long: %zu", n);
    cr_assert_neq(s[0], '.', "hidden or dot name: %s", s);
    cr_assert_null(strstr(s, ".."), "'..' in %s", s);
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        cr_assert((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                      (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-',
                  "bad byte 0x%02x in %s", (unsigned char)c, s);
    }
}

Test(sanitize, keeps_safe_names_unchanged)
{
    char out[128];
    size_t n = gt__sanitize_part("train_small-v2.1", 16, out, sizeof(out));

    cr_assert_eq(n, 16);
    cr_assert_str_eq(out, "train_small-v2.1");
}

Test(sanitize, neutralises_parent_directory)
{
    char out[128];

    gt__sanitize_part("../../etc/passwd", 16, out, sizeof(out));
    assert_safe(out);
    cr_assert_null(strchr(out, '/'));
    gt__sanitize_part("..", 2, out, sizeof(out));
    assert_safe(out);
    cr_assert_str_neq(out, "..");
    gt__sanitize_part(".", 1, out, sizeof(out));
    cr_assert_str_neq(out, ".");
    assert_safe(out);
    gt__sanitize_part("a/../b", 6, out, sizeof(out));
    assert_safe(out);
}

Test(sanitize, replaces_slashes_and_control_bytes)
{
    char out[128];

    gt__sanitize_part("/abs/path\n\t\x1b[31m", 16, out, sizeof(out));
    assert_safe(out);
    cr_assert_str_eq(out, "_abs_path____31m");
}

Test(sanitize, embedded_nul_does_not_truncate_or_pass)
{
    char out[128];
    size_t n = gt__sanitize_part("ab\0../x", 7, out, sizeof(out));

    cr_assert_eq(n, 7, "the NUL is replaced, not a terminator (got %zu)", n);
    assert_safe(out);
    cr_assert_eq(strncmp(out, "ab_", 3), 0);
}

Test(sanitize, empty_becomes_unknown)
{
    char out[16];

    gt__sanitize_part("", 0, out, sizeof(out));
    cr_assert_str_eq(out, "unknown");
}

Test(sanitize, long_names_are_capped)
{
    char in[5000], out[256], small[10];

    memset(in, 'x', sizeof(in));
    cr_assert_eq(gt__sanitize_part(in, sizeof(in), out, sizeof(out)),
                 GT__NAME_PART_MAX);
    assert_safe(out);
    /* A smaller buffer caps harder and still terminates. */
    cr_assert_eq(gt__sanitize_part(in, sizeof(in), small, sizeof(small)), 9);
    cr_assert_eq(small[9], '\0');
}

Test(sanitize, non_ascii_utf8_is_replaced)
{
    char out[64];

    gt__sanitize_part("tr\xc3\xa4in", 6, out, sizeof(out));
    assert_safe(out);
    cr_assert_str_eq(out, "tr__in");
}

Test(sanitize, command_name_uses_script_for_python)
{
    char out[80];

    gt__command_name("/usr/bin/python3 examples/train_small.py --lr 3", out,
                     sizeof(out));
    cr_assert_str_eq(out, "train_small");
    gt__command_name("python3.11 -m torch.distributed.run x", out, sizeof(out));
    cr_assert_str_eq(out, "x");
    gt__command_name("python3 -c pass", out, sizeof(out));
    cr_assert_str_eq(out, "python3-c");
    cr_assert(gt__command_is_code("python3 -u -c pass"));
    cr_assert(gt__command_is_code("/usr/bin/python -c 'from multiprocessing.spawn import spawn_main' --multiprocessing-fork"));
    cr_assert_not(gt__command_is_code("python3 train.py -c 3"), "the script's own -c");
    cr_assert_not(gt__command_is_code("./prog -c"));
    gt__command_name("/opt/bin/agent_threads 8", out, sizeof(out));
    cr_assert_str_eq(out, "agent_threads");
    gt__command_name("", out, sizeof(out));
    cr_assert_str_eq(out, "unknown");
}

Test(sanitize, command_name_skips_interpreter_flags)
{
    static const char *const cases[][2] = {
        {"python -u train.py", "train"},
        {"python3 -u -O -B train.py --lr 3", "train"},
        {"python3 -uB train.py", "train"},
        {"python3 -X dev -W ignore train.py", "train"},
        {"python3 -Xdev -Wignore::UserWarning /a/b/train.py", "train"},
        {"python3 -u -m pkg.train --x", "pkg.train"},
        {"python3 -mpkg.train", "pkg.train"},
        {"python3 -u -c pass", "python3-c"},
        {"python3 -", "python3"},
        {"python3 --version", "python3"},
        {"python3 -W", "python3"},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char out[80];

        gt__command_name(cases[i][0], out, sizeof(out));
        cr_assert_str_eq(out, cases[i][1], "%s", cases[i][0]);
    }
}

Test(sanitize, command_name_of_launcher_is_training_script)
{
    static const char *const cases[][2] = {
        {"/usr/bin/python3 -u -m torch.distributed.run --nproc_per_node 2 "
         "--standalone train.py --epochs 1", "train"},
        {"python3 -m torch.distributed.run --nproc-per-node=2 /w/ddp.py", "ddp"},
        {"python3 -m torch.distributed.launch --use_env t.py", "t"},
        {"/venv/bin/torchrun --nnodes 1 --nproc_per_node 4 train.py", "train"},
        {"torchrun --standalone -m pkg.train", "pkg.train"},
        {"torchrun --nproc_per_node", "torchrun"},
        {"python3 -m torch.distributed.run", "torch.distributed.run"},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char out[80];

        gt__command_name(cases[i][0], out, sizeof(out));
        cr_assert_str_eq(out, cases[i][1], "%s", cases[i][0]);
    }
}

Test(sanitize, hostile_command_line_gives_safe_stem)
{
    char out[128];
    int n = gt__agent_stem("/tmp/../../../root/.ssh/x\x01 --x", 3, 77, out,
                           sizeof(out));

    cr_assert_gt(n, 0);
    cr_assert_null(strchr(out, '/'));
    cr_assert_null(strstr(out, ".."));
    cr_assert_str_eq(out, "x_-rank3-pid77");
    n = gt__agent_stem("../..", -1, 5, out, sizeof(out));
    cr_assert_gt(n, 0);
    cr_assert_neq(out[0], '.');
    cr_assert_null(strstr(out, ".."));
}

Test(sanitize, stem_without_rank_uses_pid_only)
{
    char out[128];

    cr_assert_gt(gt__agent_stem("./prog a b", -1, 1234, out, sizeof(out)), 0);
    cr_assert_str_eq(out, "prog-pid1234");
    cr_assert_eq(gt__agent_stem("prog", -1, 1234, out, 8), -ENAMETOOLONG);
}

/* A name starting with '-' reads as an option to the tools users run on
 * it (rm, cp, ls): it never starts a stem. */
Test(sanitize, leading_dash_neutralised)
{
    char out[128];

    gt__sanitize_part("-rf", 3, out, sizeof(out));
    cr_assert_str_eq(out, "_rf");
    gt__command_name("--help x", out, sizeof(out));
    cr_assert_neq(out[0], '-', "%s", out);
    gt__sanitize_part("a-b", 3, out, sizeof(out));
    cr_assert_str_eq(out, "a-b", "an inner dash stays");
}
