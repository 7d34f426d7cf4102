/*
 * Per-layer aggregation (daemon/convert/agg.c) and the consumer entry point
 * (daemon/convert/consumer.c): the aggregation consumer's rows for a recording
 * are exactly the rows `gradtrace report` reads from the same recording's
 * trace files, with and without capture windows; the table's name split
 * and orders; and where gt__convert_file stops on bad input.
 */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/codec.h"
#include "daemon/cli/cli.h"
#include "daemon/convert/agg.h"
#include "daemon/convert/consumer.h"
#include "tests/progs/gen_core.h"
#include "tests/unit/conv_fixture.h"

/* ------------------------------------------------------------ helpers */

static int to_file(void *ud, const void *data, size_t len)
{
    return fwrite(data, 1, len, ud) == len ? 0 : -1;
}

/* Writes a generated recording to dir/run.gtr; path receives its name. */
static void gen_file(const char *dir, const struct gen_opts *o, char *path,
                     size_t cap)
{
    struct gen_counts n;
    snprintf(path, cap, "%s/run.gtr", dir);
    FILE *fp = fopen(path, "wb");
    cr_assert_not_null(fp);
    cr_assert_eq(gen_run(o, to_file, fp, &n), 0);
    cr_assert_eq(fclose(fp), 0);
}

/* Reads every file the Chrome consumer wrote into a, as report does. */
static void read_files(struct gt__consumer *chrome, struct gt__agg *a)
{
    const char *const *paths;
    size_t n = gt__conv_files(gt__chrome_consumer_conv(chrome), &paths);
    cr_assert_gt(n, 0);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(gt__report_read_json(a, paths[i]), 0, "%s", paths[i]);
}

static void remove_files(struct gt__consumer *chrome)
{
    const char *const *paths;
    size_t n = gt__conv_files(gt__chrome_consumer_conv(chrome), &paths);
    for (size_t i = 0; i < n; i++)
        unlink(paths[i]);
}

/* Both tables hold the same rows with the same numbers, bit for bit. */
static void assert_same(struct gt__agg *x, struct gt__agg *y)
{
    cr_assert_eq(x->n, y->n, "rows: %zu from JSON, %zu from the recording", x->n,
                 y->n);
    gt__agg_sort(x, GT__AGG_NAME);
    gt__agg_sort(y, GT__AGG_NAME);
    for (size_t i = 0; i < x->n; i++) {
        const struct gt__agg_layer *a = &x->layers[i], *b = &y->layers[i];
        cr_assert_str_eq(a->path, b->path);
        cr_assert_str_eq(a->cls ? a->cls : "", b->cls ? b->cls : "", "%s",
                         a->path);
        cr_assert_eq(a->fwd_calls, b->fwd_calls, "%s", a->path);
        cr_assert_eq(a->fwd_us, b->fwd_us, "%s", a->path);
        cr_assert_eq(a->bwd_spans, b->bwd_spans, "%s", a->path);
        cr_assert_eq(a->bwd_us, b->bwd_us, "%s", a->path);
        cr_assert_eq(a->bwd_nodes, b->bwd_nodes, "%s", a->path);
        cr_assert_eq(a->first_ts, b->first_ts, "%s", a->path);
        cr_assert_eq(a->first_fwd_ts, b->first_fwd_ts, "%s", a->path);
        cr_assert_eq(a->accg_us, b->accg_us, "%s", a->path);
        cr_assert_str_eq(a->top_node ? a->top_node : "",
                         b->top_node ? b->top_node : "", "%s", a->path);
        cr_assert_eq(a->top_node_us, b->top_node_us, "%s", a->path);
        cr_assert_eq(a->gpu_kernels, b->gpu_kernels, "%s", a->path);
        cr_assert_eq(a->gpu_self_us[0], b->gpu_self_us[0], "%s", a->path);
        cr_assert_eq(a->gpu_self_us[1], b->gpu_self_us[1], "%s", a->path);
        cr_assert_eq(!a->it, !b->it, "%s", a->path);
        for (int s = 0; a->it && s < GT__AGG_NST; s++) {
            cr_assert_eq(a->it->st[s].n, b->it->st[s].n, "%s", a->path);
            cr_assert_eq(a->it->st[s].sum, b->it->st[s].sum, "%s", a->path);
        }
    }
    cr_assert_eq(x->steps, y->steps);
    cr_assert_eq(x->step_us, y->step_us);
}

static const struct gt__agg_layer *row(const struct gt__agg *a,
                                       const char *path)
{
    for (size_t i = 0; i < a->n; i++)
        if (strcmp(a->layers[i].path, path) == 0)
            return &a->layers[i];
    return NULL;
}

/* ------------------------------------------------------------ consumer */

Test(agg, recording_rows_equal_what_report_reads_from_the_json, .timeout = 30)
{
    char dir[] = "/tmp/gt-agg-XXXXXX", gtr[96], out[96];
    cr_assert_not_null(mkdtemp(dir));
    struct gen_opts o = {.iterations = 6, .layers = 3, .worker = 1, .gpu = 1,
                         .level = 1, .chunk_kb = 8};
    gen_file(dir, &o, gtr, sizeof(gtr));
    snprintf(out, sizeof(out), "%s/run.json", dir);

    struct gt__agg from_json, from_gtr;
    gt__agg_init(&from_json);
    gt__agg_init(&from_gtr);
    struct gt__conv_opts co = {.out_path = out, .keep_empty_main = 1};
    struct gt__consumer *k2[2] = {gt__chrome_consumer_create(&co),
                                  gt__agg_consumer_create(&from_gtr)};
    cr_assert(k2[0] && k2[1]);
    /* One read of the file feeds both. */
    struct gt__convert_info info = {0};
    cr_assert_eq(gt__convert_file(gtr, k2, 2, &info), 0);
    cr_assert_eq(info.stage, GT__CONVERT_DONE);
    read_files(k2[0], &from_json);

    cr_assert_eq(from_gtr.n, 2 + 4 * o.layers, "Net, layers, and 4 a block");
    const struct gt__agg_layer *l = row(&from_gtr, "layers.1.fc1");
    cr_assert_not_null(l);
    cr_assert_str_eq(l->cls, "Linear");
    cr_assert_eq(l->fwd_calls, o.iterations);
    cr_assert_eq(l->bwd_spans, o.iterations);
    cr_assert_gt(l->bwd_nodes, 0);
    cr_assert_gt(l->gpu_kernels, 0, "the generator's kernels carry layers");
    cr_assert_gt(l->gpu_self_us[0], 0);
    cr_assert_gt(l->gpu_self_us[1], 0);
    cr_assert_not_null(l->top_node);
    gt__agg_finish(&from_json);
    gt__agg_finish(&from_gtr);
    assert_same(&from_json, &from_gtr);

    remove_files(k2[0]);
    gt__consumer_free(k2[0]);
    gt__consumer_free(k2[1]);
    gt__agg_close(&from_json);
    gt__agg_close(&from_gtr);
    unlink(gtr);
    cr_assert_eq(rmdir(dir), 0);
}

/* A module scope of path id at [b, e] us on the current thread. */
static void module(struct conv_fx *f, uint32_t path, uint32_t cls,
                   uint64_t b_us, uint64_t e_us)
{
    struct gt_r_scope_begin b = {{GT_R_SCOPE_BEGIN, sizeof(b)},
                                 GT_SCOPE_MODULE, 0, path, cls,
                                 T0 + b_us * 1000};
    struct gt_r_scope_end e = {{GT_R_SCOPE_END, sizeof(e)}, GT_SCOPE_MODULE,
                               0, path, T0 + e_us * 1000};
    add(f, &b, sizeof(b));
    add(f, &e, sizeof(e));
}

static void window(struct conv_fx *f, uint16_t type, uint64_t us)
{
    struct gt_r_window r = {{type, sizeof(r)}, 1, 1, 0, T0 + us * 1000, 2};
    add(f, &r, sizeof(r));
}

static void consumers_chunk(struct gt__consumer *const *k, size_t n,
                        struct conv_fx *f)
{
    struct gt_chunk_header h;
    memset(&h, 0, sizeof(h));
    h.record_count = f->b.count;
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(k[i]->ops->chunk(k[i], &h, f->b.data, f->b.len), 0);
    gt__recbuf_reset(&f->b);
}

Test(agg, a_capture_window_counts_like_its_file, .timeout = 10)
{
    struct conv_fx f;
    memset(&f, 0, sizeof(f));
    strcpy(f.dir, "/tmp/gt-aggw-XXXXXX");
    cr_assert_not_null(mkdtemp(f.dir));
    struct gt__conv_opts co = {.out_dir = f.dir, .stem = "t"};
    struct gt__agg from_json, from_gtr;
    gt__agg_init(&from_json);
    gt__agg_init(&from_gtr);
    struct gt__consumer *k[2] = {gt__chrome_consumer_create(&co),
                              gt__agg_consumer_create(&from_gtr)};
    cr_assert(k[0] && k[1]);
    struct gt__hello_info *h = calloc(1, sizeof(*h));
    h->h.pid = 4242;
    h->h.rank = -1;
    h->h.start_mono_ns = T0;
    for (int i = 0; i < 2; i++)
        cr_assert_eq(k[i]->ops->hello(k[i], h), 0);
    free(h);

    str(&f, 1, "layer=enc,phase=forward");
    str(&f, 2, "enc");
    str(&f, 3, "Encoder");
    thr(&f, 100);
    module(&f, 2, 3, 10, 20);       /* main */
    window(&f, GT_R_WINDOW_BEGIN, 30);
    module(&f, 2, 3, 40, 47);       /* the window's file */
    window(&f, GT_R_WINDOW_END, 50);
    window(&f, GT_R_WINDOW_DONE, 51);
    consumers_chunk(k, 2, &f);
    for (int i = 0; i < 2; i++)
        cr_assert_eq(k[i]->ops->finish(k[i], NULL, 0), 0);
    cr_assert_eq(gt__conv_files(gt__chrome_consumer_conv(k[0]),
                                &(const char *const *){NULL}), 2,
                 "main and the window's file");
    read_files(k[0], &from_json);

    const struct gt__agg_layer *l = row(&from_gtr, "enc");
    cr_assert_not_null(l);
    cr_assert_eq(l->fwd_calls, 2, "one forward in main, one in the window");
    cr_assert_eq(l->fwd_us, 17.0);
    assert_same(&from_json, &from_gtr);

    remove_files(k[0]);
    gt__consumer_free(k[0]);
    gt__consumer_free(k[1]);
    gt__agg_close(&from_json);
    gt__agg_close(&from_gtr);
    gt__recbuf_free(&f.b);
    cr_assert_eq(rmdir(f.dir), 0, "the aggregation consumer wrote no file");
}

/* ------------------------------------------------------------ table */

Test(agg, names_split_into_path_and_class)
{
    struct gt__agg a;
    gt__agg_init(&a);
    cr_assert_eq(gt__agg_span(&a, 1, "enc.0 (Linear) forward", 1, 2, 0), 0);
    cr_assert_eq(gt__agg_span(&a, 0, "enc.0 (Linear) backward", 5, 3, 4), 0);
    cr_assert_eq(gt__agg_span(&a, 1, "Net forward", 0, 9, 0), 0);
    cr_assert_eq(gt__agg_span(&a, 1, "enc.0 (Linear) backward", 1, 1, 0), 0,
                 "a name without its phase is ignored");
    cr_assert_eq(gt__agg_span(&a, 1, "forward", 1, 1, 0), 0);
    cr_assert_eq(a.n, 2);
    const struct gt__agg_layer *l = row(&a, "enc.0");
    cr_assert_not_null(l);
    cr_assert_str_eq(l->cls, "Linear");
    cr_assert_eq(l->fwd_calls, 1);
    cr_assert_eq(l->bwd_spans, 1);
    cr_assert_eq(l->bwd_nodes, 4);
    cr_assert_eq(l->bwd_us, 3.0);
    cr_assert_null(row(&a, "Net")->cls, "no class in the name: none");
    gt__agg_close(&a);
}

Test(agg, model_order_puts_first_called_first_and_uncalled_last)
{
    struct gt__agg a;
    gt__agg_init(&a);
    cr_assert_eq(gt__agg_span(&a, 0, "list backward", 1, 5, 1), 0);
    cr_assert_eq(gt__agg_span(&a, 1, "b forward", 20, 1, 0), 0);
    cr_assert_eq(gt__agg_span(&a, 1, "a forward", 10, 3, 0), 0);
    /* Many rows: the index grows and rows stay findable. */
    for (int i = 0; i < 300; i++) {
        char name[32];
        snprintf(name, sizeof(name), "x.%d forward", i);
        cr_assert_eq(gt__agg_span(&a, 1, name, 100 + i, 1, 0), 0);
    }
    cr_assert_eq(gt__agg_span(&a, 1, "a forward", 30, 3, 0), 0);
    cr_assert_eq(a.n, 303);
    gt__agg_sort(&a, GT__AGG_MODEL);
    cr_assert_str_eq(a.layers[0].path, "a");
    cr_assert_eq(a.layers[0].fwd_calls, 2);
    cr_assert_str_eq(a.layers[1].path, "b");
    cr_assert_str_eq(a.layers[a.n - 1].path, "list", "never called forward");
    gt__agg_sort(&a, GT__AGG_FWD);
    cr_assert_str_eq(a.layers[0].path, "a", "largest forward time first");
    cr_assert_eq(gt__agg_span(&a, 1, "b forward", 40, 1, 0), 0,
                 "the index survives a sort");
    cr_assert_eq(row(&a, "b")->fwd_calls, 2);
    cr_assert_eq(a.n, 303);
    gt__agg_close(&a);
}

/* Rows without a forward (a backward window's) go in model order too:
 * backward runs the model in reverse, so the later a row's backward, the
 * earlier it comes; rows with a forward come first. */
Test(agg, model_order_of_rows_without_a_forward_is_reverse_backward)
{
    struct gt__agg a;
    gt__agg_init(&a);
    cr_assert_eq(gt__agg_span(&a, 0, "blk.fc2 (Linear) backward", 10, 5, 2), 0);
    cr_assert_eq(gt__agg_span(&a, 0, "blk.ln (LayerNorm) backward", 40, 5, 2), 0);
    cr_assert_eq(gt__agg_span(&a, 0, "blk.attn (Attn) backward", 20, 5, 2), 0);
    cr_assert_eq(gt__agg_span(&a, 0, "blk (Block) backward", 10, 35, 6), 0);
    cr_assert_eq(gt__agg_span(&a, 1, "blk.zz (Linear) forward", 5, 1, 0), 0);
    gt__agg_sort(&a, GT__AGG_MODEL);
    const char *want[] = {"blk", "blk.zz", "blk.ln", "blk.attn", "blk.fc2"};
    cr_assert_eq(a.n, 5);
    for (size_t i = 0; i < 5; i++)
        cr_assert_str_eq(a.layers[i].path, want[i], "row %zu", i);
    gt__agg_close(&a);
}

/* ------------------------------------------------------------ entry */

Test(consumer, convert_file_says_where_it_stopped, .timeout = 10)
{
    char dir[] = "/tmp/gt-consumer-XXXXXX", path[96];
    struct gt__agg a;
    struct gt__convert_info info = {0};
    cr_assert_not_null(mkdtemp(dir));
    gt__agg_init(&a);
    struct gt__consumer *k = gt__agg_consumer_create(&a);
    cr_assert_not_null(k);

    snprintf(path, sizeof(path), "%s/missing.gtr", dir);
    cr_assert_lt(gt__convert_file(path, &k, 1, &info), 0);
    cr_assert_eq(info.stage, GT__CONVERT_OPEN);

    snprintf(path, sizeof(path), "%s/empty.gtr", dir);
    FILE *fp = fopen(path, "wb");
    cr_assert_not_null(fp);
    fclose(fp);
    cr_assert_lt(gt__convert_file(path, &k, 1, &info), 0);
    cr_assert_eq(info.stage, GT__CONVERT_NO_HELLO);
    cr_assert_eq(info.read, 0);
    unlink(path);

    /* A recording cut in its last chunk: what is whole converts. */
    struct gen_opts o = {.iterations = 2, .layers = 1, .level = 1,
                         .chunk_kb = 256};
    gen_file(dir, &o, path, sizeof(path));
    FILE *in = fopen(path, "rb");
    fseek(in, 0, SEEK_END);
    long len = ftell(in);
    fclose(in);
    cr_assert_eq(truncate(path, len - 7), 0);
    cr_assert_eq(gt__convert_file(path, &k, 1, &info), 0);
    cr_assert_eq(info.stage, GT__CONVERT_DONE);
    cr_assert(info.truncated);
    cr_assert_eq(info.read, (uint64_t)len - 7);
    unlink(path);

    gt__consumer_free(k);
    gt__agg_close(&a);
    cr_assert_eq(rmdir(dir), 0);
}
