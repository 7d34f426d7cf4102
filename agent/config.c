/*
 * The agent and its environment (LTTng-UST's getenv.c is the model): one
 * table of every variable the agent reads, read once by the constructor
 * before any thread of ours exists, into the configuration this file
 * keeps (gt__agent_config). Nothing in the agent reads the environment
 * after that, and no other file reads it at all: the application's
 * setenv or putenv (Python's os.environ[...] = ...) may be reallocating
 * environ on another thread at any moment. The one exception is a fork
 * child, alone in its process, which reads the identity rows (RANK,
 * LOCAL_RANK, WORLD_SIZE) again: a launcher that forks its workers may
 * have set them for it. (XDG_RUNTIME_DIR, behind GRADTRACE_SOCKET's
 * default, is read by common/paths.c during the same constructor pass.)
 *
 * A bad value never stops the agent: the setting keeps its default, the
 * reason is kept for the trace's warnings (the constructor records them),
 * and a line goes to stderr only when GRADTRACE_LOG asks for diagnostics
 * (a training job's stderr is not ours to clutter). An empty value is the
 * same as none. Parsing takes the lookup function as a parameter so unit
 * tests feed it tables instead of mutating their own environment.
 *
 * The environment the agent writes is here too: the two injection
 * variables that make the CUDA driver and NVTX load this library
 * (gt__config_inject_self), set by the constructor, never overwritten.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/internal.h"
#include "common/paths.h"
#include "common/util.h"

/* Leading zeros are accepted in any number; gt__parse_u64 takes at most
 * 20 digits, so they go before it sees the number. */
static const char *skip_zeros(const char *s)
{
    while (s[0] == '0' && s[1] >= '0' && s[1] <= '9')
        s++;
    return s;
}

/* @return 0 and *out, or -EINVAL for anything but a decimal in [lo, hi]. */
static int number_u32(const char *s, uint32_t lo, uint32_t hi, uint32_t *out)
{
    uint64_t v;

    if (gt__parse_u64(skip_zeros(s), lo, hi, &v) < 0)
        return -EINVAL;
    *out = (uint32_t)v;
    return 0;
}

int32_t gt__config_id(const char *v)
{
    uint64_t n;
    int neg;

    if (!v)
        return -1;
    while (*v == ' ' || (*v >= '\t' && *v <= '\r'))
        v++;
    neg = *v == '-';
    if (*v == '+' || *v == '-')
        v++;
    /* "-0" is 0 to strtol; any other negative number is out of range. */
    if (gt__parse_u64(skip_zeros(v), 0, neg ? 0 : INT32_MAX, &n) < 0)
        return -1;
    return (int32_t)n;
}

/* @return 1, 0, or -EINVAL. */
static int bool_word(const char *s)
{
    static const char *const on[] = {"1", "on", "true", "yes"};
    static const char *const off[] = {"0", "off", "false", "no"};

    for (size_t i = 0; i < sizeof(on) / sizeof(on[0]); i++) {
        if (strcasecmp(s, on[i]) == 0)
            return 1;
        if (strcasecmp(s, off[i]) == 0)
            return 0;
    }
    return -EINVAL;
}

static void default_socket(struct gt__config *c)
{
    char dir[GT__PATH_MAX];

    c->socket_path[0] = '\0';
    if (gt__runtime_dir(dir, sizeof(dir)) == 0 &&
        strlen(dir) + sizeof("/agent.sock") <= sizeof(c->socket_path))
        snprintf(c->socket_path, sizeof(c->socket_path), "%s/agent.sock", dir);
}

/* One "nvtx[:DOMAIN[:GLOB]]" item of len n at s. @return 0 or -EINVAL. */
static int layers_nvtx(struct gt__layer_config *l, const char *s, size_t n,
                       const char **why)
{
    const char *dom, *glob = NULL, *end = s + n;
    size_t dn, gn = 0;

    if (l->sources & GT__LAYERS_NVTX) {
        *why = "nvtx given twice";
        return -EINVAL;
    }
    l->sources |= GT__LAYERS_NVTX;
    if (n == 4)
        return 0;
    dom = s + 5;
    glob = memchr(dom, ':', (size_t)(end - dom));
    dn = glob ? (size_t)(glob - dom) : (size_t)(end - dom);
    if (glob)
        gn = (size_t)(end - ++glob);
    if (dn >= sizeof(l->nvtx_domain) || gn >= sizeof(l->nvtx_glob)) {
        *why = "nvtx domain or name pattern too long";
        return -EINVAL;
    }
    if (!(dn == 1 && dom[0] == '*'))
        memcpy(l->nvtx_domain, dom, dn);
    if (gn)
        memcpy(l->nvtx_glob, glob, gn);
    return 0;
}

/* One "recordfunction[:GLOB]" item. @return 0 or -EINVAL. */
static int layers_rf(struct gt__layer_config *l, const char *s, size_t n,
                     const char **why)
{
    if (l->sources & GT__LAYERS_RECORDFN) {
        *why = "recordfunction given twice";
        return -EINVAL;
    }
    l->sources |= GT__LAYERS_RECORDFN;
    if (n <= 15)
        return 0;
    if (n - 15 >= sizeof(l->rf_glob)) {
        *why = "recordfunction name pattern too long";
        return -EINVAL;
    }
    memcpy(l->rf_glob, s + 15, n - 15);
    return 0;
}

int gt__config_layers(struct gt__layer_config *l, const char *v,
                      const char **why)
{
    const char *s = v, *e;
    int rc = 0;

    memset(l, 0, sizeof(*l));
    *why = NULL;
    while (rc == 0 && s) {
        size_t n;
        e = strchr(s, ',');
        n = e ? (size_t)(e - s) : strlen(s);
        if (n == 0) {
            *why = "an empty item";
            rc = -EINVAL;
        } else if ((n == 4 && !strncmp(s, "capi", 4)) ||
            (n == 6 && !strncmp(s, "python", 6)))
            l->sources |= GT__LAYERS_CAPI;
        else if ((n == 4 || (n > 4 && s[4] == ':')) && !strncmp(s, "nvtx", 4))
            rc = layers_nvtx(l, s, n, why);
        else if ((n == 14 || (n > 14 && s[14] == ':')) &&
                 !strncmp(s, "recordfunction", 14))
            rc = layers_rf(l, s, n, why);
        else {
            *why = "expected a comma list of capi, python, nvtx[:DOMAIN[:GLOB]], "
                   "recordfunction[:GLOB]";
            rc = -EINVAL;
        }
        s = e ? e + 1 : NULL;
    }
    if (rc == 0 && !l->sources) {
        *why = "no layer source named";
        rc = -EINVAL;
    }
    if (rc < 0) {
        memset(l, 0, sizeof(*l));
        l->sources = GT__LAYERS_CAPI;
    }
    return rc;
}

/* ------------------------------------------------------------ the table */

struct var;

/*
 * Parses val (not empty) into the row's field of c.
 * @return 0; -EINVAL with *why set (the value is quoted in the warning);
 * -ENAMETOOLONG with *why set (too long to quote).
 */
typedef int (*parse_fn)(struct gt__config *c, const struct var *v,
                        const char *val, const char **why);

struct var {
    const char *name;
    parse_fn parse;
    size_t off;          /* the field in struct gt__config */
    size_t size;         /* its size (text: the room, NUL included) */
    const char *why;     /* the reason a value is refused, when fixed */
    uint32_t lo, hi;     /* numbers: the range; text: hi bytes of the room
                          * kept free */
    int identity;        /* read again by a fork child (gt__config_reread_identity) */
};

static void *field(struct gt__config *c, const struct var *v)
{
    return (char *)c + v->off;
}

/* Any value but a false word turns diagnostics on: never refused. */
static int parse_log(struct gt__config *c, const struct var *v,
                     const char *val, const char **why)
{
    (void)why;
    *(int *)field(c, v) = bool_word(val) != 0;
    return 0;
}

static int parse_bool(struct gt__config *c, const struct var *v,
                      const char *val, const char **why)
{
    int b = bool_word(val);

    if (b < 0) {
        *why = "expected 1 or 0";
        return -EINVAL;
    }
    *(int *)field(c, v) = b;
    return 0;
}

static int parse_u32(struct gt__config *c, const struct var *v,
                     const char *val, const char **why)
{
    if (number_u32(val, v->lo, v->hi, field(c, v)) < 0) {
        *why = v->why;
        return -EINVAL;
    }
    return 0;
}

/* Text that must fit whole (the room less v->hi bytes kept free). */
static int parse_text(struct gt__config *c, const struct var *v,
                      const char *val, const char **why)
{
    size_t n = strlen(val);

    if (n + v->hi >= v->size) {
        *why = v->why ? v->why : "too long";
        return -ENAMETOOLONG;
    }
    memcpy(field(c, v), val, n + 1);
    return 0;
}

static int parse_clock(struct gt__config *c, const struct var *v,
                       const char *val, const char **why)
{
    (void)v;
    if (strcmp(val, "mono") && strcmp(val, "tsc")) {
        *why = "expected tsc or mono";
        return -EINVAL;
    }
    c->tsc = strcmp(val, "mono") != 0;
    return 0;
}

static int parse_layers(struct gt__config *c, const struct var *v,
                        const char *val, const char **why)
{
    (void)v;
    return gt__config_layers(&c->layers, val, why);
}

static int parse_id(struct gt__config *c, const struct var *v,
                    const char *val, const char **why)
{
    int32_t id = gt__config_id(val);

    if (id < 0) {
        *why = "expected a number in 0..2147483647";
        return -EINVAL;
    }
    *(int32_t *)field(c, v) = id;
    return 0;
}

#define FIELD(f) offsetof(struct gt__config, f), sizeof(((struct gt__config *)0)->f)

/*
 * Every variable the agent reads, in the order it reads them. README.md's
 * "Agent configuration" table documents the same names
 * (tests/unit/test_agent_config.c holds the two together).
 */
static const struct var vars[] = {
    /* First, so that the other rows can explain themselves. */
    {"GRADTRACE_LOG", parse_log, FIELD(log), NULL, 0, 0, 0},
    {"GRADTRACE_SOCKET", parse_text, FIELD(socket_path),
     "longer than a socket path can be", 0, 0, 0},
    /* Room for the ".<pid>" a fork child appends. */
    {"GRADTRACE_FILE", parse_text, FIELD(file_path), "path too long", 0, 16, 0},
    {"GRADTRACE_CAPTURE", parse_bool, FIELD(capture), NULL, 0, 0, 0},
    {"GRADTRACE_BUFFER_KB", parse_u32, FIELD(block_kb), "expected KiB in 4..8192",
     GT__CONFIG_BLOCK_KB_MIN, GT__CONFIG_BLOCK_KB_MAX, 0},
    {"GRADTRACE_CLOCK", parse_clock, FIELD(tsc), NULL, 0, 0, 0},
    {"GRADTRACE_BUFFER_BLOCKS", parse_u32, FIELD(blocks),
     "expected an integer in 2..4096", GT__CONFIG_BLOCKS_MIN,
     GT__CONFIG_BLOCKS_MAX, 0},
    {"GRADTRACE_LAYERS", parse_layers, FIELD(layers), NULL, 0, 0, 0},
    {"GRADTRACE_TORCH", parse_bool, FIELD(torch), NULL, 0, 0, 0},
    {"GRADTRACE_OPS", parse_bool, FIELD(ops), NULL, 0, 0, 0},
    {"GRADTRACE_CUDA", parse_bool, FIELD(cuda), NULL, 0, 0, 0},
    {"GRADTRACE_NVTX", parse_bool, FIELD(nvtx), NULL, 0, 0, 0},
    {"GRADTRACE_TRIGGER", parse_text, FIELD(trigger), NULL, 0, 0, 0},
    {"GRADTRACE_CUPTI", parse_text, FIELD(cupti_path), NULL, 0, 0, 0},
    {"CUDA_HOME", parse_text, FIELD(cuda_home), NULL, 0, 0, 0},
    {"RANK", parse_id, FIELD(rank), NULL, 0, 0, 1},
    {"LOCAL_RANK", parse_id, FIELD(local_rank), NULL, 0, 0, 1},
    {"WORLD_SIZE", parse_id, FIELD(world_size), NULL, 0, 0, 1},
};

#define NVARS (sizeof(vars) / sizeof(vars[0]))

_Static_assert(NVARS <= GT__CONFIG_BAD_MAX, "every row can be bad once");

const char *gt__config_var(size_t i)
{
    return i < NVARS ? vars[i].name : NULL;
}

/* What an empty environment gives. */
static void defaults(struct gt__config *c)
{
    memset(c, 0, sizeof(*c));
    c->capture = 1;
    c->block_kb = GT__CONFIG_BLOCK_KB_DEFAULT;
    c->blocks = GT__CONFIG_BLOCKS_DEFAULT;
    c->tsc = 1;
    c->layers.sources = GT__LAYERS_CAPI;
    c->torch = c->cuda = c->nvtx = 1;
    c->rank = c->local_rank = c->world_size = -1;
}

/* A refused value: said on stderr when GRADTRACE_LOG is on, and kept for
 * the trace's warnings (the job's stderr is not ours). */
static void bad(struct gt__config *c, const char *var, const char *val,
                const char *why)
{
    if (c->log)
        gt__diag("ignoring %s=\"%s\": %s; using the default", var, val, why);
    if (c->nbad < GT__CONFIG_BAD_MAX)
        snprintf(c->bad[c->nbad++], sizeof(c->bad[0]),
                 "%s=\"%.40s%s\" ignored: %s; the default is used", var, val,
                 strlen(val) > 40 ? "..." : "", why);
}

/* Reads row v through get. @return 1 when its value was refused. */
static int read_var(struct gt__config *c, const struct var *v, gt__config_lookup_fn get)
{
    const char *val = get(v->name), *why = NULL;
    int rc;

    if (!val || !*val)
        return 0;
    rc = v->parse(c, v, val, &why);
    if (rc == 0)
        return 0;
    bad(c, v->name, rc == -ENAMETOOLONG ? "..." : val, why);
    return 1;
}

int gt__config_parse(struct gt__config *c, gt__config_lookup_fn get)
{
    int nbad = 0;

    defaults(c);
    for (size_t i = 0; i < NVARS; i++)
        nbad += read_var(c, &vars[i], get);
    if (!c->socket_path[0])
        default_socket(c);
    return nbad;
}

static const char *process_getenv(const char *name)
{
    return getenv(name);
}

int gt__config_read(struct gt__config *c)
{
    return gt__config_parse(c, process_getenv);
}

/* ------------------------------------------------------------ the agent's */

/* Until gt__config_set, what an empty environment gives to the hooks:
 * hooks on, ranks unknown (tests that drive a hook without starting the
 * agent). */
static struct gt__config config = {
    .capture = 1, .torch = 1, .ops = 0, .cuda = 1, .nvtx = 1,
    .rank = -1, .local_rank = -1, .world_size = -1,
};

const struct gt__config *gt__agent_config(void)
{
    return &config;
}

void gt__config_set(const struct gt__config *c)
{
    config = *c;
}

void gt__config_reread_identity(void)
{
    for (size_t i = 0; i < NVARS; i++) {
        const struct var *v = &vars[i];
        const char *val, *why = NULL;

        if (!v->identity)
            continue;
        /* Unset or refused: unknown here, as the constructor reads it. */
        *(int32_t *)field(&config, v) = -1;
        val = process_getenv(v->name);
        if (val && *val && v->parse(&config, v, val, &why) < 0)
            GT__DIAG("ignoring %s=\"%s\" in the fork child: %s", v->name, val, why);
    }
}

/* The path this library was loaded from, for the injection variables. */
static int self_path(char *out, size_t cap)
{
    Dl_info info;
    if (!dladdr((void *)self_path, &info) || !info.dli_fname ||
        !*info.dli_fname)
        return -ENOENT;
    char real[PATH_MAX];
    if (!realpath(info.dli_fname, real))
        return -errno;
    if (strlen(real) >= cap)
        return -ENAMETOOLONG;
    strcpy(out, real);
    return 0;
}

int gt__config_inject_self(void)
{
    char self[GT__PATH_MAX];
    int rc = self_path(self, sizeof(self));

    if (rc < 0)
        return rc;
    if (setenv("CUDA_INJECTION64_PATH", self, 0) < 0)
        return -errno;
    if (config.nvtx && setenv("NVTX_INJECTION64_PATH", self, 0) < 0)
        return -errno;
    return 0;
}

int gt__config_file_path(const char *tmpl, int pid, int child, char *out,
                         size_t cap)
{
    size_t n = 0;
    int has_pid = 0;
    char num[16];
    int nl = snprintf(num, sizeof(num), "%d", pid);

    for (const char *p = tmpl; *p; p++) {
        const char *piece = p;
        size_t len = 1;

        if (p[0] == '%' && p[1] == 'p') {
            piece = num;
            len = (size_t)nl;
            has_pid = 1;
            p++;
        } else if (p[0] == '%' && p[1] == '%') {
            p++;
        }
        if (n + len >= cap)
            return -ENAMETOOLONG;
        memcpy(out + n, piece, len);
        n += len;
    }
    if (child && !has_pid) {
        if (n + 1 + (size_t)nl >= cap)
            return -ENAMETOOLONG;
        out[n++] = '.';
        memcpy(out + n, num, (size_t)nl);
        n += (size_t)nl;
    }
    out[n] = '\0';
    return 0;
}
