/*
 * Trigger specs: the one parser and formatter of the trigger syntax, used by
 * the CLI (gradtrace trigger / record --trigger), the daemon (validating
 * requests, sending canonical text to agents) and the agent (arming what
 * it receives). Plain C with no allocation, so the agent can link it.
 */
#include "common/trigspec.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/util.h"

static int layer_char_ok(unsigned char c)
{
    return c > 0x20 && c < 0x7f && c != ',' && c != '=';
}

int gt__trigger_set_layer(struct gt__trigger *t, const char *s, size_t len,
                     char *err, size_t cap)
{
    if (len == 0)
        return gt__fail(err, cap, -EINVAL, "layer: must not be empty");
    if (len > GT__LAYER_MAX)
        return gt__fail(err, cap, -EINVAL, "layer: longer than %d bytes", GT__LAYER_MAX);
    for (size_t i = 0; i < len; i++)
        if (!layer_char_ok((unsigned char)s[i]))
            return gt__fail(err, cap, -EINVAL,
                            "layer: invalid character at offset %zu (printable "
                            "ASCII without ',', '=' or spaces)", i);
    memcpy(t->layer, s, len);
    t->layer[len] = '\0';
    return 0;
}

int gt__trigger_set_phase(struct gt__trigger *t, const char *s, char *err,
                     size_t cap)
{
    if (strcmp(s, "forward") == 0)
        t->phase = GT__PHASE_FORWARD;
    else if (strcmp(s, "backward") == 0)
        t->phase = GT__PHASE_BACKWARD;
    else if (strcmp(s, "both") == 0)
        t->phase = GT__PHASE_BOTH;
    else
        return gt__fail(err, cap, -EINVAL, "phase: must be forward, backward or both");
    return 0;
}

void gt__trigger_defaults(struct gt__trigger *t)
{
    memset(t, 0, sizeof(*t));
    t->phase = GT__PHASE_BACKWARD;
    t->iteration = GT__ITER_NEXT;
    t->count = 1;
    t->pass = GT__PASS_ALL;
}

enum list_field { LIST_NONE, LIST_PIDS, LIST_RANKS };

static int add_list_item(struct gt__trigger *t, enum list_field lf,
                         const char *s, size_t len, char *err, size_t cap)
{
    uint64_t v;
    struct gt__sel *sel = &t->sel;

    if (lf == LIST_PIDS) {
        if (sel->npids == GT__SEL_MAX)
            return gt__fail(err, cap, -EINVAL, "pids: more than %d entries",
                            GT__SEL_MAX);
        if (gt__parse_u64n(s, len, 1, 4294967295u, &v) < 0)
            return gt__fail(err, cap, -EINVAL, "pids: \"%.*s\" is not a pid",
                            (int)len, s);
        sel->pids[sel->npids++] = (uint32_t)v;
    } else {
        if (sel->nranks == GT__SEL_MAX)
            return gt__fail(err, cap, -EINVAL, "ranks: more than %d entries",
                            GT__SEL_MAX);
        if (gt__parse_u64n(s, len, 0, 2147483647u, &v) < 0)
            return gt__fail(err, cap, -EINVAL,
                            "ranks: \"%.*s\" is not a rank (integer >= 0)",
                            (int)len, s);
        sel->ranks[sel->nranks++] = (int32_t)v;
    }
    return 0;
}

static int spec_field(struct gt__trigger *t, const char *key, size_t klen,
                      const char *val, size_t vlen, enum list_field *lf,
                      char *err, size_t cap)
{
    char buf[32];
    uint64_t v;

    *lf = LIST_NONE;
#define KEY(s) (klen == sizeof(s) - 1 && memcmp(key, s, klen) == 0)
    if (KEY("layer"))
        return gt__trigger_set_layer(t, val, vlen, err, cap);
    if (KEY("phase")) {
        snprintf(buf, sizeof(buf), "%.*s", (int)(vlen < 31 ? vlen : 31), val);
        return vlen > 31 ? gt__fail(err, cap, -EINVAL,
                                    "phase: must be forward, backward or both")
                         : gt__trigger_set_phase(t, buf, err, cap);
    }
    if (KEY("iteration")) {
        if (vlen == 4 && memcmp(val, "next", 4) == 0)
            t->iteration = GT__ITER_NEXT;
        else if (gt__parse_u64n(val, vlen, 0, 9007199254740991ull, &v) == 0)
            t->iteration = (int64_t)v;
        else
            return gt__fail(err, cap, -EINVAL,
                            "iteration: \"%.*s\" is not an integer >= 0 or next",
                            (int)(vlen > 40 ? 40 : vlen), val);
        return 0;
    }
    if (KEY("count")) {
        if (gt__parse_u64n(val, vlen, 1, 1000000, &v) < 0)
            return gt__fail(err, cap, -EINVAL,
                            "count: \"%.*s\" is not an integer from 1 to 1000000",
                            (int)(vlen > 40 ? 40 : vlen), val);
        t->count = (uint32_t)v;
        return 0;
    }
    if (KEY("pass")) {
        if (gt__parse_u64n(val, vlen, 0, GT__PASS_MAX, &v) < 0)
            return gt__fail(err, cap, -EINVAL,
                            "pass: \"%.*s\" is not an integer from 0 to %d",
                            (int)(vlen > 40 ? 40 : vlen), val, GT__PASS_MAX);
        t->pass = (int32_t)v;
        return 0;
    }
    if (KEY("ops")) {
        if (vlen != 1 || (val[0] != '0' && val[0] != '1'))
            return gt__fail(err, cap, -EINVAL, "ops: \"%.*s\" is not 0 or 1",
                            (int)(vlen > 40 ? 40 : vlen), val);
        t->ops = val[0] == '1';
        return 0;
    }
    if (KEY("ranks") || KEY("pids")) {
        *lf = KEY("ranks") ? LIST_RANKS : LIST_PIDS;
        return add_list_item(t, *lf, val, vlen, err, cap);
    }
#undef KEY
    return gt__fail(err, cap, -EINVAL, "unknown field \"%.*s\" (layer, phase, iteration, "
                    "count, pass, ops, ranks, pids)", (int)(klen > 40 ? 40 : klen), key);
}

int gt__trigger_parse_spec(const char *spec, struct gt__trigger *t, char *err,
                           size_t cap)
{
    enum list_field lf = LIST_NONE;
    const char *p = spec;
    int rc;

    gt__trigger_defaults(t);
    err[0] = '\0';
    /* Fields are comma-separated key=value pairs; a bare value continues
     * the list field before it, which is how "ranks=0,3" reads. */
    for (;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', len);

        if (len == 0)
            return gt__fail(err, cap, -EINVAL, "empty field in trigger spec");
        if (eq) {
            rc = spec_field(t, p, (size_t)(eq - p), eq + 1,
                            len - (size_t)(eq - p) - 1, &lf, err, cap);
        } else if (lf != LIST_NONE) {
            rc = add_list_item(t, lf, p, len, err, cap);
        } else {
            rc = gt__fail(err, cap, -EINVAL, "field \"%.*s\" is not key=value",
                          (int)(len > 40 ? 40 : len), p);
        }
        if (rc < 0)
            return rc;
        if (!end)
            break;
        p = end + 1;
    }
    if (t->layer[0] == '\0')
        return gt__fail(err, cap, -EINVAL, "layer: missing (layer=NAME is required)");
    return 0;
}

const char *gt__phase_name(enum gt__phase p)
{
    switch (p) {
    case GT__PHASE_FORWARD: return "forward";
    case GT__PHASE_BOTH: return "both";
    default: return "backward";
    }
}

int gt__trigger_format(const struct gt__trigger *t, char *out, size_t cap)
{
    size_t n = 0;
    int w;

#define PUT(...)                                                   \
    do {                                                           \
        w = snprintf(out + n, cap - n, __VA_ARGS__);               \
        if (w < 0 || (size_t)w >= cap - n)                         \
            return -ENOSPC;                                        \
        n += (size_t)w;                                            \
    } while (0)

    if (cap == 0)
        return -ENOSPC;
    PUT("layer=%s,phase=%s,iteration=", t->layer, gt__phase_name(t->phase));
    if (t->iteration == GT__ITER_NEXT)
        PUT("next");
    else
        PUT("%lld", (long long)t->iteration);
    PUT(",count=%u", (unsigned)t->count);
    if (t->pass != GT__PASS_ALL)
        PUT(",pass=%d", (int)t->pass);
    if (t->ops)
        PUT(",ops=1");
    for (size_t i = 0; i < t->sel.npids; i++)
        PUT("%s%u", i ? "," : ",pids=", (unsigned)t->sel.pids[i]);
    for (size_t i = 0; i < t->sel.nranks; i++)
        PUT("%s%d", i ? "," : ",ranks=", (int)t->sel.ranks[i]);
#undef PUT
    return (int)n;
}

