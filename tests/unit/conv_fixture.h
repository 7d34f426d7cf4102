/*
 * Shared by the converter's unit tests (test_convert.c,
 * test_convert_window.c): a converter writing into a private directory, a
 * buffer of hand-built records fed as one chunk, and JSON read-back.
 * Times are microseconds after T0, the hello's start (the trace base).
 */
#ifndef GRADTRACE_TESTS_CONV_FIXTURE_H
#define GRADTRACE_TESTS_CONV_FIXTURE_H

#include <criterion/criterion.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/codec.h"
#include "daemon/convert/convert.h"

#define T0 5000000000ull /* hello start: trace base */

struct conv_fx {
    char dir[64];
    struct gt__conv *c;
    struct gt__recbuf b;
};

/* Sends the hello of process pid (rank/world -1 when unset), started at T0,
 * with GT_HELLO_* flags. */
static inline void fx_hello_flags(struct conv_fx *f, uint32_t pid, int32_t rank,
                                  int32_t local_rank, int32_t world,
                                  const char *cmdline, uint32_t flags)
{
    struct gt__hello_info *h = calloc(1, sizeof(*h));
    cr_assert_not_null(h);
    h->h.flags = flags;
    h->h.pid = pid;
    h->h.ppid = 1;
    h->h.rank = rank;
    h->h.local_rank = local_rank;
    h->h.world_size = world;
    h->h.start_mono_ns = T0;
    h->h.start_real_ns = 1700000000000000000ull;
    strcpy(h->hostname, "unit");
    snprintf(h->cmdline, sizeof(h->cmdline), "%s", cmdline);
    cr_assert_eq(gt__conv_hello(f->c, h), 0);
    free(h);
}

static inline void fx_hello(struct conv_fx *f, uint32_t pid, int32_t rank,
                            int32_t local_rank, int32_t world, const char *cmdline)
{
    fx_hello_flags(f, pid, rank, local_rank, world, cmdline, 0);
}

static inline void add(struct conv_fx *f, const void *r, size_t n)
{
    cr_assert_eq(gt__recbuf_append(&f->b, r, n), 0);
}

static inline void str(struct conv_fx *f, uint32_t id, const char *s)
{
    cr_assert_eq(gt__recbuf_string(&f->b, id, s, strlen(s)), 0);
}

static inline void thr(struct conv_fx *f, uint32_t tid)
{
    struct gt_r_thread r = {{GT_R_THREAD, sizeof(r)}, tid};
    add(f, &r, sizeof(r));
}

/* A C API scope [b_us, e_us] on the current thread. */
static inline void user_scope(struct conv_fx *f, uint32_t name, uint64_t b_us,
                              uint64_t e_us)
{
    struct gt_r_scope_begin b = {{GT_R_SCOPE_BEGIN, sizeof(b)}, GT_SCOPE_USER,
                                 0, name, 0, T0 + b_us * 1000};
    struct gt_r_scope_end e = {{GT_R_SCOPE_END, sizeof(e)}, GT_SCOPE_USER, 0,
                               name, T0 + e_us * 1000};
    add(f, &b, sizeof(b));
    add(f, &e, sizeof(e));
}

static inline void created(struct conv_fx *f, uint32_t layer, uint64_t seq, uint64_t us)
{
    struct gt_r_node_created r = {{GT_R_NODE_CREATED, sizeof(r)}, layer,
                                  T0 + us * 1000, seq, 1};
    add(f, &r, sizeof(r));
}

static inline void node(struct conv_fx *f, uint32_t name, uint64_t seq, uint64_t b_us,
                        uint64_t e_us)
{
    struct gt_r_bwd_node_begin b = {{GT_R_BWD_NODE_BEGIN, sizeof(b)}, name,
                                    T0 + b_us * 1000, seq, 1};
    struct gt_r_bwd_node_end e = {{GT_R_BWD_NODE_END, sizeof(e)}, 0,
                                  T0 + e_us * 1000, seq, 1};
    add(f, &b, sizeof(b));
    add(f, &e, sizeof(e));
}

/* A converter (stem "t", ACK marks on, rotating past max_events events, 0:
 * the default) writing into a new directory made from tmpl (a mkdtemp
 * template), fed the hello of pid 4242 with command name, string 1 = name. */
static inline void fx_open_named(struct conv_fx *f, const char *tmpl,
                                 uint64_t max_events, const char *name)
{
    memset(f, 0, sizeof(*f));
    snprintf(f->dir, sizeof(f->dir), "%s", tmpl);
    cr_assert_not_null(mkdtemp(f->dir));
    struct gt__conv_opts o = {.out_dir = f->dir, .stem = "t", .ack_marks = 1,
                              .max_file_events = max_events};
    f->c = gt__conv_create(&o);
    cr_assert_not_null(f->c);
    fx_hello(f, 4242, -1, -1, -1, name);
    str(f, 1, name);
}

/* Removes every file the converter listed; the directory must then be
 * empty (a file the converter did not list fails the test). */
static inline void fx_close(struct conv_fx *f)
{
    const char *const *paths;
    size_t n = gt__conv_files(f->c, &paths);
    for (size_t i = 0; i < n; i++)
        unlink(paths[i]);
    gt__conv_free(f->c);
    gt__recbuf_free(&f->b);
    cr_assert_eq(rmdir(f->dir), 0, "a file was left that the converter did not list");
}

/* Feeds the buffered records to the converter as one chunk. */
static inline void feed(struct conv_fx *f)
{
    struct gt_chunk_header h;
    memset(&h, 0, sizeof(h));
    h.record_count = f->b.count;
    cr_assert_eq(gt__conv_chunk(f->c, &h, f->b.data, f->b.len), 0);
    gt__recbuf_reset(&f->b);
}

/* Parses a whole output file; it must be valid JSON. Caller frees. */
static inline cJSON *load(const char *path)
{
    FILE *fp = fopen(path, "rb");
    cr_assert_not_null(fp, "%s", path);
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    cr_assert_eq(fread(b, 1, (size_t)n, fp), (size_t)n);
    b[n] = 0;
    fclose(fp);
    cJSON *doc = cJSON_Parse(b);
    cr_assert_not_null(doc, "%s is not valid JSON", path);
    free(b);
    return doc;
}

static inline const char *s_of(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItem(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

#endif
