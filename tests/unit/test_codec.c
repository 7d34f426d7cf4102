/*
 * Codec behaviour: round trips of every record type, and every way a chunk
 * or stream can be wrong (truncation, corruption, versions, sizes, gaps).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "common/codec.h"


/* Fills a record of the given type with a deterministic byte pattern. */
static size_t make_record(uint16_t type, uint8_t *out, unsigned salt)
{
    size_t n = gt__rec_size(type);
    struct gt_rec h = {.type = type, .size = (uint16_t)n};

    for (size_t i = 0; i < n; i++)
        out[i] = (uint8_t)(i * 31u + salt + type);
    memcpy(out, &h, sizeof(h));
    return n;
}

struct sink {
    int hellos;
    int chunks;
    uint64_t seqs[64];
    struct gt__recbuf got;
};

static int on_hello(void *ud, const struct gt__hello_info *hello)
{
    struct sink *s = ud;
    (void)hello;
    s->hellos++;
    return 0;
}

static int on_chunk(void *ud, const struct gt_chunk_header *h,
                    const uint8_t *records, size_t raw_size)
{
    struct sink *s = ud;
    if (s->chunks < 64)
        s->seqs[s->chunks] = h->seq;
    s->chunks++;
    if (raw_size) {
        cr_assert_eq(gt__recbuf_append(&s->got, records, raw_size), 0);
        s->got.count += h->record_count - 1;
    }
    return 0;
}

static size_t make_hello(uint8_t *out, size_t cap)
{
    struct gt_hello h = {.pid = 4242, .ppid = 1, .rank = 3, .local_rank = 1,
                         .world_size = 8, .start_mono_ns = 11, .start_real_ns = 22};
    static const char argv[] = "python3\0train.py\0--lr=0.1";
    ssize_t n = gt__hello_encode(&h, "node-7", argv, sizeof(argv) - 1, out, cap);
    cr_assert_gt(n, 0);
    return (size_t)n;
}

static size_t make_chunk(ZSTD_CCtx *cctx, int level, const struct gt__recbuf *b,
                         uint64_t seq, uint8_t *out, size_t cap)
{
    ssize_t n = gt__chunk_encode(cctx, level, b->data, b->len, b->count, seq, 5,
                                out, cap);
    cr_assert_gt(n, 0, "encode: %s", gt__strerror((int)n));
    return (size_t)n;
}

Test(codec, crc32c_check_value)
{
    cr_assert_eq(gt__crc32c(0, "123456789", 9), 0xE3069283u);
    cr_assert_eq(gt__crc32c_soft(0, "123456789", 9), 0xE3069283u);
    /* Incremental computation equals one pass. */
    cr_assert_eq(gt__crc32c(gt__crc32c(0, "1234", 4), "56789", 5), 0xE3069283u);
}

Test(codec, round_trip_every_record_type)
{
    for (int level = 0; level <= 3; level += 3) {
        struct gt__recbuf b = {0};
        uint8_t rec[256];
        ZSTD_CCtx *cctx = ZSTD_createCCtx();
        ZSTD_DCtx *dctx = ZSTD_createDCtx();
        struct gt_chunk_header h;
        size_t cap = gt__chunk_bound(65536);
        uint8_t *chunk = malloc(cap), *raw = malloc(65536);
        int n = 0;

        int ntypes = 0;
        for (uint16_t t = 1; t < GT_R_TYPE_COUNT; t++) {
            if (gt__rec_size(t) == 0)
                continue; /* a number reserved, not yet a type */
            ntypes++;
            if (t == GT_R_STRING)
                cr_assert_eq(gt__recbuf_string(&b, 7, "layers.17.mlp", 13), 0);
            else
                cr_assert_eq(gt__recbuf_append(&b, rec, make_record(t, rec, 1)), 0);
        }
        make_chunk(cctx, level, &b, 0, chunk, cap);
        cr_assert_eq(gt__chunk_header_parse(chunk, cap, &h), 0);
        cr_assert_eq(h.flags & GT_CHUNK_RAW, level == 0 ? GT_CHUNK_RAW : 0);
        cr_assert_eq(h.record_count, (uint32_t)ntypes);
        cr_assert_eq(gt__chunk_decode(dctx, &h, chunk, raw, 65536), 0);
        cr_assert_eq(h.raw_size, b.len);
        cr_assert_eq(memcmp(raw, b.data, b.len), 0);

        struct gt__rec_iter it;
        uint16_t type, size;
        const uint8_t *r;
        gt__rec_iter_init(&it, raw, h.raw_size);
        while (gt__rec_next(&it, &type, &size, &r) == 1) {
            uint8_t out[256], want[256];
            n++;
            cr_assert_gt(gt__rec_size(type), 0);
            if (type == GT_R_STRING) {
                struct gt_r_string s;
                cr_assert_eq(gt__rec_get(r, size, &s, sizeof(s)), 0);
                cr_assert_eq(s.id, 7);
                cr_assert_eq(size - sizeof(s), 13);
                cr_assert_eq(memcmp(r + sizeof(s), "layers.17.mlp", 13), 0);
                continue;
            }
            cr_assert_eq(gt__rec_get(r, size, out, gt__rec_size(type)), 0);
            make_record(type, want, 1);
            cr_assert_eq(memcmp(out, want, gt__rec_size(type)), 0, "%s", gt__rec_name(type));
        }
        cr_assert_eq(n, ntypes);
        gt__recbuf_free(&b);
        free(chunk);
        free(raw);
        ZSTD_freeCCtx(cctx);
        ZSTD_freeDCtx(dctx);
    }
}

Test(codec, unknown_record_type_is_skipped)
{
    struct gt__recbuf b = {0};
    uint8_t rec[256], future[40] = {0};
    struct gt_rec fh = {.type = 999, .size = sizeof(future)};
    struct gt__rec_iter it;
    uint16_t type, size;
    const uint8_t *r;
    int seen = 0;

    memcpy(future, &fh, sizeof(fh));
    cr_assert_eq(gt__recbuf_append(&b, rec, make_record(GT_R_INSTANT, rec, 2)), 0);
    cr_assert_eq(gt__recbuf_append(&b, future, sizeof(future)), 0);
    cr_assert_eq(gt__recbuf_append(&b, rec, make_record(GT_R_STEP, rec, 2)), 0);
    gt__rec_iter_init(&it, b.data, b.len);
    while (gt__rec_next(&it, &type, &size, &r) == 1) {
        uint8_t out[64];
        seen++;
        if (type == 999) {
            cr_assert_eq(gt__rec_size(type), 0);
            cr_assert_str_eq(gt__rec_name(type), "unknown");
            cr_assert_eq(gt__rec_get(r, size, out, sizeof(out)), GT__ERECORD);
        }
    }
    cr_assert_eq(seen, 3, "the record after the unknown one is still read");
    gt__recbuf_free(&b);
}

Test(codec, record_with_bad_size_stops_iteration)
{
    uint8_t buf[16] = {0};
    struct gt_rec h = {.type = GT_R_INSTANT, .size = 2};
    struct gt__rec_iter it;
    uint16_t type, size;
    const uint8_t *r;

    memcpy(buf, &h, sizeof(h));
    gt__rec_iter_init(&it, buf, sizeof(buf));
    cr_assert_eq(gt__rec_next(&it, &type, &size, &r), GT__ERECORD);
    h.size = 17; /* runs past the buffer */
    memcpy(buf, &h, sizeof(h));
    gt__rec_iter_init(&it, buf, sizeof(buf));
    cr_assert_eq(gt__rec_next(&it, &type, &size, &r), GT__ERECORD);
    /* A known type whose size disagrees with its struct is refused. */
    h.type = GT_R_STEP;
    h.size = 16;
    memcpy(buf, &h, sizeof(h));
    gt__rec_iter_init(&it, buf, sizeof(buf));
    cr_assert_eq(gt__rec_next(&it, &type, &size, &r), 1);
    {
        struct gt__r_step_like { uint8_t b[24]; } out;
        cr_assert_eq(gt__rec_get(r, size, &out, sizeof(out)), GT__ERECORD);
    }
}

Test(codec, truncated_header)
{
    uint8_t chunk[256];
    struct gt__recbuf b = {0};
    uint8_t rec[256];
    struct gt_chunk_header h;

    cr_assert_eq(gt__recbuf_append(&b, rec, make_record(GT_R_INSTANT, rec, 3)), 0);
    make_chunk(NULL, 0, &b, 0, chunk, sizeof(chunk));
    for (size_t n = 0; n < sizeof(struct gt_chunk_header); n++)
        cr_assert_eq(gt__chunk_header_parse(chunk, n, &h), GT__ETRUNC, "len %zu", n);
    cr_assert_eq(gt__chunk_header_parse(chunk, sizeof(h), &h), 0);
    gt__recbuf_free(&b);
}

Test(codec, truncated_payload_in_strict_stream)
{
    uint8_t buf[4096];
    size_t n = 0, cut;
    struct gt__recbuf b = {0};
    uint8_t rec[256];
    struct sink s = {0};
    struct gt__framer *f = gt__framer_create(GT__FRAMER_STRICT, on_hello, on_chunk, &s);

    for (int i = 0; i < 20; i++)
        cr_assert_eq(gt__recbuf_append(&b, rec, make_record(GT_R_SCOPE_BEGIN, rec, (unsigned)i)), 0);
    n += make_hello(buf, sizeof(buf));
    cut = n + make_chunk(NULL, 0, &b, 0, buf + n, sizeof(buf) - n) - 10;
    cr_assert_eq(gt__framer_feed(f, buf, cut), 0, "an incomplete chunk waits");
    cr_assert_eq(s.chunks, 0);
    cr_assert_eq(gt__framer_finish(f), GT__ETRUNC);
    cr_assert_eq(s.hellos, 1);
    gt__framer_free(f);
    gt__recbuf_free(&s.got);
    gt__recbuf_free(&b);
}

Test(codec, bad_checksum_is_detected)
{
    uint8_t chunk[1024], raw[1024];
    struct gt__recbuf b = {0};
    uint8_t rec[256];
    struct gt_chunk_header h;
    size_t n;

    cr_assert_eq(gt__recbuf_append(&b, rec, make_record(GT_R_GPU_KERNEL, rec, 4)), 0);
    n = make_chunk(NULL, 0, &b, 0, chunk, sizeof(chunk));
    chunk[n - 1] ^= 0x40; /* flip one payload bit */
    cr_assert_eq(gt__chunk_header_parse(chunk, n, &h), 0);
    cr_assert_eq(gt__chunk_decode(NULL, &h, chunk, raw, sizeof(raw)), GT__ECRC);
    chunk[n - 1] ^= 0x40;
    chunk[offsetof(struct gt_chunk_header, first_ns)] ^= 1; /* header bit */
    cr_assert_eq(gt__chunk_header_parse(chunk, n, &h), 0);
    cr_assert_eq(gt__chunk_decode(NULL, &h, chunk, raw, sizeof(raw)), GT__ECRC);
    gt__recbuf_free(&b);
}

Test(codec, wrong_version)
{
    uint8_t buf[512];
    struct gt__hello_info *hi = malloc(sizeof(*hi));
    struct gt_chunk_header h;
    size_t n = make_hello(buf, sizeof(buf));
    struct gt__recbuf b = {0};

    buf[offsetof(struct gt_hello, major)] = GT_WIRE_MAJOR + 1;
    cr_assert_eq(gt__hello_parse(buf, n, hi), GT__EVERSION);
    buf[offsetof(struct gt_hello, major)] = GT_WIRE_MAJOR;
    cr_assert_eq(gt__hello_parse(buf, n, hi), (ssize_t)n);
    cr_assert_eq(hi->h.pid, 4242);
    cr_assert_eq(hi->h.rank, 3);
    cr_assert_str_eq(hi->hostname, "node-7");
    cr_assert_str_eq(hi->cmdline, "python3 train.py --lr=0.1");

    make_chunk(NULL, 0, &b, 0, buf, sizeof(buf));
    buf[offsetof(struct gt_chunk_header, major)] = GT_WIRE_MAJOR + 1;
    cr_assert_eq(gt__chunk_header_parse(buf, sizeof(buf), &h), GT__EVERSION);
    free(hi);
}

Test(codec, oversized_length_fields)
{
    uint8_t buf[512];
    struct gt_chunk_header h, bad;
    struct gt__hello_info *hi = malloc(sizeof(*hi));
    struct gt__recbuf b = {0};
    struct gt_hello hh;
    size_t n;

    make_chunk(NULL, 0, &b, 0, buf, sizeof(buf));
    memcpy(&h, buf, sizeof(h));

    bad = h;
    bad.raw_size = GT_CHUNK_MAX_RAW + 1;
    memcpy(buf, &bad, sizeof(bad));
    cr_assert_eq(gt__chunk_header_parse(buf, sizeof(buf), &h), GT__ESIZE);
    bad = h;
    bad.payload_size = 0xffffffffu;
    memcpy(buf, &bad, sizeof(bad));
    cr_assert_eq(gt__chunk_header_parse(buf, sizeof(buf), &h), GT__ESIZE);
    bad = h;
    bad.header_size = 4096;
    memcpy(buf, &bad, sizeof(bad));
    cr_assert_eq(gt__chunk_header_parse(buf, sizeof(buf), &h), GT__ESIZE);
    bad = h;
    bad.record_count = 1000; /* more records than 4-byte minimums fit */
    memcpy(buf, &bad, sizeof(bad));
    cr_assert_eq(gt__chunk_header_parse(buf, sizeof(buf), &h), GT__ESIZE);

    n = make_hello(buf, sizeof(buf));
    memcpy(&hh, buf, sizeof(hh));
    hh.size = 1u << 30;
    memcpy(buf, &hh, sizeof(hh));
    cr_assert_eq(gt__hello_parse(buf, n, hi), GT__ESIZE);
    hh.size = (uint32_t)n;
    hh.hostname_len = 300; /* longer than any host name */
    memcpy(buf, &hh, sizeof(hh));
    cr_assert_eq(gt__hello_parse(buf, n, hi), GT__ESIZE);
    free(hi);
}

Test(codec, zero_length_chunk)
{
    uint8_t buf[512];
    size_t n = 0;
    struct gt__recbuf b = {0};
    struct sink s = {0};
    struct gt__framer *f = gt__framer_create(GT__FRAMER_STRICT, on_hello, on_chunk, &s);
    ZSTD_CCtx *cctx = ZSTD_createCCtx();

    n += make_hello(buf, sizeof(buf));
    n += make_chunk(NULL, 0, &b, 0, buf + n, sizeof(buf) - n);
    n += make_chunk(cctx, 3, &b, 1, buf + n, sizeof(buf) - n);
    cr_assert_eq(gt__framer_feed(f, buf, n), 0);
    cr_assert_eq(gt__framer_finish(f), 0);
    cr_assert_eq(s.chunks, 2, "empty chunks are valid and delivered");
    cr_assert_eq(s.got.len, 0);
    cr_assert_eq(gt__framer_stats(f)->chunks_lost, 0);
    gt__framer_free(f);
    gt__recbuf_free(&s.got);
    ZSTD_freeCCtx(cctx);
}

Test(codec, sequence_gap_detection)
{
    uint8_t buf[4096];
    size_t n = 0;
    struct gt__recbuf b = {0};
    uint8_t rec[256];
    struct sink s = {0};
    struct gt__framer *f = gt__framer_create(GT__FRAMER_STRICT, on_hello, on_chunk, &s);
    static const uint64_t seqs[] = {0, 1, 4, 5, 9};

    cr_assert_eq(gt__recbuf_append(&b, rec, make_record(GT_R_INSTANT, rec, 5)), 0);
    n += make_hello(buf, sizeof(buf));
    for (size_t i = 0; i < 5; i++)
        n += make_chunk(NULL, 0, &b, seqs[i], buf + n, sizeof(buf) - n);
    /* Feed byte by byte: framing must not depend on read boundaries. */
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(gt__framer_feed(f, buf + i, 1), 0);
    cr_assert_eq(gt__framer_finish(f), 0);
    cr_assert_eq(s.chunks, 5);
    cr_assert_eq(gt__framer_stats(f)->chunks_lost, 2 + 3);
    for (size_t i = 0; i < 5; i++)
        cr_assert_eq(s.seqs[i], seqs[i]);
    gt__framer_free(f);
    gt__recbuf_free(&s.got);
    gt__recbuf_free(&b);
}

Test(codec, resync_skips_corrupt_chunk_to_next_valid)
{
    uint8_t buf[8192];
    size_t n = 0, mid_start, mid_len;
    struct gt__recbuf b = {0};
    uint8_t rec[256];
    struct sink s = {0};
    struct gt__framer *f = gt__framer_create(GT__FRAMER_RESYNC, on_hello, on_chunk, &s);
    ZSTD_CCtx *cctx = ZSTD_createCCtx();

    for (int i = 0; i < 50; i++)
        cr_assert_eq(gt__recbuf_append(&b, rec, make_record(GT_R_NODE_CREATED, rec, (unsigned)i)), 0);
    n += make_hello(buf, sizeof(buf));
    n += make_chunk(cctx, 3, &b, 0, buf + n, sizeof(buf) - n);
    mid_start = n;
    mid_len = make_chunk(cctx, 3, &b, 1, buf + n, sizeof(buf) - n);
    n += mid_len;
    n += make_chunk(cctx, 3, &b, 2, buf + n, sizeof(buf) - n);
    /* Corrupt the middle chunk's payload_size so it claims to swallow the
     * third chunk: resync must still find the third. */
    {
        uint32_t big = 100000;
        memcpy(buf + mid_start + offsetof(struct gt_chunk_header, payload_size), &big, 4);
    }
    cr_assert_eq(gt__framer_feed(f, buf, n), 0);
    cr_assert_eq(gt__framer_finish(f), 0);
    cr_assert_eq(s.chunks, 2);
    cr_assert_eq(s.seqs[0], 0);
    cr_assert_eq(s.seqs[1], 2);
    cr_assert_eq(gt__framer_stats(f)->chunks_lost, 1);
    cr_assert_eq(gt__framer_stats(f)->skipped_bytes, mid_len);
    gt__framer_free(f);
    gt__recbuf_free(&s.got);
    gt__recbuf_free(&b);
    ZSTD_freeCCtx(cctx);
}

Test(codec, resync_reports_truncated_tail)
{
    uint8_t buf[8192];
    size_t n = 0, last;
    struct gt__recbuf b = {0};
    uint8_t rec[256];
    struct sink s = {0};
    struct gt__framer *f = gt__framer_create(GT__FRAMER_RESYNC, on_hello, on_chunk, &s);

    cr_assert_eq(gt__recbuf_append(&b, rec, make_record(GT_R_SCOPE_END, rec, 9)), 0);
    n += make_hello(buf, sizeof(buf));
    n += make_chunk(NULL, 0, &b, 0, buf + n, sizeof(buf) - n);
    last = make_chunk(NULL, 0, &b, 1, buf + n, sizeof(buf) - n);
    n += last - 3;
    cr_assert_eq(gt__framer_feed(f, buf, n), 0);
    cr_assert_eq(gt__framer_finish(f), GT__ETRUNC);
    cr_assert_eq(s.chunks, 1, "the whole chunk before the cut is delivered");
    cr_assert_eq(gt__framer_stats(f)->skipped_bytes, last - 3);
    gt__framer_free(f);
    gt__recbuf_free(&s.got);
    gt__recbuf_free(&b);
}

Test(codec, strict_mode_error_is_final)
{
    uint8_t buf[4096];
    size_t n = 0, c1;
    struct gt__recbuf b = {0};
    struct sink s = {0};
    struct gt__framer *f = gt__framer_create(GT__FRAMER_STRICT, on_hello, on_chunk, &s);

    n += make_hello(buf, sizeof(buf));
    c1 = make_chunk(NULL, 0, &b, 0, buf + n, sizeof(buf) - n);
    buf[n] = 'X'; /* break the chunk magic */
    n += c1;
    cr_assert_eq(gt__framer_feed(f, buf, n), GT__EMAGIC);
    cr_assert_eq(gt__framer_feed(f, buf, 1), GT__EMAGIC);
    cr_assert_eq(gt__framer_finish(f), GT__EMAGIC);
    gt__framer_free(f);
    gt__recbuf_free(&s.got);
}

Test(codec, stream_without_hello_is_refused)
{
    uint8_t buf[512];
    struct gt__recbuf b = {0};
    struct sink s = {0};
    struct gt__framer *f = gt__framer_create(GT__FRAMER_RESYNC, on_hello, on_chunk, &s);
    size_t n = make_chunk(NULL, 0, &b, 0, buf, sizeof(buf));

    cr_assert_eq(gt__framer_feed(f, buf, n), GT__EMAGIC);
    cr_assert_eq(s.chunks, 0);
    gt__framer_free(f);
    gt__recbuf_free(&s.got);
}

Test(codec, encode_refuses_small_output_and_oversized_input)
{
    uint8_t out[64], rec[256];
    struct gt__recbuf b = {0};

    for (int i = 0; i < 10; i++)
        cr_assert_eq(gt__recbuf_append(&b, rec, make_record(GT_R_INSTANT, rec, 1)), 0);
    cr_assert_eq(gt__chunk_encode(NULL, 0, b.data, b.len, b.count, 0, 0, out, sizeof(out)),
                 GT__ENOSPACE);
    cr_assert_eq(gt__chunk_encode(NULL, 0, b.data, GT_CHUNK_MAX_RAW + 1, 1, 0, 0, out,
                                 sizeof(out)),
                 GT__ESIZE);
    gt__recbuf_free(&b);
}

Test(codec, error_strings_are_distinct)
{
    static const int codes[] = {GT__ETRUNC, GT__EMAGIC, GT__EVERSION, GT__ECRC,
                                GT__ESIZE, GT__ECORRUPT, GT__ERECORD, GT__ENOSPACE};
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
        for (size_t j = i + 1; j < sizeof(codes) / sizeof(codes[0]); j++)
            cr_assert_str_neq(gt__strerror(codes[i]), gt__strerror(codes[j]));
    cr_assert_str_eq(gt__strerror(-2), strerror(2));
}

static int refuse_hello(void *ud, const struct gt__hello_info *hello)
{
    (void)hello;
    (*(int *)ud)++;
    return -EPERM;
}

static int count_chunk(void *ud, const struct gt_chunk_header *h,
                       const uint8_t *records, size_t raw_size)
{
    (void)ud;
    (void)h;
    (void)records;
    (void)raw_size;
    cr_assert_fail("no chunk may be delivered after a callback error");
    return 0;
}

Test(codec, callback_error_stops_the_framer)
{
    uint8_t buf[1024];
    size_t n = 0;
    struct gt__recbuf b = {0};
    int hellos = 0;
    struct gt__framer *f = gt__framer_create(GT__FRAMER_STRICT, refuse_hello, count_chunk, &hellos);

    n += make_hello(buf, sizeof(buf));
    n += make_chunk(NULL, 0, &b, 0, buf + n, sizeof(buf) - n);
    cr_assert_eq(gt__framer_feed(f, buf, n), -EPERM);
    cr_assert_eq(gt__framer_feed(f, buf, 0), -EPERM);
    cr_assert_eq(gt__framer_finish(f), -EPERM);
    cr_assert_eq(hellos, 1);
    gt__framer_free(f);
}

/* A hostile agent jumps its sequence number to near 2^64: that is not
 * 1.8e19 lost chunks, it is one implausible jump, counted as such. */
Test(codec, sequence_jump_is_not_a_loss)
{
    uint8_t buf[4096];
    size_t n = 0;
    struct gt__recbuf b = {0};
    uint8_t rec[256];
    struct sink s = {0};
    struct gt__framer *f = gt__framer_create(GT__FRAMER_STRICT, on_hello, on_chunk, &s);
    static const uint64_t seqs[] = {0, 3, UINT64_MAX / 2, 7, 8};

    cr_assert_eq(gt__recbuf_append(&b, rec, make_record(GT_R_INSTANT, rec, 5)), 0);
    n += make_hello(buf, sizeof(buf));
    for (size_t i = 0; i < 5; i++)
        n += make_chunk(NULL, 0, &b, seqs[i], buf + n, sizeof(buf) - n);
    cr_assert_eq(gt__framer_feed(f, buf, n), 0);
    cr_assert_eq(gt__framer_finish(f), 0);
    cr_assert_eq(s.chunks, 5);
    cr_assert_eq(gt__framer_stats(f)->chunks_lost, 2, "only the plausible gap 1..2");
    cr_assert_eq(gt__framer_stats(f)->seq_jumps, 2, "the jump out and the jump back");
    gt__framer_free(f);
    gt__recbuf_free(&s.got);
    gt__recbuf_free(&b);
}
