/*
 * The control protocol's requests and the trigger spec (schema/control.md).
 *
 * Pure functions: text or cJSON in, validated structs out, and a message
 * naming the bad field when the input is wrong. The daemon's dispatcher,
 * the CLI and the unit tests all use them, so what the CLI accepts and
 * what the daemon accepts cannot drift apart.
 *
 * Strictness is deliberate: unknown members, wrong types, fractional or
 * out-of-range numbers and over-long strings are errors, never coerced.
 * A request that a typo changed ("rank" for "ranks") would otherwise act
 * on every agent instead of one.
 */
#include "daemon/control/control.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

/* An integral JSON number in [lo, hi]. */
static int json_int(const cJSON *v, double lo, double hi, int64_t *out)
{
    double d;

    if (!cJSON_IsNumber(v))
        return -EINVAL;
    d = v->valuedouble;
    if (!isfinite(d) || d != floor(d) || d < lo || d > hi)
        return -EINVAL;
    *out = (int64_t)d;
    return 0;
}

static int parse_id_list(const cJSON *arr, const char *name, int is_pid,
                         struct gt__sel *sel, char *err, size_t cap)
{
    const cJSON *v;
    size_t n = 0;

    if (!cJSON_IsArray(arr))
        return gt__fail(err, cap, -EINVAL, "\"%s\" must be an array of integers", name);
    cJSON_ArrayForEach(v, arr) {
        int64_t x;

        if (n == GT__SEL_MAX)
            return gt__fail(err, cap, -EINVAL, "\"%s\" has more than %d entries", name,
                            GT__SEL_MAX);
        if (json_int(v, is_pid ? 1 : 0, is_pid ? 4294967295.0 : 2147483647.0,
                     &x) < 0)
            return gt__fail(err, cap, -EINVAL, "\"%s\" entries must be integers %s", name,
                            is_pid ? ">= 1" : ">= 0");
        if (is_pid)
            sel->pids[n++] = (uint32_t)x;
        else
            sel->ranks[n++] = (int32_t)x;
    }
    if (is_pid)
        sel->npids = n;
    else
        sel->nranks = n;
    return 0;
}

static int known_member(const char *name, const char *const *allowed)
{
    for (; *allowed; allowed++)
        if (strcmp(name, *allowed) == 0)
            return 1;
    return 0;
}

static int check_members(const cJSON *obj, const char *const *allowed,
                         const char *cmd, char *err, size_t cap)
{
    const cJSON *m;

    cJSON_ArrayForEach(m, obj) {
        if (!m->string)
            return gt__fail(err, cap, -EINVAL, "request members must be named");
        if (!known_member(m->string, allowed))
            return gt__fail(err, cap, -EINVAL, "unknown member \"%.64s\" for \"%s\"",
                            m->string, cmd);
    }
    return 0;
}

static int parse_sel(const cJSON *obj, struct gt__sel *sel, char *err,
                     size_t cap)
{
    const cJSON *v;
    int rc;

    sel->npids = sel->nranks = 0;
    v = cJSON_GetObjectItemCaseSensitive(obj, "pids");
    if (v && (rc = parse_id_list(v, "pids", 1, sel, err, cap)) < 0)
        return rc;
    v = cJSON_GetObjectItemCaseSensitive(obj, "ranks");
    if (v && (rc = parse_id_list(v, "ranks", 0, sel, err, cap)) < 0)
        return rc;
    return 0;
}

int gt__trigger_from_json(const struct cJSON *obj, struct gt__trigger *t,
                          char *err, size_t cap)
{
    const cJSON *v;
    int64_t x;
    int rc;

    gt__trigger_defaults(t);
    v = cJSON_GetObjectItemCaseSensitive(obj, "layer");
    if (!v)
        return gt__fail(err, cap, -EINVAL, "layer: missing");
    if (!cJSON_IsString(v))
        return gt__fail(err, cap, -EINVAL, "layer: must be a string");
    if ((rc = gt__trigger_set_layer(t, v->valuestring, strlen(v->valuestring), err, cap)) < 0)
        return rc;

    v = cJSON_GetObjectItemCaseSensitive(obj, "phase");
    if (v) {
        if (!cJSON_IsString(v))
            return gt__fail(err, cap, -EINVAL, "phase: must be a string");
        if ((rc = gt__trigger_set_phase(t, v->valuestring, err, cap)) < 0)
            return rc;
    }
    v = cJSON_GetObjectItemCaseSensitive(obj, "iteration");
    if (v) {
        if (cJSON_IsString(v) && strcmp(v->valuestring, "next") == 0)
            t->iteration = GT__ITER_NEXT;
        else if (json_int(v, 0, 9007199254740991.0, &x) == 0)
            t->iteration = x;
        else
            return gt__fail(err, cap, -EINVAL,
                            "iteration: must be an integer >= 0 or \"next\"");
    }
    v = cJSON_GetObjectItemCaseSensitive(obj, "count");
    if (v) {
        if (json_int(v, 1, 1000000, &x) < 0)
            return gt__fail(err, cap, -EINVAL,
                            "count: must be an integer from 1 to 1000000");
        t->count = (uint32_t)x;
    }
    v = cJSON_GetObjectItemCaseSensitive(obj, "pass");
    if (v) {
        if (json_int(v, 0, GT__PASS_MAX, &x) < 0)
            return gt__fail(err, cap, -EINVAL,
                            "pass: must be an integer from 0 to %d", GT__PASS_MAX);
        t->pass = (int32_t)x;
    }
    v = cJSON_GetObjectItemCaseSensitive(obj, "ops");
    if (v) {
        if (cJSON_IsBool(v))
            t->ops = cJSON_IsTrue(v);
        else if (json_int(v, 0, 1, &x) == 0)
            t->ops = (int)x;
        else
            return gt__fail(err, cap, -EINVAL, "ops: must be true, false, 0 or 1");
    }
    return parse_sel(obj, &t->sel, err, cap);
}

static const char *const status_members[] = {"cmd", "id", NULL};
static const char *const startstop_members[] = {
    "cmd", "id", "pids", "ranks", "duration_ms", "iterations", NULL};
static const char *const stop_members[] = {"cmd", "id", "pids", "ranks", NULL};
static const char *const trigger_members[] = {
    "cmd", "id", "layer", "phase", "iteration", "count", "pass", "ops", "pids",
    "ranks", NULL};
static const char *const collect_members[] = {"cmd", "id", "pid", "since_ns",
                                               NULL};

static int parse_start(const cJSON *obj, struct gt__req *req, char *err,
                       size_t cap)
{
    const cJSON *v;
    int64_t x;

    v = cJSON_GetObjectItemCaseSensitive(obj, "duration_ms");
    if (v) {
        if (json_int(v, 1, 86400000.0 * 365, &x) < 0)
            return gt__fail(err, cap, -EINVAL, "duration_ms: must be an integer >= 1");
        req->duration_ms = (uint64_t)x;
    }
    v = cJSON_GetObjectItemCaseSensitive(obj, "iterations");
    if (v) {
        if (json_int(v, 1, 9007199254740991.0, &x) < 0)
            return gt__fail(err, cap, -EINVAL, "iterations: must be an integer >= 1");
        req->iterations = (uint64_t)x;
    }
    if (req->duration_ms && req->iterations)
        return gt__fail(err, cap, -EINVAL, "give duration_ms or iterations, not both");
    return parse_sel(obj, &req->sel, err, cap);
}

static int parse_fields(const cJSON *obj, const char *cmd, struct gt__req *req,
                        char *err, size_t cap)
{
    int rc;

    if (strcmp(cmd, "status") == 0 || strcmp(cmd, "shutdown") == 0) {
        req->cmd = strcmp(cmd, "status") == 0 ? GT__CMD_STATUS : GT__CMD_SHUTDOWN;
        return check_members(obj, status_members, cmd, err, cap);
    }
    if (strcmp(cmd, "start") == 0) {
        req->cmd = GT__CMD_START;
        if ((rc = check_members(obj, startstop_members, cmd, err, cap)) < 0)
            return rc;
        return parse_start(obj, req, err, cap);
    }
    if (strcmp(cmd, "trigger_clear") == 0) {
        req->cmd = GT__CMD_TRIGGER_CLEAR;
        return check_members(obj, status_members, cmd, err, cap);
    }
    if (strcmp(cmd, "stop") == 0) {
        req->cmd = GT__CMD_STOP;
        if ((rc = check_members(obj, stop_members, cmd, err, cap)) < 0)
            return rc;
        return parse_sel(obj, &req->sel, err, cap);
    }
    if (strcmp(cmd, "trigger") == 0 || strcmp(cmd, "job_trigger") == 0) {
        req->cmd = cmd[0] == 't' ? GT__CMD_TRIGGER : GT__CMD_JOB_TRIGGER;
        if ((rc = check_members(obj, trigger_members, cmd, err, cap)) < 0)
            return rc;
        return gt__trigger_from_json(obj, &req->trig, err, cap);
    }
    if (strcmp(cmd, "collect") == 0) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, "pid");
        int64_t x;

        req->cmd = GT__CMD_COLLECT;
        if ((rc = check_members(obj, collect_members, cmd, err, cap)) < 0)
            return rc;
        if (!v || json_int(v, 1, 4294967295.0, &x) < 0)
            return gt__fail(err, cap, -EINVAL, "pid: must be an integer >= 1");
        req->pid = (uint32_t)x;
        v = cJSON_GetObjectItemCaseSensitive(obj, "since_ns");
        if (v) {
            if (json_int(v, 0, 9e18, &x) < 0)
                return gt__fail(err, cap, -EINVAL, "since_ns: must be an integer >= 0");
            req->since_ns = (uint64_t)x;
        }
        return 0;
    }
    return gt__fail(err, cap, -EINVAL, "unknown command \"%.64s\"", cmd);
}

/* Whether the JSON text holds the escape \u0000 (outside an escaped
 * backslash): cJSON would end the string there, so "status\u0000x" would
 * read as "status". Backslashes occur only inside strings. */
static int has_escaped_nul(const char *s, size_t len)
{
    for (size_t i = 0; i + 1 < len; i++) {
        if (s[i] != '\\')
            continue;
        if (s[i + 1] == 'u' && len - i >= 6 && memcmp(s + i + 2, "0000", 4) == 0)
            return 1;
        i++; /* the escaped character, a backslash included */
    }
    return 0;
}

int gt__req_parse(const char *line, size_t len, struct gt__req *req, char *err,
                  size_t errcap)
{
    cJSON *obj;
    const cJSON *cmd;
    const char *end = NULL;
    int rc;

    memset(req, 0, sizeof(*req));
    err[0] = '\0';
    if (len > GT__CTL_REQ_MAX) {
        return gt__fail(err, errcap, -EMSGSIZE, "request larger than %u bytes",
                        GT__CTL_REQ_MAX);
    }
    if (memchr(line, '\0', len))
        return gt__fail(err, errcap, -EINVAL, "request contains a NUL byte");
    if (has_escaped_nul(line, len))
        return gt__fail(err, errcap, -EINVAL, "request contains an escaped NUL "
                        "(\\u0000)");
    obj = cJSON_ParseWithLengthOpts(line, len, &end, 0);
    if (!obj)
        return gt__fail(err, errcap, -EINVAL, "request is not valid JSON");
    /* cJSON stops after the first value; anything but blanks after it
     * means two requests on one line or garbage. */
    for (; end < line + len; end++) {
        if (*end != ' ' && *end != '\t' && *end != '\r') {
            rc = gt__fail(err, errcap, -EINVAL,
                          "request is not valid JSON (text after the object)");
            goto out_free_obj;
        }
    }
    if (!cJSON_IsObject(obj)) {
        rc = gt__fail(err, errcap, -EINVAL, "request must be a JSON object");
        goto out_free_obj;
    }
    cmd = cJSON_GetObjectItemCaseSensitive(obj, "cmd");
    if (!cJSON_IsString(cmd)) {
        rc = gt__fail(err, errcap, -EINVAL, "\"cmd\" must be a string");
        goto out_free_obj;
    }
    rc = parse_fields(obj, cmd->valuestring, req, err, errcap);
out_free_obj:
    cJSON_Delete(obj);
    return rc;
}

void gt__json_clean_strings(cJSON *o)
{
    for (; o; o = o->next) {
        if (o->string)
            gt__text_clean(o->string);
        if (cJSON_IsString(o) && o->valuestring)
            gt__text_clean(o->valuestring);
        gt__json_clean_strings(o->child);
    }
}

/* ----------------------------------------------------------- CLI specs */

struct cJSON *gt__trigger_to_json(const struct gt__trigger *t)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *pids, *ranks;
    int ok;

    if (!o)
        return NULL;
    ok = cJSON_AddStringToObject(o, "cmd", "trigger") &&
         cJSON_AddStringToObject(o, "layer", t->layer) &&
         cJSON_AddStringToObject(o, "phase", gt__phase_name(t->phase)) &&
         (t->iteration == GT__ITER_NEXT
              ? cJSON_AddStringToObject(o, "iteration", "next") != NULL
              : cJSON_AddNumberToObject(o, "iteration", (double)t->iteration) != NULL) &&
         cJSON_AddNumberToObject(o, "count", t->count);
    if (ok && t->pass != GT__PASS_ALL)
        ok = cJSON_AddNumberToObject(o, "pass", t->pass) != NULL;
    if (ok && t->ops)
        ok = cJSON_AddBoolToObject(o, "ops", 1) != NULL;
    if (ok && t->sel.npids) {
        ok = (pids = cJSON_AddArrayToObject(o, "pids")) != NULL;
        for (size_t i = 0; ok && i < t->sel.npids; i++)
            ok = cJSON_AddItemToArray(pids, cJSON_CreateNumber(t->sel.pids[i]));
    }
    if (ok && t->sel.nranks) {
        ok = (ranks = cJSON_AddArrayToObject(o, "ranks")) != NULL;
        for (size_t i = 0; ok && i < t->sel.nranks; i++)
            ok = cJSON_AddItemToArray(ranks, cJSON_CreateNumber(t->sel.ranks[i]));
    }
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

int gt__sel_match(const struct gt__sel *s, uint32_t pid, int32_t rank)
{
    int pid_ok = s->npids == 0, rank_ok = s->nranks == 0;

    for (size_t i = 0; i < s->npids && !pid_ok; i++)
        pid_ok = s->pids[i] == pid;
    for (size_t i = 0; i < s->nranks && !rank_ok; i++)
        rank_ok = s->ranks[i] == rank;
    /* Both lists given: an agent must satisfy both. */
    return pid_ok && rank_ok;
}

int gt__sel_match_later(const struct gt__sel *s, uint32_t pid, int32_t rank)
{
    struct gt__sel pids_only;

    if (rank >= 0 || s->nranks == 0)
        return gt__sel_match(s, pid, rank);
    memcpy(pids_only.pids, s->pids, s->npids * sizeof(s->pids[0]));
    pids_only.npids = s->npids;
    pids_only.nranks = 0;
    return gt__sel_match(&pids_only, pid, rank);
}
