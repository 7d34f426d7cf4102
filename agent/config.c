/*
 * Agent configuration from the environment, read once by the constructor
 * before any thread of ours exists (getenv is not thread-safe against
 * setenv). Parsing takes the lookup function as a parameter so unit tests
 * feed it tables instead of mutating their own environment.
 *
 * A bad value never stops the agent: the setting keeps its default, and a
 * one-line reason goes to stderr only when GRADTRACE_LOG asks for
 * diagnostics (a training job's stderr is not ours to clutter).
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/internal.h"
#include "common/paths.h"
#include "common/util.h"

static int bad(struct gt__config *c, const char *var, const char *val,
               const char *why)
{
    if (c->log)
        gt__diag("ignoring %s=\"%s\": %s; using the default", var, val, why);
    /* Kept for the trace (gt__config_warn): the job's stderr is not ours. */
    if (c->nbad < GT__CONFIG_BAD_MAX)
        snprintf(c->bad[c->nbad++], sizeof(c->bad[0]),
                 "%s=\"%.40s%s\" ignored: %s; the default is used", var, val,
                 strlen(val) > 40 ? "..." : "", why);
    return 1;
}

/* Leading zeros are accepted in any number; gt__parse_u64 takes at most
 * 20 digits, so they go before it sees the number. */
static const char *skip_zeros(const char *s)
{
    while (s[0] == '0' && s[1] >= '0' && s[1] <= '9')
        s++;
    return s;
}

/* @return 0 and *out, or -EINVAL for anything but a decimal in [lo, hi]. */
static int parse_u32(const char *s, uint32_t lo, uint32_t hi, uint32_t *out)
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
static int parse_bool(const char *s)
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

/* The switches: their default unless the variable says otherwise.
 * Operators are opt-in (their capture costs libtorch a RecordFunction per
 * operator); the hooks are on by default. @return bad values. */
static int parse_switches(struct gt__config *c, gt__getenv_fn get)
{
    static const struct {
        const char *var;
        size_t off;
        int dflt;
    } sw[] = {
        {"GRADTRACE_TORCH", offsetof(struct gt__config, torch), 1},
        {"GRADTRACE_OPS", offsetof(struct gt__config, ops), 0},
        {"GRADTRACE_CUDA", offsetof(struct gt__config, cuda), 1},
        {"GRADTRACE_NVTX", offsetof(struct gt__config, nvtx), 1},
    };
    int nbad = 0;

    for (size_t i = 0; i < sizeof(sw) / sizeof(sw[0]); i++) {
        const char *v = get(sw[i].var);
        int *dst = (int *)(void *)((char *)c + sw[i].off);
        int b = v && *v ? parse_bool(v) : sw[i].dflt;

        if (b < 0) {
            nbad += bad(c, sw[i].var, v, "expected 1 or 0");
            b = sw[i].dflt;
        }
        *dst = b;
    }
    return nbad;
}

/* Copies a text variable that must fit dst whole. @return 1 when too long. */
static int copy_text(struct gt__config *c, gt__getenv_fn get,
                     const char *var, char *dst, size_t cap)
{
    const char *v = get(var);

    dst[0] = '\0';
    if (!v || !*v)
        return 0;
    if (strlen(v) >= cap)
        return bad(c, var, "...", "too long");
    memcpy(dst, v, strlen(v) + 1);
    return 0;
}

int gt__config_parse(struct gt__config *c, gt__getenv_fn get)
{
    const char *why;
    const char *v;
    int nbad = 0, b;

    memset(c, 0, sizeof(*c));
    c->capture = 1;
    c->block_kb = GT__CONFIG_BLOCK_KB_DEFAULT;
    c->blocks = GT__CONFIG_BLOCKS_DEFAULT;
    c->tsc = 1;
    c->layers.sources = GT__LAYERS_CAPI;

    /* First, so that the other settings can explain themselves. Any value
     * but empty or a false word turns diagnostics on. */
    v = get("GRADTRACE_LOG");
    c->log = v && *v && parse_bool(v) != 0;

    v = get("GRADTRACE_SOCKET");
    if (v && *v && strlen(v) < sizeof(c->socket_path))
        snprintf(c->socket_path, sizeof(c->socket_path), "%s", v);
    else {
        if (v && *v)
            nbad += bad(c, "GRADTRACE_SOCKET", v, "longer than a socket path can be");
        default_socket(c);
    }

    v = get("GRADTRACE_FILE");
    if (v && *v) {
        if (strlen(v) < sizeof(c->file_path) - 16)
            snprintf(c->file_path, sizeof(c->file_path), "%s", v);
        else
            nbad += bad(c, "GRADTRACE_FILE", "...", "path too long");
    }

    v = get("GRADTRACE_CAPTURE");
    if (v && *v) {
        b = parse_bool(v);
        if (b < 0)
            nbad += bad(c, "GRADTRACE_CAPTURE", v, "expected 1 or 0");
        else
            c->capture = b;
    }

    v = get("GRADTRACE_BUFFER_KB");
    if (v && *v && parse_u32(v, GT__CONFIG_BLOCK_KB_MIN, GT__CONFIG_BLOCK_KB_MAX,
                             &c->block_kb) < 0)
        nbad += bad(c, "GRADTRACE_BUFFER_KB", v, "expected KiB in 4..8192");

    v = get("GRADTRACE_CLOCK");
    if (v && *v) {
        if (!strcmp(v, "mono"))
            c->tsc = 0;
        else if (strcmp(v, "tsc"))
            nbad += bad(c, "GRADTRACE_CLOCK", v, "expected tsc or mono");
    }

    v = get("GRADTRACE_BUFFER_BLOCKS");
    if (v && *v && parse_u32(v, GT__CONFIG_BLOCKS_MIN, GT__CONFIG_BLOCKS_MAX,
                             &c->blocks) < 0)
        nbad += bad(c, "GRADTRACE_BUFFER_BLOCKS", v, "expected an integer in 2..4096");

    v = get("GRADTRACE_LAYERS");
    if (v && *v && gt__config_layers(&c->layers, v, &why) < 0)
        nbad += bad(c, "GRADTRACE_LAYERS", v, why);
    nbad += parse_switches(c, get);
    nbad += copy_text(c, get, "GRADTRACE_TRIGGER", c->trigger, sizeof(c->trigger));
    nbad += copy_text(c, get, "GRADTRACE_CUPTI", c->cupti_path, sizeof(c->cupti_path));
    nbad += copy_text(c, get, "CUDA_HOME", c->cuda_home, sizeof(c->cuda_home));
    gt__config_identity(c, get);
    return nbad;
}

const char *gt__config_getenv(const char *name)
{
    return getenv(name);
}

void gt__config_identity(struct gt__config *c, gt__getenv_fn get)
{
    c->rank = gt__config_id(get("RANK"));
    c->local_rank = gt__config_id(get("LOCAL_RANK"));
    c->world_size = gt__config_id(get("WORLD_SIZE"));
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
