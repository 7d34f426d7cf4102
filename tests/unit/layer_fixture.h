/*
 * Shared by the per-layer attribution tests (test_layer_time.c,
 * test_compiled_conv.c): hand-built record streams fed to both consumers
 * at once, the Chrome writer (its files read back as `gradtrace report`
 * reads them) and the aggregation consumer, which must give the same
 * table; record builders and lookups in the trace and the table.
 */
#ifndef GRADTRACE_TESTS_LAYER_FIXTURE_H
#define GRADTRACE_TESTS_LAYER_FIXTURE_H

#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/codec.h"
#include "daemon/cli/cli.h"
#include "daemon/convert/agg.h"
#include "daemon/convert/consumer.h"
#include "tests/unit/conv_fixture.h"

/* ------------------------------------------------------------ fixture */

struct lx {
    struct conv_fx f;     /* its recbuf and directory only */
    struct gt__consumer *k[2];
    struct gt__agg json, direct;
    cJSON *doc;           /* the main trace file */
};

static inline void lx_open(struct lx *x, uint32_t max_nodes)
{
    memset(x, 0, sizeof(*x));
    strcpy(x->f.dir, "/tmp/gt-lt-XXXXXX");
    cr_assert_not_null(mkdtemp(x->f.dir));
    struct gt__conv_opts co = {.out_dir = x->f.dir, .stem = "t",
                               .max_pending_nodes = max_nodes};
    gt__agg_init(&x->json);
    gt__agg_init(&x->direct);
    x->k[0] = gt__chrome_consumer_create(&co);
    x->k[1] = gt__agg_consumer_create(&x->direct);
    cr_assert(x->k[0] && x->k[1]);
    struct gt__hello_info *h = calloc(1, sizeof(*h));
    h->h.pid = 4242;
    h->h.rank = -1;
    h->h.start_mono_ns = T0;
    for (int i = 0; i < 2; i++)
        cr_assert_eq(x->k[i]->ops->hello(x->k[i], h), 0);
    free(h);
}

/* Both tables hold the same rows with the same numbers, bit for bit. */
static inline void assert_same(struct gt__agg *a, struct gt__agg *b)
{
    cr_assert_eq(a->n, b->n);
    gt__agg_sort(a, GT__AGG_NAME);
    gt__agg_sort(b, GT__AGG_NAME);
    for (size_t i = 0; i < a->n; i++) {
        const struct gt__agg_layer *p = &a->layers[i], *q = &b->layers[i];
        cr_assert_str_eq(p->path, q->path);
        cr_assert_str_eq(p->parent ? p->parent : "", q->parent ? q->parent : "");
        cr_assert_eq(p->fwd_calls, q->fwd_calls, "%s", p->path);
        cr_assert_eq(p->fwd_us, q->fwd_us, "%s", p->path);
        cr_assert_eq(p->rc_calls, q->rc_calls, "%s", p->path);
        cr_assert_eq(p->rc_us, q->rc_us, "%s", p->path);
        cr_assert_eq(p->bwd_us, q->bwd_us, "%s", p->path);
        cr_assert_eq(p->bwd_self_us, q->bwd_self_us, "%s", p->path);
        cr_assert_eq(p->bwd_wall_us, q->bwd_wall_us, "%s", p->path);
        cr_assert_eq(p->accg_us, q->accg_us, "%s", p->path);
        cr_assert_eq(p->comm_us, q->comm_us, "%s", p->path);
        cr_assert_eq(p->fwd_comm_us, q->fwd_comm_us, "%s", p->path);
        cr_assert_eq(p->bwd_nodes, q->bwd_nodes, "%s", p->path);
        cr_assert_eq(p->bwd_self_nodes, q->bwd_self_nodes, "%s", p->path);
        cr_assert_eq(p->order2, q->order2, "%s", p->path);
        cr_assert_eq(p->container, q->container, "%s", p->path);
    }
    cr_assert_eq(a->rest.groups, b->rest.groups);
    cr_assert_eq(a->rest.nodes, b->rest.nodes);
    cr_assert_eq(a->rest.un_nodes, b->rest.un_nodes);
    cr_assert_eq(a->rest.un_accg, b->rest.un_accg);
    cr_assert_eq(a->rest.time_us, b->rest.time_us);
    cr_assert_eq(a->rest.un_us, b->rest.un_us);
    cr_assert_eq(a->rest.comm_us, b->rest.comm_us);
}

/* Feeds the records, finishes both consumers, reads the files back into
 * x->json, checks both routes agree, and finishes both tables. */
static inline void lx_run(struct lx *x)
{
    struct gt_chunk_header h;
    memset(&h, 0, sizeof(h));
    h.record_count = x->f.b.count;
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(x->k[i]->ops->chunk(x->k[i], &h, x->f.b.data, x->f.b.len), 0);
        cr_assert_eq(x->k[i]->ops->finish(x->k[i], NULL, 0), 0);
    }
    const char *const *paths;
    size_t n = gt__conv_files(gt__chrome_consumer_conv(x->k[0]), &paths);
    cr_assert_gt(n, 0);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(gt__report_read_json(&x->json, paths[i]), 0);
    x->doc = load(paths[0]);
    gt__agg_finish(&x->json);
    gt__agg_finish(&x->direct);
    assert_same(&x->json, &x->direct);
}

static inline void lx_close(struct lx *x)
{
    const char *const *paths;
    size_t n = gt__conv_files(gt__chrome_consumer_conv(x->k[0]), &paths);
    for (size_t i = 0; i < n; i++)
        unlink(paths[i]);
    cJSON_Delete(x->doc);
    gt__consumer_free(x->k[0]);
    gt__consumer_free(x->k[1]);
    gt__agg_close(&x->json);
    gt__agg_close(&x->direct);
    gt__recbuf_free(&x->f.b);
    cr_assert_eq(rmdir(x->f.dir), 0);
}

/* ------------------------------------------------------------ records */

static inline void scope(struct lx *x, int begin, uint32_t path, uint32_t cls,
                  uint16_t flags, uint64_t us)
{
    if (begin) {
        struct gt_r_scope_begin r = {{GT_R_SCOPE_BEGIN, sizeof(r)},
                                     GT_SCOPE_MODULE, flags, path, cls,
                                     T0 + us * 1000};
        add(&x->f, &r, sizeof(r));
    } else {
        struct gt_r_scope_end r = {{GT_R_SCOPE_END, sizeof(r)},
                                   GT_SCOPE_MODULE, flags, path,
                                   T0 + us * 1000};
        add(&x->f, &r, sizeof(r));
    }
}

/* A module scope [b, e] creating node seq at b + 1 (seq UINT64_MAX: none). */
static inline void fwd(struct lx *x, uint32_t path, uint32_t cls, uint64_t seq,
                uint64_t b, uint64_t e)
{
    scope(x, 1, path, cls, 0, b);
    if (seq != UINT64_MAX)
        created(&x->f, path, seq, b + 1);
    scope(x, 0, path, cls, 0, e);
}

static inline void nbegin(struct lx *x, uint32_t name, uint64_t seq, uint64_t us)
{
    struct gt_r_bwd_node_begin r = {{GT_R_BWD_NODE_BEGIN, sizeof(r)}, name,
                                    T0 + us * 1000, seq, 1};
    add(&x->f, &r, sizeof(r));
}

static inline void nend(struct lx *x, uint64_t seq, uint64_t us)
{
    struct gt_r_bwd_node_end r = {{GT_R_BWD_NODE_END, sizeof(r)}, 0,
                                  T0 + us * 1000, seq, 1};
    add(&x->f, &r, sizeof(r));
}

static inline void node_layer(struct lx *x, uint32_t layer, uint32_t param,
                       uint64_t us)
{
    struct gt_r_bwd_node_layer r = {{GT_R_BWD_NODE_LAYER, sizeof(r)}, layer,
                                    param, 0, T0 + us * 1000};
    add(&x->f, &r, sizeof(r));
}

static inline void pass(struct lx *x, int begin, uint64_t us, uint64_t v)
{
    struct gt_r_mark r = {{begin ? GT_R_BWD_PASS_BEGIN : GT_R_BWD_PASS_END,
                           sizeof(r)},
                          0, T0 + us * 1000, v};
    add(&x->f, &r, sizeof(r));
}

/* ------------------------------------------------------------ lookups */

/* The nth event of category cat whose args hold key = value (or any). */
static inline const cJSON *ev_of(const cJSON *doc, const char *cat, const char *name,
                          int nth)
{
    const cJSON *ev;
    cJSON_ArrayForEach(ev, cJSON_GetObjectItem(doc, "traceEvents")) {
        if (s_of(ev, "cat") && !strcmp(s_of(ev, "cat"), cat) &&
            (!name || (s_of(ev, "name") && !strcmp(s_of(ev, "name"), name))) &&
            nth-- == 0)
            return ev;
    }
    return NULL;
}

static inline int n_of(const cJSON *doc, const char *cat, const char *name)
{
    int n = 0;
    while (ev_of(doc, cat, name, n))
        n++;
    return n;
}

static inline const cJSON *args(const cJSON *ev)
{
    cr_assert_not_null(ev);
    return cJSON_GetObjectItem(ev, "args");
}

static inline double num(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItem(o, key);
    cr_assert(cJSON_IsNumber(v), "missing %s", key);
    return v->valuedouble;
}

static inline const struct gt__agg_layer *row(const struct gt__agg *a, const char *path)
{
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->layers[i].path, path) == 0)
            return &a->layers[i];
    cr_assert_fail("no row %s", path);
    return NULL;
}

static inline int anomaly(const cJSON *doc, const char *name)
{
    const cJSON *g = cJSON_GetObjectItem(doc, "gradtrace");
    return (int)num(cJSON_GetObjectItem(g, "anomalies"), name);
}

#endif /* GRADTRACE_TESTS_LAYER_FIXTURE_H */
