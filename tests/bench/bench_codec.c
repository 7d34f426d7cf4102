/*
 * Codec benchmark: encode and decode rates and compressed bytes per record
 * on a realistic mix — a training step's worth of module scopes, autograd
 * node creations, backward node begin/end pairs, and some GPU kernels with
 * their CUDA API calls, timestamps advancing with jitter as on a real host.
 *
 * Prints figures; never fails on time. Usage: bench_codec [records]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zstd.h>

#include "common/codec.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t rng = 88172645463325252ull;
static uint32_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)rng;
}

/* Appends one "op" worth of records; returns how many records. */
static uint32_t gen_op(struct gt__recbuf *b, uint64_t *ts, uint64_t *seq)
{
    uint32_t layer = 2 + next_rand() % 48, n = 0;
    struct gt_r_scope_begin sb = {{GT_R_SCOPE_BEGIN, sizeof(sb)}, GT_SCOPE_MODULE, 0, layer, 60, 0};
    struct gt_r_scope_end se = {{GT_R_SCOPE_END, sizeof(se)}, GT_SCOPE_MODULE, 0, layer, 0};
    struct gt_r_node_created nc = {{GT_R_NODE_CREATED, sizeof(nc)}, layer, 0, 0, 1};
    struct gt_r_bwd_node_begin bb = {{GT_R_BWD_NODE_BEGIN, sizeof(bb)}, 70 + layer % 9, 0, 0, 1};
    struct gt_r_bwd_node_end be = {{GT_R_BWD_NODE_END, sizeof(be)}, 0, 0, 0, 1};

#define ADV() (*ts += 150 + next_rand() % 2000)
    sb.ts = ADV();
    if (gt__recbuf_append(b, &sb, sizeof(sb)) < 0) exit(1);
    for (int i = 0; i < 3; i++) {
        nc.ts = ADV();
        nc.seq = (*seq)++;
        if (gt__recbuf_append(b, &nc, sizeof(nc)) < 0) exit(1);
        bb.ts = ADV();
        bb.seq = be.seq = nc.seq;
        if (gt__recbuf_append(b, &bb, sizeof(bb)) < 0) exit(1);
        be.ts = ADV();
        if (gt__recbuf_append(b, &be, sizeof(be)) < 0) exit(1);
        n += 3;
    }
    se.ts = ADV();
    if (gt__recbuf_append(b, &se, sizeof(se)) < 0) exit(1);
    n += 2;
    if (next_rand() % 4 == 0) { /* a kernel and its launch */
        struct gt_r_cuda_api api = {{GT_R_CUDA_API, sizeof(api)}, 1234, 211, 0, 90, 0, 0};
        struct gt_r_gpu_kernel k = {{GT_R_GPU_KERNEL, sizeof(k)}, 0, 7, 100 + layer, 0, 0, 0,
                                    {128, 1, 1}, {256, 1, 1}, 4096, 64};
        static uint32_t corr = 1;
        api.corr = k.corr = corr++;
        api.start = ADV();
        api.end = ADV();
        k.start = api.end + 3000;
        k.end = k.start + 5000 + next_rand() % 50000;
        if (gt__recbuf_append(b, &api, sizeof(api)) < 0) exit(1);
        if (gt__recbuf_append(b, &k, sizeof(k)) < 0) exit(1);
        n += 2;
    }
    return n;
}

struct count {
    uint64_t records;
};

static int on_chunk(void *ud, const struct gt_chunk_header *h,
                    const uint8_t *records, size_t raw_size)
{
    struct count *c = ud;
    struct gt__rec_iter it;
    uint16_t type, size;
    const uint8_t *r;
    (void)h;
    gt__rec_iter_init(&it, records, raw_size);
    while (gt__rec_next(&it, &type, &size, &r) == 1)
        c->records++;
    return 0;
}

int main(int argc, char **argv)
{
    uint64_t target = argc > 1 ? strtoull(argv[1], NULL, 10) : 20000000ull;
    const size_t chunk_raw = 1u << 20; /* the agent's default chunk size */
    struct gt__recbuf all = {0};
    uint64_t ts = 1000000000ull, seq = 0, nrec = 0;
    size_t *cuts = NULL, ncuts = 0, capcuts = 0;
    uint32_t *counts = NULL;
    ZSTD_CCtx *cctx = ZSTD_createCCtx();

    /* Pre-generate records, cut into ~1 MiB chunks on record boundaries. */
    while (nrec < target) {
        size_t start = all.len;
        uint32_t c = 0;
        while (all.len - start < chunk_raw - 512 && nrec < target) {
            c += gen_op(&all, &ts, &seq);
            nrec = all.count;
        }
        if (ncuts == capcuts) {
            capcuts = capcuts ? capcuts * 2 : 64;
            cuts = realloc(cuts, capcuts * sizeof(*cuts));
            counts = realloc(counts, capcuts * sizeof(*counts));
            if (!cuts || !counts) return 1;
        }
        cuts[ncuts] = all.len - start;
        counts[ncuts++] = c;
    }
    printf("codec bench: %llu records, %.1f MB raw, %zu chunks of ~1 MiB, %.1f B/record raw\n",
           (unsigned long long)nrec, all.len / 1e6, ncuts, (double)all.len / (double)nrec);

    static const int levels[] = {0, 1, 3};
    for (size_t li = 0; li < sizeof(levels) / sizeof(levels[0]); li++) {
        int level = levels[li];
        size_t cap = ncuts * gt__chunk_bound(chunk_raw) + 1024;
        uint8_t *out = malloc(cap);
        size_t off, pos = 0;
        double t0, enc, dec;
        struct count cnt = {0};
        struct gt_hello hh = {.pid = 1, .rank = -1, .local_rank = -1, .world_size = -1};
        ssize_t n;

        if (!out) return 1;
        n = gt__hello_encode(&hh, "h", "bench", 5, out, cap);
        if (n < 0) return 1;
        pos = (size_t)n;
        t0 = now_s();
        off = 0;
        for (size_t i = 0; i < ncuts; i++) {
            n = gt__chunk_encode(cctx, level, all.data + off, cuts[i], counts[i], i, 0,
                                out + pos, cap - pos);
            if (n < 0) { fprintf(stderr, "encode: %s\n", gt__strerror((int)n)); return 1; }
            pos += (size_t)n;
            off += cuts[i];
        }
        enc = now_s() - t0;

        struct gt__framer *f = gt__framer_create(GT__FRAMER_STRICT, NULL, on_chunk, &cnt);
        t0 = now_s();
        /* Feed in 256 KiB reads, as from a socket or file. */
        for (size_t o = 0; o < pos; o += 262144) {
            size_t len = pos - o < 262144 ? pos - o : 262144;
            if (gt__framer_feed(f, out + o, len) != 0) return 1;
        }
        if (gt__framer_finish(f) != 0) return 1;
        dec = now_s() - t0;
        if (cnt.records != nrec) { fprintf(stderr, "decoded %llu\n", (unsigned long long)cnt.records); return 1; }
        gt__framer_free(f);

        printf("  %-7s encode %6.1f Mrec/s %7.0f MB/s raw | decode+iterate %6.1f Mrec/s %7.0f MB/s raw | %5.2f B/record on the wire (ratio %.1fx)\n",
               level == 0 ? "raw" : level == 1 ? "zstd-1" : "zstd-3",
               nrec / enc / 1e6, all.len / enc / 1e6, nrec / dec / 1e6, all.len / dec / 1e6,
               (double)pos / (double)nrec, (double)all.len / (double)pos);
        free(out);
    }
    ZSTD_freeCCtx(cctx);
    gt__recbuf_free(&all);
    free(cuts);
    free(counts);
    return 0;
}
