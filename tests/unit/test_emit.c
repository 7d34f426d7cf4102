/*
 * The emitter interface (daemon/convert/emit.h) driven directly, as a
 * writer drives it, into the Chrome JSON emitter (emit_chrome.c): every
 * typed arg reads back from the file as the value it was (parsed with
 * cJSON), names join their parts, text is escaped and string ids read as
 * the stream's text, times are relative to the base and clamped there,
 * and the two halves of a flow share their id. Also the helpers every
 * emitter reads events back with (gt__ev_find, the category names).
 */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "daemon/convert/internal.h"

#define BASE 7000000000ull /* the stream's base: hello start, ms aligned */

struct fx {
    char dir[64], path[96];
    struct gt__cstream s;
    struct gt__writer *w;  /* only what the emitter reads: its counts */
    struct gt__emit *e;
};

static void fx_open(struct fx *f)
{
    strcpy(f->dir, "/tmp/gt-emit-XXXXXX");
    cr_assert_not_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof(f->path), "%s/e.json", f->dir);
    const struct gt__conv_opts o = {.out_path = f->path};
    cr_assert_eq(gt__cstream_init(&f->s, &o), 0);
    f->s.base_ns = BASE;
    f->s.have_base = 1;
    f->s.pid = 42;
    gt__str_define(&f->s, 1, "aten::mm", 8);
    gt__str_define(&f->s, 2, "say \"hi\"", 8);
    f->w = gt__calloc(1, sizeof(*f->w));
    cr_assert_not_null(f->w);
    const struct gt__emit_src src = {.s = &f->s, .w = f->w, .an = &f->w->an,
                                     .err = &f->w->err,
                                     .out_path = f->path};
    f->e = gt__chrome_kind.create(&gt__chrome_kind, &src);
    cr_assert_not_null(f->e);
    gt__emit_process(f->e, 0, 42, 0, "train pid 42");
    gt__emit_track(f->e, 1, 0, 42, 100, "main");
    gt__emit_track(f->e, 2, 0, 43, 104, "worker");
}

/* Closes the output and returns its events (the caller frees doc). */
static cJSON *fx_close(struct fx *f, cJSON **doc)
{
    cr_assert_eq(gt__emit_close(f->e), 0);
    FILE *fp = fopen(f->path, "rb");
    cr_assert_not_null(fp);
    char *text = calloc(1, 1 << 20);
    size_t n = fread(text, 1, (1 << 20) - 1, fp);
    fclose(fp);
    cr_assert_gt(n, 0);
    *doc = cJSON_Parse(text);
    free(text);
    cr_assert_not_null(*doc, "not JSON");
    gt__emit_free(f->e);
    gt__free(f->w);
    gt__cstream_close(&f->s);
    unlink(f->path);
    rmdir(f->dir);
    return cJSON_GetObjectItem(*doc, "traceEvents");
}

/* The first event of phase ph (and category cat, when not NULL). */
static cJSON *event(cJSON *evs, const char *ph, const char *cat)
{
    cJSON *e;
    cJSON_ArrayForEach(e, evs) {
        const cJSON *p = cJSON_GetObjectItem(e, "ph");
        const cJSON *c = cJSON_GetObjectItem(e, "cat");
        if (strcmp(p->valuestring, ph) == 0 &&
            (!cat || (c && strcmp(c->valuestring, cat) == 0)))
            return e;
    }
    cr_assert_fail("no %s event of category %s", ph, cat ? cat : "-");
    return NULL;
}

static double num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItem(o, k);
    cr_assert(cJSON_IsNumber(v), "%s is no number", k);
    return v->valuedouble;
}

static const char *str(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItem(o, k);
    cr_assert(cJSON_IsString(v), "%s is no string", k);
    return v->valuestring;
}

Test(emit, chrome_slice_writes_every_arg_type_as_its_value, .timeout = 10)
{
    struct fx f;
    struct gt__ev ev;
    cJSON *doc;
    fx_open(&f);
    gt__ev_init(&ev, GT__CAT_CPU_OP, 1, BASE + 1500, BASE + 4000);
    gt__ev_name_sid(&ev, 1);
    gt__ev_name(&ev, " (");
    gt__ev_name_text(&ev, "x\ny", 3);
    gt__ev_name(&ev, ")");
    gt__ev_u64(&ev, "u", UINT64_MAX);
    gt__ev_i64(&ev, "i", -12);
    gt__ev_f64(&ev, "f", 0.25);
    gt__ev_f64(&ev, "nan", NAN);
    gt__ev_bool(&ev, "yes", 5);
    gt__ev_bool(&ev, "no", 0);
    gt__ev_null(&ev, "none");
    gt__ev_text(&ev, "raw", "tab\there", 8);
    gt__ev_lit(&ev, "lit", "plain");
    gt__ev_sid(&ev, "sid", 2);
    gt__ev_sid(&ev, "undefined", 99);
    gt__ev_ns(&ev, "dur_us", 1234567);
    gt__ev_u32x3(&ev, "grid", 1, 2, 3);
    gt__emit_slice(f.e, &ev);
    cr_assert(gt__emit_begun(f.e));
    cJSON *x = event(fx_close(&f, &doc), "X", "cpu_op");
    cr_assert_str_eq(str(x, "name"), "aten::mm (x\ny)");
    cr_assert_eq(num(x, "pid"), 42);
    cr_assert_eq(num(x, "tid"), 42);
    cr_assert_eq(num(x, "ts"), 1.5);
    cr_assert_eq(num(x, "dur"), 2.5);
    const cJSON *a = cJSON_GetObjectItem(x, "args");
    cr_assert_eq(num(a, "u"), (double)UINT64_MAX);
    cr_assert_eq(num(a, "i"), -12);
    cr_assert_eq(num(a, "f"), 0.25);
    cr_assert(cJSON_IsNull(cJSON_GetObjectItem(a, "nan")));
    cr_assert(cJSON_IsTrue(cJSON_GetObjectItem(a, "yes")));
    cr_assert(cJSON_IsFalse(cJSON_GetObjectItem(a, "no")));
    cr_assert(cJSON_IsNull(cJSON_GetObjectItem(a, "none")));
    cr_assert_str_eq(str(a, "raw"), "tab\there");
    cr_assert_str_eq(str(a, "lit"), "plain");
    cr_assert_str_eq(str(a, "sid"), "say \"hi\"");
    cr_assert_str_eq(str(a, "undefined"), "(unknown string)");
    cr_assert_eq(num(a, "dur_us"), 1234.567);
    const cJSON *g = cJSON_GetObjectItem(a, "grid");
    cr_assert_eq(cJSON_GetArraySize(g), 3);
    cr_assert_eq(cJSON_GetArrayItem(g, 2)->valuedouble, 3);
    cJSON_Delete(doc);
}

Test(emit, chrome_times_are_clamped_at_the_base_and_counted, .timeout = 10)
{
    struct fx f;
    struct gt__ev ev;
    cJSON *doc;
    fx_open(&f);
    gt__ev_init(&ev, GT__CAT_USER, 1, BASE - 5000, BASE + 2000);
    gt__ev_name(&ev, "early");
    gt__emit_slice(f.e, &ev);
    gt__ev_init(&ev, GT__CAT_INSTANT, 2, BASE - 1, BASE - 1);
    gt__ev_name(&ev, "mark");
    gt__emit_instant(f.e, &ev);
    uint64_t before = f.w->an.before_base;
    cr_assert_eq(before, 2, "the slice's start and the instant");
    cJSON *evs = fx_close(&f, &doc);
    cJSON *x = event(evs, "X", "user");
    cr_assert_eq(num(x, "ts"), 0);
    cr_assert_eq(num(x, "dur"), 2.0, "its end stays");
    cJSON *i = event(evs, "i", "instant");
    cr_assert_str_eq(str(i, "s"), "t");
    cr_assert_eq(num(i, "ts"), 0);
    cr_assert_eq(num(i, "tid"), 43);
    cJSON_Delete(doc);
}

Test(emit, chrome_flow_halves_share_an_id_and_tracks_are_described,
     .timeout = 10)
{
    struct fx f;
    struct gt__ev ev;
    cJSON *doc;
    fx_open(&f);
    gt__emit_flow(f.e, GT__CAT_FWDBWD, 1, BASE + 1000, 2, BASE + 9000);
    gt__emit_flow(f.e, GT__CAT_AC2G, 2, BASE + 9000, 1, BASE + 9500);
    gt__ev_init(&ev, GT__CAT_LOST, 1, BASE + 10000, BASE + 10000);
    gt__ev_name(&ev, "gradtrace lost");
    gt__ev_u64(&ev, "events", 3);
    gt__emit_counter(f.e, &ev);
    gt__emit_track(f.e, 2, 0, 43, 104, "worker renamed");
    gt__ev_init(&ev, GT__CAT_WARNING, 2, BASE + 11000, BASE + 11000);
    ev.scope = GT__SCOPE_PROCESS;
    gt__ev_name(&ev, "careful");
    gt__emit_instant(f.e, &ev);
    cr_assert_eq(gt__emit_part(f.e), 0);
    cJSON *evs = fx_close(&f, &doc), *e;
    cJSON *s = event(evs, "s", "fwdbwd"), *fin = event(evs, "f", "fwdbwd");
    cr_assert_eq(num(s, "id"), num(fin, "id"));
    cr_assert_str_eq(str(fin, "bp"), "e");
    cr_assert_neq(num(event(evs, "s", "ac2g"), "id"), num(s, "id"));
    cJSON *c = event(evs, "C", NULL);
    cr_assert_str_eq(str(c, "name"), "gradtrace lost");
    cr_assert_eq(num(cJSON_GetObjectItem(c, "args"), "events"), 3);
    cr_assert_str_eq(str(event(evs, "i", "warning"), "s"), "p");
    int names = 0, renamed = 0;
    cJSON_ArrayForEach(e, evs) {
        if (strcmp(str(e, "ph"), "M") || strcmp(str(e, "name"), "thread_name"))
            continue;
        names++;
        renamed += strcmp(str(cJSON_GetObjectItem(e, "args"), "name"),
                          "worker renamed") == 0;
    }
    cr_assert_eq(names, 3, "main, worker, and worker again after its rename");
    cr_assert_eq(renamed, 1);
    cJSON_Delete(doc);
}

Test(emit, events_read_back_by_key_and_categories_by_name)
{
    struct gt__ev ev;
    gt__ev_init(&ev, GT__CAT_KERNEL, 3, 10, 20);
    gt__ev_u64(&ev, "device", 1);
    gt__ev_lit(&ev, "phase", "backward");
    cr_assert_eq(gt__ev_find(&ev, "device")->v.u, 1);
    cr_assert_eq(gt__ev_find(&ev, "phase")->v.t.sid, GT__TEXT_PLAIN);
    cr_assert_null(gt__ev_find(&ev, "dev"));
    cr_assert_null(gt__ev_find(&ev, "devices"));
    cr_assert_str_eq(gt__cat_name(GT__CAT_ITERATION), "user_annotation");
    cr_assert_eq(gt__cat_len(GT__CAT_AC2G), 4);
    cr_assert_str_eq(gt__cat_name((enum gt__cat)GT__CAT_COUNT), "unknown");
    for (int i = 0; i < GT__EV_ARGS + 3; i++)
        gt__ev_u64(&ev, "k", (uint64_t)i);
    cr_assert_eq(ev.nargs, GT__EV_ARGS, "args past the cap are dropped");
}
