/*
 * Agent configuration (agent/config.c): defaults, valid settings, bad
 * values falling back to defaults with a one-line reason on stderr only
 * when GRADTRACE_LOG is set, GRADTRACE_FILE's %p expansion, and the
 * table of variables held to README.md's "Agent configuration" table.
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "agent/internal.h"
#include "tests/unit/stderr_fixture.h"

static const char *const *env_table;

static const char *fake_getenv(const char *name)
{
    for (const char *const *e = env_table; e && e[0]; e += 2)
        if (!strcmp(e[0], name))
            return e[1];
    return NULL;
}

static int parse(struct gt__config *c, const char *const *table)
{
    env_table = table;
    return gt__config_parse(c, fake_getenv);
}


Test(agent_config, defaults)
{
    struct gt__config c;
    static const char *const none[] = {NULL};

    cr_assert_eq(parse(&c, none), 0);
    cr_assert_eq(c.capture, 1);
    cr_assert_eq(c.block_kb, GT__CONFIG_BLOCK_KB_DEFAULT);
    cr_assert_eq(c.blocks, GT__CONFIG_BLOCKS_DEFAULT);
    cr_assert_eq(c.log, 0);
    cr_assert_str_empty(c.file_path);
    cr_assert(strstr(c.socket_path, "/agent.sock"), "default socket: %s", c.socket_path);
}

Test(agent_config, valid_values)
{
    struct gt__config c;
    static const char *const env[] = {
        "GRADTRACE_SOCKET", "/tmp/x/agent.sock", "GRADTRACE_FILE", "/tmp/t.%p.gtr",
        "GRADTRACE_CAPTURE", "0", "GRADTRACE_BUFFER_KB", "64",
        "GRADTRACE_BUFFER_BLOCKS", "3", "GRADTRACE_LOG", "1", NULL};

    cr_assert_eq(parse(&c, env), 0);
    cr_assert_str_eq(c.socket_path, "/tmp/x/agent.sock");
    cr_assert_str_eq(c.file_path, "/tmp/t.%p.gtr");
    cr_assert_eq(c.capture, 0);
    cr_assert_eq(c.block_kb, 64);
    cr_assert_eq(c.blocks, 3);
    cr_assert_eq(c.log, 1);
}

static const char *const bad_env_quiet[] = {
    "GRADTRACE_CAPTURE", "maybe", "GRADTRACE_BUFFER_KB", "12x",
    "GRADTRACE_BUFFER_BLOCKS", "1", NULL};

Test(agent_config, bad_values_fall_back_silently, .init = cr_redirect_stderr)
{
    struct gt__config c;
    char err[1024];

    cr_assert_eq(parse(&c, bad_env_quiet), 3);
    cr_assert_eq(c.capture, 1);
    cr_assert_eq(c.block_kb, GT__CONFIG_BLOCK_KB_DEFAULT);
    cr_assert_eq(c.blocks, GT__CONFIG_BLOCKS_DEFAULT);
    cr_assert_eq(read_stderr(err, sizeof(err)), 0, "stderr must stay clean: %s", err);
}

Test(agent_config, bad_values_explained_with_log, .init = cr_redirect_stderr)
{
    struct gt__config c;
    char err[2048];
    static const char *const env[] = {
        "GRADTRACE_LOG", "1", "GRADTRACE_CAPTURE", "maybe",
        "GRADTRACE_BUFFER_KB", "99999999", "GRADTRACE_BUFFER_BLOCKS", "-4", NULL};
    int lines = 0;

    cr_assert_eq(parse(&c, env), 3);
    cr_assert_eq(c.block_kb, GT__CONFIG_BLOCK_KB_DEFAULT);
    read_stderr(err, sizeof(err));
    for (char *p = err; (p = strchr(p, '\n')); p++)
        lines++;
    cr_assert_eq(lines, 3, "one line per bad value:\n%s", err);
    cr_assert(strstr(err, "GRADTRACE_CAPTURE=\"maybe\""), "%s", err);
    cr_assert(strstr(err, "GRADTRACE_BUFFER_KB=\"99999999\""), "%s", err);
    cr_assert(strstr(err, "GRADTRACE_BUFFER_BLOCKS=\"-4\""), "%s", err);
}

Test(agent_config, out_of_range_numbers)
{
    struct gt__config c;
    static const char *const low[] = {"GRADTRACE_BUFFER_KB", "3", NULL};
    static const char *const high[] = {"GRADTRACE_BUFFER_BLOCKS", "4097", NULL};
    static const char *const empty[] = {"GRADTRACE_BUFFER_KB", "", NULL};

    cr_assert_eq(parse(&c, low), 1);
    cr_assert_eq(parse(&c, high), 1);
    cr_assert_eq(parse(&c, empty), 0, "empty means unset");
}

Test(agent_config, socket_path_too_long)
{
    struct gt__config c;
    char longp[200];
    const char *env[] = {"GRADTRACE_SOCKET", longp, NULL};

    memset(longp, 'a', sizeof(longp) - 1);
    longp[sizeof(longp) - 1] = '\0';
    cr_assert_eq(parse(&c, env), 1);
    cr_assert(strstr(c.socket_path, "/agent.sock"), "fell back to the default");
}

Test(agent_config, file_path_expansion)
{
    char out[256];

    cr_assert_eq(gt__config_file_path("/tmp/run.%p.gtr", 42, 0, out, sizeof(out)), 0);
    cr_assert_str_eq(out, "/tmp/run.42.gtr");
    cr_assert_eq(gt__config_file_path("/tmp/run.%p.gtr", 43, 1, out, sizeof(out)), 0);
    cr_assert_str_eq(out, "/tmp/run.43.gtr", "a %p child needs no suffix");
    cr_assert_eq(gt__config_file_path("/tmp/run.gtr", 44, 0, out, sizeof(out)), 0);
    cr_assert_str_eq(out, "/tmp/run.gtr");
    cr_assert_eq(gt__config_file_path("/tmp/run.gtr", 45, 1, out, sizeof(out)), 0);
    cr_assert_str_eq(out, "/tmp/run.gtr.45", "a child without %p gets .<pid>");
    cr_assert_eq(gt__config_file_path("/tmp/100%%-%p", 7, 0, out, sizeof(out)), 0);
    cr_assert_str_eq(out, "/tmp/100%-7");
    cr_assert_eq(gt__config_file_path("/tmp/%p%p", 123456, 0, out, 10), -ENAMETOOLONG);
}

Test(agent_config, numbers_with_leading_zeros)
{
    struct gt__config c;
    static const char *const env[] = {"GRADTRACE_BUFFER_KB",
                                      "0000000000000000000000064", NULL};

    cr_assert_eq(parse(&c, env), 0, "leading zeros are a valid number");
    cr_assert_eq(c.block_kb, 64);
}

Test(agent_config, identity_numbers_read_like_strtol)
{
    /* What the rank, local rank and world size were read with before
     * (strtol over the whole string, then [0, INT32_MAX]). */
    cr_assert_eq(gt__config_id("3"), 3);
    cr_assert_eq(gt__config_id(" \t7"), 7);
    cr_assert_eq(gt__config_id("+2"), 2);
    cr_assert_eq(gt__config_id("-0"), 0);
    cr_assert_eq(gt__config_id("0000000000000000000000042"), 42);
    cr_assert_eq(gt__config_id("2147483647"), 2147483647);
    cr_assert_eq(gt__config_id(NULL), -1);
    cr_assert_eq(gt__config_id(""), -1);
    cr_assert_eq(gt__config_id("  "), -1);
    cr_assert_eq(gt__config_id("-1"), -1);
    cr_assert_eq(gt__config_id("3x"), -1);
    cr_assert_eq(gt__config_id("3 "), -1);
    cr_assert_eq(gt__config_id("+-3"), -1);
    cr_assert_eq(gt__config_id("2147483648"), -1);
    cr_assert_eq(gt__config_id("99999999999999999999999"), -1);
}

Test(agent_config, layers_default_is_capi)
{
    struct gt__config c;
    static const char *const none[] = {NULL};

    cr_assert_eq(parse(&c, none), 0);
    cr_assert_eq(c.layers.sources, GT__LAYERS_CAPI);
}

Test(agent_config, layers_sources)
{
    struct gt__layer_config l;
    const char *why;

    cr_assert_eq(gt__config_layers(&l, "nvtx", &why), 0);
    cr_assert_eq(l.sources, GT__LAYERS_NVTX);
    cr_assert_str_empty(l.nvtx_domain);
    cr_assert_str_empty(l.nvtx_glob);

    cr_assert_eq(gt__config_layers(&l, "python,nvtx:train", &why), 0);
    cr_assert_eq(l.sources, GT__LAYERS_CAPI | GT__LAYERS_NVTX);
    cr_assert_str_eq(l.nvtx_domain, "train");
    cr_assert_str_empty(l.nvtx_glob);

    cr_assert_eq(gt__config_layers(&l, "nvtx::blocks.*", &why), 0);
    cr_assert_str_empty(l.nvtx_domain);
    cr_assert_str_eq(l.nvtx_glob, "blocks.*");

    cr_assert_eq(gt__config_layers(&l, "nvtx:*:block.[0-3],capi", &why), 0);
    cr_assert_eq(l.sources, GT__LAYERS_CAPI | GT__LAYERS_NVTX);
    cr_assert_str_empty(l.nvtx_domain);
    cr_assert_str_eq(l.nvtx_glob, "block.[0-3]");

    cr_assert_eq(gt__config_layers(&l, "nvtx:-", &why), 0);
    cr_assert_str_eq(l.nvtx_domain, "-");

    cr_assert_eq(gt__config_layers(&l, "recordfunction", &why), 0);
    cr_assert_eq(l.sources, GT__LAYERS_RECORDFN);
    cr_assert_str_empty(l.rf_glob);
    cr_assert_eq(gt__config_layers(&l, "capi,recordfunction:blocks.?", &why), 0);
    cr_assert_eq(l.sources, GT__LAYERS_CAPI | GT__LAYERS_RECORDFN);
    cr_assert_str_eq(l.rf_glob, "blocks.?");
}

Test(agent_config, layers_bad_values_keep_capi)
{
    static const char *const bad_values[] = {
        "nvtxx", "cuda", "nvtx,nvtx", ",", "recordfunctions", "capi,",
        "recordfunction,recordfunction",
    };
    struct gt__layer_config l;
    const char *why;

    for (size_t i = 0; i < sizeof(bad_values) / sizeof(bad_values[0]); i++) {
        why = NULL;
        cr_assert_eq(gt__config_layers(&l, bad_values[i], &why), -EINVAL,
                     "%s accepted", bad_values[i]);
        cr_assert_not_null(why, "%s: no reason", bad_values[i]);
        cr_assert_eq(l.sources, GT__LAYERS_CAPI, "%s", bad_values[i]);
    }
}

Test(agent_config, layers_bad_value_is_explained, .init = cr_redirect_stderr)
{
    struct gt__config c;
    static const char *const env[] = {
        "GRADTRACE_LOG", "1", "GRADTRACE_LAYERS", "nvtx,python,cuda", NULL,
    };
    char err[1024];

    cr_assert_eq(parse(&c, env), 1);
    cr_assert_eq(c.layers.sources, GT__LAYERS_CAPI);
    read_stderr(err, sizeof(err));
    cr_assert(strstr(err, "GRADTRACE_LAYERS") && strstr(err, "recordfunction[:GLOB]"),
              "stderr: %s", err);
}

/* Everything the agent takes from the environment is in the table that the
 * constructor fills once (no getenv after threads start). */
Test(agent_config, identity_switches_and_paths)
{
    struct gt__config c;
    static const char *const none[] = {NULL};
    static const char *const env[] = {
        "RANK", "3", "LOCAL_RANK", "1", "WORLD_SIZE", "8",
        "GRADTRACE_TORCH", "0", "GRADTRACE_OPS", "on", "GRADTRACE_CUDA", "no",
        "GRADTRACE_NVTX", "false", "GRADTRACE_TRIGGER", "layer=a;layer=b",
        "GRADTRACE_CUPTI", "/opt/cupti.so", "CUDA_HOME", "/opt/cuda", NULL};

    cr_assert_eq(parse(&c, none), 0);
    cr_assert(c.torch && c.cuda && c.nvtx);
    cr_assert_eq(c.ops, 0, "operators are opt-in");
    cr_assert_eq(c.rank, -1);
    cr_assert_eq(c.local_rank, -1);
    cr_assert_eq(c.world_size, -1);
    cr_assert_str_empty(c.trigger);
    cr_assert_str_empty(c.cupti_path);
    cr_assert_str_empty(c.cuda_home);

    cr_assert_eq(parse(&c, env), 0);
    cr_assert_eq(c.rank, 3);
    cr_assert_eq(c.local_rank, 1);
    cr_assert_eq(c.world_size, 8);
    cr_assert(!c.torch && !c.cuda && !c.nvtx);
    cr_assert_eq(c.ops, 1);
    cr_assert_str_eq(c.trigger, "layer=a;layer=b");
    cr_assert_str_eq(c.cupti_path, "/opt/cupti.so");
    cr_assert_str_eq(c.cuda_home, "/opt/cuda");
}

Test(agent_config, bad_switch_keeps_hook_on, .init = cr_redirect_stderr)
{
    struct gt__config c;
    static const char *const env[] = {"GRADTRACE_LOG", "1", "GRADTRACE_TORCH", "maybe",
                                      NULL};

    cr_assert_eq(parse(&c, env), 1);
    cr_assert_eq(c.torch, 1);
    /* Kept for the trace's warnings, whatever GRADTRACE_LOG says. */
    cr_assert_eq(c.nbad, 1);
    cr_assert_str_eq(c.bad[0], "GRADTRACE_TORCH=\"maybe\" ignored: expected 1 or 0; "
                               "the default is used");
}

Test(agent_config, trigger_too_long_is_refused)
{
    struct gt__config c;
    static char big[GT__CONFIG_TRIGGER_MAX + 8];
    const char *env[] = {"GRADTRACE_TRIGGER", big, NULL};

    memset(big, 'a', sizeof(big) - 1);
    cr_assert_eq(parse(&c, env), 1);
    cr_assert_str_empty(c.trigger);
}

Test(agent_config, bad_identity_is_said)
{
    struct gt__config c;
    static const char *const env[] = {"RANK", "three", "LOCAL_RANK", "-2",
                                      "WORLD_SIZE", "", NULL};

    cr_assert_eq(parse(&c, env), 2, "RANK and LOCAL_RANK refused, empty is unset");
    cr_assert_eq(c.rank, -1);
    cr_assert_eq(c.local_rank, -1);
    cr_assert_eq(c.world_size, -1);
    cr_assert_eq(c.nbad, 2);
    cr_assert(strstr(c.bad[0], "RANK=\"three\" ignored: expected a number"), "%s",
              c.bad[0]);
}

Test(agent_config, every_variable_bad_at_once_is_kept, .init = cr_redirect_stderr)
{
    static char vals[GT__CONFIG_BAD_MAX][2][64];
    const char *env[2 * GT__CONFIG_BAD_MAX + 1];
    struct gt__config c;
    char err[256];
    size_t n = 0;
    int nbad;

    /* A value no row takes: no number, no word. Rows whose every value is
     * valid (the texts that fit) are not counted; GRADTRACE_LOG stays
     * off, as the job's stderr would. */
    for (size_t i = 0; gt__config_var(i) != NULL; i++) {
        if (!strcmp(gt__config_var(i), "GRADTRACE_LOG"))
            continue;
        cr_assert_lt(n, GT__CONFIG_BAD_MAX);
        snprintf(vals[n][0], sizeof(vals[n][0]), "%s", gt__config_var(i));
        snprintf(vals[n][1], sizeof(vals[n][1]), "x%0*d", 60, 0);
        env[2 * n] = vals[n][0];
        env[2 * n + 1] = vals[n][1];
        n++;
    }
    env[2 * n] = NULL;
    nbad = parse(&c, env);
    cr_assert_gt(nbad, 10, "%d", nbad);
    cr_assert_eq(c.nbad, nbad, "every refusal kept for the trace");
    cr_assert_eq(read_stderr(err, sizeof(err)), 0, "stderr must stay clean: %s", err);
}

/*
 * The variables of README.md's "Agent configuration" table, from its first
 * column (`NAME`, possibly several per row), into names[]. @return count.
 */
static size_t readme_vars(char names[][64], size_t cap)
{
    FILE *f = fopen("README.md", "r");
    char line[8192];
    int in = 0;
    size_t n = 0;

    cr_assert_not_null(f, "run from the repository root: README.md");
    while (fgets(line, sizeof(line), f)) {
        if (!strncmp(line, "## ", 3)) {
            in = !strcmp(line, "## Agent configuration\n");
            continue;
        }
        if (!in || line[0] != '|' || line[1] != ' ' || line[2] != '`')
            continue;
        char *end = strchr(line + 1, '|');
        cr_assert_not_null(end, "%s", line);
        *end = '\0';
        for (char *p = line + 1; (p = strchr(p, '`')) != NULL;) {
            char *q = strchr(p + 1, '`');
            cr_assert_not_null(q, "%s", line);
            cr_assert_lt(n, cap);
            cr_assert_lt((size_t)(q - p - 1), (size_t)64);
            memcpy(names[n], p + 1, (size_t)(q - p - 1));
            names[n++][q - p - 1] = '\0';
            p = q + 1;
        }
    }
    fclose(f);
    return n;
}

Test(agent_config, readme_documents_every_variable_read)
{
    /* Documented in the table for the CLI, which reads it; not the agent. */
    static const char *const not_read[] = {"GRADTRACE_CONTROL"};
    char names[64][64];
    size_t n = readme_vars(names, 64), nvars = 0;

    cr_assert_gt(n, 10, "README.md's agent table not found");
    for (const char *v; (v = gt__config_var(nvars)) != NULL; nvars++) {
        int found = 0;
        for (size_t i = 0; i < n; i++)
            found |= !strcmp(names[i], v);
        cr_assert(found, "%s is read by the agent but has no row in README.md's "
                         "\"Agent configuration\"", v);
    }
    for (size_t i = 0; i < n; i++) {
        int found = 0;
        for (size_t k = 0; gt__config_var(k); k++)
            found |= !strcmp(names[i], gt__config_var(k));
        for (size_t k = 0; k < sizeof(not_read) / sizeof(not_read[0]); k++)
            found |= !strcmp(names[i], not_read[k]);
        cr_assert(found, "README.md documents %s, which agent/config.c does not read",
                  names[i]);
    }
}
