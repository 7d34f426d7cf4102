/*
 * Control protocol requests and trigger specs: what is accepted, what is
 * refused, and that every refusal names the offending field.
 */
#include <stdio.h>
#include <criterion/criterion.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/control/control.h"

static struct gt__req req;
static char err[256];

static int parse(const char *s)
{
    return gt__req_parse(s, strlen(s), &req, err, sizeof(err));
}

/* Refused with a message that contains want. */
static void refused(const char *s, const char *want)
{
    int rc = parse(s);

    cr_assert_lt(rc, 0, "accepted: %s", s);
    cr_assert_not_null(strstr(err, want), "for %s: error '%s' lacks '%s'", s,
                       err, want);
}

Test(control, status_and_shutdown)
{
    cr_assert_eq(parse("{\"cmd\":\"status\"}"), 0, "%s", err);
    cr_assert_eq(req.cmd, GT__CMD_STATUS);
    cr_assert_eq(parse(" {\"cmd\":\"shutdown\",\"id\":7} "), 0, "%s", err);
    cr_assert_eq(req.cmd, GT__CMD_SHUTDOWN);
}

Test(control, start_with_selection_and_duration)
{
    cr_assert_eq(parse("{\"cmd\":\"start\",\"pids\":[12,34],\"ranks\":[0],"
                       "\"duration_ms\":1500}"), 0, "%s", err);
    cr_assert_eq(req.cmd, GT__CMD_START);
    cr_assert_eq(req.sel.npids, 2);
    cr_assert_eq(req.sel.pids[1], 34);
    cr_assert_eq(req.sel.nranks, 1);
    cr_assert_eq(req.sel.ranks[0], 0);
    cr_assert_eq(req.duration_ms, 1500);
    cr_assert_eq(parse("{\"cmd\":\"stop\"}"), 0, "%s", err);
    cr_assert_eq(req.cmd, GT__CMD_STOP);
    cr_assert_eq(req.sel.npids + req.sel.nranks, 0);
}

Test(control, malformed_json)
{
    refused("", "not valid JSON");
    refused("{\"cmd\":\"status\"", "not valid JSON");
    refused("{cmd:status}", "not valid JSON");
    refused("[\"status\"]", "must be a JSON object");
    refused("\"status\"", "must be a JSON object");
    refused("{\"cmd\":\"status\"} garbage", "text after the object");
    refused("{\"cmd\":\"status\"}{\"cmd\":\"status\"}", "text after the object");
}

Test(control, nul_inside_request)
{
    static const char line[] = "{\"cmd\":\"st\0atus\"}";

    cr_assert_lt(gt__req_parse(line, sizeof(line) - 1, &req, err, sizeof(err)), 0);
    cr_assert_not_null(strstr(err, "NUL"), "%s", err);
}

Test(control, oversized_request)
{
    size_t n = GT__CTL_REQ_MAX + 10;
    char *big = malloc(n + 1);

    memset(big, ' ', n);
    memcpy(big, "{\"cmd\":\"status\"}", 16);
    big[n] = '\0';
    cr_assert_eq(gt__req_parse(big, n, &req, err, sizeof(err)), -EMSGSIZE);
    cr_assert_not_null(strstr(err, "larger than"), "%s", err);
    free(big);
}

Test(control, wrong_types)
{
    refused("{\"cmd\":5}", "\"cmd\" must be a string");
    refused("{}", "\"cmd\" must be a string");
    refused("{\"cmd\":\"start\",\"pids\":\"12\"}", "\"pids\" must be an array");
    refused("{\"cmd\":\"start\",\"pids\":[1.5]}", "\"pids\" entries");
    refused("{\"cmd\":\"start\",\"pids\":[0]}", "\"pids\" entries");
    refused("{\"cmd\":\"start\",\"ranks\":[-1]}", "\"ranks\" entries");
    refused("{\"cmd\":\"start\",\"ranks\":[\"0\"]}", "\"ranks\" entries");
    refused("{\"cmd\":\"start\",\"duration_ms\":-5}", "duration_ms");
    refused("{\"cmd\":\"start\",\"duration_ms\":1e300}", "duration_ms");
    refused("{\"cmd\":\"start\",\"iterations\":true}", "iterations");
    refused("{\"cmd\":\"start\",\"iterations\":2,\"duration_ms\":3}", "not both");
    refused("{\"cmd\":\"collect\"}", "pid");
    refused("{\"cmd\":\"collect\",\"pid\":\"1\"}", "pid");
}

Test(control, unknown_command_and_member)
{
    refused("{\"cmd\":\"reboot\"}", "unknown command \"reboot\"");
    refused("{\"cmd\":\"stop\",\"rank\":[1]}", "unknown member \"rank\"");
    refused("{\"cmd\":\"status\",\"verbose\":true}", "unknown member \"verbose\"");
}

Test(control, too_many_pids)
{
    char buf[8192];
    size_t n = (size_t)snprintf(buf, sizeof(buf), "{\"cmd\":\"stop\",\"pids\":[");

    for (int i = 1; i <= GT__SEL_MAX + 1; i++)
        n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s%d", i > 1 ? "," : "", i);
    snprintf(buf + n, sizeof(buf) - n, "]}");
    refused(buf, "more than");
}

Test(control, trigger_request_validated)
{
    cr_assert_eq(parse("{\"cmd\":\"trigger\",\"layer\":\"layers.1?.mlp\","
                       "\"phase\":\"forward\",\"iteration\":200,\"count\":3,"
                       "\"ranks\":[0,3]}"), 0, "%s", err);
    cr_assert_eq(req.cmd, GT__CMD_TRIGGER);
    cr_assert_str_eq(req.trig.layer, "layers.1?.mlp");
    cr_assert_eq(req.trig.phase, GT__PHASE_FORWARD);
    cr_assert_eq(req.trig.iteration, 200);
    cr_assert_eq(req.trig.count, 3);
    cr_assert_eq(req.trig.sel.nranks, 2);

    cr_assert_eq(parse("{\"cmd\":\"trigger\",\"layer\":\"fc\"}"), 0, "%s", err);
    cr_assert_eq(req.trig.phase, GT__PHASE_BACKWARD, "default phase");
    cr_assert_eq(req.trig.iteration, GT__ITER_NEXT, "default iteration");
    cr_assert_eq(req.trig.count, 1, "default count");

    refused("{\"cmd\":\"trigger\"}", "layer: missing");
    refused("{\"cmd\":\"trigger\",\"layer\":3}", "layer: must be a string");
    refused("{\"cmd\":\"trigger\",\"layer\":\"\"}", "layer: must not be empty");
    refused("{\"cmd\":\"trigger\",\"layer\":\"a b\"}", "layer: invalid character");
    refused("{\"cmd\":\"trigger\",\"layer\":\"a,b\"}", "layer: invalid character");
    refused("{\"cmd\":\"trigger\",\"layer\":\"x\",\"phase\":\"sideways\"}", "phase");
    refused("{\"cmd\":\"trigger\",\"layer\":\"x\",\"iteration\":-1}", "iteration");
    refused("{\"cmd\":\"trigger\",\"layer\":\"x\",\"iteration\":\"later\"}", "iteration");
    refused("{\"cmd\":\"trigger\",\"layer\":\"x\",\"count\":0}", "count");
    refused("{\"cmd\":\"trigger\",\"layer\":\"x\",\"count\":2.5}", "count");
    refused("{\"cmd\":\"trigger\",\"layer\":\"x\",\"ranks\":{}}", "ranks");
    refused("{\"cmd\":\"trigger\",\"layer\":\"x\",\"phse\":\"forward\"}", "unknown member \"phse\"");
}

Test(control, trigger_layer_length_limit)
{
    char buf[GT__LAYER_MAX + 100];
    char line[GT__LAYER_MAX + 200];

    memset(buf, 'a', GT__LAYER_MAX + 1);
    buf[GT__LAYER_MAX + 1] = '\0';
    snprintf(line, sizeof(line), "{\"cmd\":\"trigger\",\"layer\":\"%s\"}", buf);
    refused(line, "longer than");
    buf[GT__LAYER_MAX] = '\0';
    snprintf(line, sizeof(line), "{\"cmd\":\"trigger\",\"layer\":\"%s\"}", buf);
    cr_assert_eq(parse(line), 0, "%s", err);
}

static struct gt__trigger trig;

static int spec(const char *s)
{
    return gt__trigger_parse_spec(s, &trig, err, sizeof(err));
}

static void spec_refused(const char *s, const char *want)
{
    cr_assert_lt(spec(s), 0, "accepted: %s", s);
    cr_assert_not_null(strstr(err, want), "for %s: '%s' lacks '%s'", s, err, want);
}

Test(control, trigger_spec_full)
{
    char text[512];

    cr_assert_eq(spec("layer=layers.17,phase=both,iteration=200,count=2,ranks=0,3"),
                 0, "%s", err);
    cr_assert_str_eq(trig.layer, "layers.17");
    cr_assert_eq(trig.phase, GT__PHASE_BOTH);
    cr_assert_eq(trig.iteration, 200);
    cr_assert_eq(trig.count, 2);
    cr_assert_eq(trig.sel.nranks, 2);
    cr_assert_eq(trig.sel.ranks[1], 3);
    cr_assert_gt(gt__trigger_format(&trig, text, sizeof(text)), 0);
    cr_assert_str_eq(text, "layer=layers.17,phase=both,iteration=200,count=2,ranks=0,3");
}

Test(control, trigger_spec_defaults_and_canonical_order)
{
    char text[512];

    cr_assert_eq(spec("ranks=1,layer=fc1"), 0, "%s", err);
    cr_assert_gt(gt__trigger_format(&trig, text, sizeof(text)), 0);
    cr_assert_str_eq(text, "layer=fc1,phase=backward,iteration=next,count=1,ranks=1");
    cr_assert_eq(gt__trigger_format(&trig, text, 10), -ENOSPC);
}

Test(control, trigger_spec_pass_selector)
{
    char text[512], err2[256];
    struct gt__trigger back;
    cJSON *o;

    cr_assert_eq(spec("layer=fc1,iteration=4,pass=2,ranks=1"), 0, "%s", err);
    cr_assert_eq(trig.pass, 2);
    cr_assert_gt(gt__trigger_format(&trig, text, sizeof(text)), 0);
    cr_assert_str_eq(text, "layer=fc1,phase=backward,iteration=4,count=1,pass=2,ranks=1");
    o = gt__trigger_to_json(&trig);
    cr_assert_eq(gt__trigger_from_json(o, &back, err2, sizeof(err2)), 0, "%s", err2);
    cr_assert_eq(back.pass, 2);
    cJSON_Delete(o);
    cr_assert_eq(spec("layer=fc1"), 0, "%s", err);
    cr_assert_eq(trig.pass, GT__PASS_ALL, "default: every pass of the step");
    spec_refused("layer=x,pass=-1", "pass");
    spec_refused("layer=x,pass=next", "pass");
}

/* ops=1: a window that records aten operators too; off by default, kept
 * through the canonical text and the JSON form, refused when not 0 or 1. */
Test(control, trigger_spec_ops_field)
{
    char text[512], err2[256];
    struct gt__trigger back;
    cJSON *o;

    cr_assert_eq(spec("layer=fc1"), 0, "%s", err);
    cr_assert_eq(trig.ops, 0, "operators are opt-in");
    cr_assert_eq(spec("layer=fc1,ops=1,ranks=1"), 0, "%s", err);
    cr_assert_eq(trig.ops, 1);
    cr_assert_gt(gt__trigger_format(&trig, text, sizeof(text)), 0);
    cr_assert_str_eq(text, "layer=fc1,phase=backward,iteration=next,count=1,ops=1,ranks=1");
    o = gt__trigger_to_json(&trig);
    cr_assert_eq(gt__trigger_from_json(o, &back, err2, sizeof(err2)), 0, "%s", err2);
    cr_assert_eq(back.ops, 1);
    cJSON_Delete(o);
    cr_assert_eq(spec("layer=fc1,ops=0"), 0, "%s", err);
    cr_assert_eq(trig.ops, 0);
    spec_refused("layer=x,ops=2", "ops");
    spec_refused("layer=x,ops=yes", "ops");
}

Test(control, trigger_spec_round_trips_through_json)
{
    char err2[256];
    struct gt__trigger back;
    cJSON *o;

    cr_assert_eq(spec("layer=a.*,phase=forward,iteration=next,pids=10,11"), 0, "%s", err);
    o = gt__trigger_to_json(&trig);
    cr_assert_not_null(o);
    cr_assert_eq(gt__trigger_from_json(o, &back, err2, sizeof(err2)), 0, "%s", err2);
    cr_assert_str_eq(back.layer, "a.*");
    cr_assert_eq(back.phase, GT__PHASE_FORWARD);
    cr_assert_eq(back.iteration, GT__ITER_NEXT);
    cr_assert_eq(back.sel.npids, 2);
    cr_assert_eq(back.sel.pids[1], 11);
    cJSON_Delete(o);
}

Test(control, trigger_spec_errors_name_the_field)
{
    spec_refused("", "empty field");
    spec_refused("phase=forward", "layer: missing");
    spec_refused("layer=", "layer: must not be empty");
    spec_refused("layer=x,phase=upward", "phase");
    spec_refused("layer=x,iteration=-3", "iteration");
    spec_refused("layer=x,iteration=12x", "iteration");
    spec_refused("layer=x,count=0", "count");
    spec_refused("layer=x,count=99999999999", "count");
    spec_refused("layer=x,ranks=a", "ranks");
    spec_refused("layer=x,ranks=1,,2", "empty field");
    spec_refused("layer=x,pids=0", "pids");
    spec_refused("layer=x,colour=red", "unknown field \"colour\"");
    spec_refused("layer=x,17", "not key=value");
    spec_refused("layer=x,count=2,3", "not key=value");
}

Test(control, selection_matching)
{
    struct gt__sel s = {0};

    cr_assert(gt__sel_match(&s, 5, -1), "empty selection selects all");
    s.ranks[0] = 3;
    s.nranks = 1;
    cr_assert(gt__sel_match(&s, 5, 3));
    cr_assert_not(gt__sel_match(&s, 5, 2));
    cr_assert_not(gt__sel_match(&s, 5, -1));
    s.pids[0] = 9;
    s.npids = 1;
    cr_assert_not(gt__sel_match(&s, 5, 3), "both lists: both must match");
    cr_assert(gt__sel_match(&s, 9, 3));
    /* An agent whose rank is not known yet may still be ranks=3. */
    cr_assert(gt__sel_match_later(&s, 9, -1));
    cr_assert_not(gt__sel_match_later(&s, 5, -1), "its pid still has to match");
    cr_assert_not(gt__sel_match_later(&s, 9, 2), "a known rank decides");
}

/* cJSON ends a string at an escaped NUL: "status\u0000x" would read as
 * "status". A request with an escaped NUL anywhere is refused. */
Test(control, escaped_nul_refused)
{
    refused("{\"cmd\":\"status\\u0000\"}", "NUL");
    refused("{\"cmd\":\"status\\u0000x\"}", "NUL");
    refused("{\"cmd\":\"status\",\"id\\u0000\":1}", "NUL");
    cr_assert_eq(parse("{\"cmd\":\"status\",\"id\":\"a\\\\u0000\"}"), 0,
                 "an escaped backslash before u0000 is not a NUL: %s", err);
}
