/*
 * Prints the CUDA- and NVTX-related records of a .gtr file one per line,
 * fields separated by tabs (names may contain spaces), string ids
 * resolved, for the CUDA e2e tests and scripts/gpu-check.sh to read:
 *
 *   thread <tid>
 *   begin <kind> <name> <cls> <ts>        (scope begin; cls "-" when 0)
 *   end <kind> <name> <ts>
 *   instant <name> <ts>
 *   node <seq> <fwd_tid> <ts> <layer>     (autograd node created)
 *   bwd_begin <seq> <fwd_tid> <ts> <name> (seq -1 when unknown)
 *   bwd_end <seq> <fwd_tid> <ts>
 *   kernel <device> <stream> <corr> <start> <end> <name>
 *   memcpy <device> <stream> <corr> <bytes> <start> <end>
 *   memset <device> <stream> <corr> <bytes> <start> <end>
 *   api <tid> <corr> <start> <end> <name>
 *   ext <kind> <corr> <ext> <layer name, or "-" for other kinds>
 *   clock <device> <mono> <real> <device_ts> <uncertainty>
 *   lost <tid> <what> <count>
 *   warning <code> <text>
 *   summary records=<n> chunks=<n> corrupt=<n> lost_chunks=<n>
 *
 * Exit 0 when the file
 * decodes (corrupt chunks are counted, not fatal), 1 otherwise.
 *
 *   cuda_gtr_dump FILE.gtr
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/codec.h"

struct strtab {
    char **s;
    uint32_t cap;
};

static struct strtab g_str;
static uint64_t g_records;

static const char *name_of(uint32_t id)
{
    if (!id)
        return "-";
    if (id < g_str.cap && g_str.s[id])
        return g_str.s[id];
    return "?";
}

static int define(uint32_t id, const uint8_t *text, size_t len)
{
    if (id >= (1u << 24))
        return -ERANGE;
    if (id >= g_str.cap) {
        uint32_t cap = g_str.cap ? g_str.cap : 256;
        while (cap <= id)
            cap *= 2;
        char **n = realloc(g_str.s, cap * sizeof(*n));
        if (!n)
            return -ENOMEM;
        memset(n + g_str.cap, 0, (cap - g_str.cap) * sizeof(*n));
        g_str.s = n;
        g_str.cap = cap;
    }
    free(g_str.s[id]);
    g_str.s[id] = malloc(len + 1);
    if (!g_str.s[id])
        return -ENOMEM;
    /* One line per record: newlines in names would break that. */
    for (size_t i = 0; i < len; i++)
        g_str.s[id][i] = text[i] == '\n' ? ' ' : (char)text[i];
    g_str.s[id][len] = '\0';
    return 0;
}

#define GET(type, var)                                                        \
    type var;                                                                 \
    if (gt__rec_get(rec, size, &var, sizeof(var)))                             \
        break

static int on_chunk(void *ud, const struct gt_chunk_header *h,
                    const uint8_t *records, size_t raw_size)
{
    (void)ud;
    (void)h;
    struct gt__rec_iter it;
    gt__rec_iter_init(&it, records, raw_size);
    uint16_t type, size;
    const uint8_t *rec;
    int r;
    while ((r = gt__rec_next(&it, &type, &size, &rec)) == 1) {
        g_records++;
        switch (type) {
        case GT_R_STRING: {
            struct gt_r_string s;
            if (size < sizeof(s))
                break;
            memcpy(&s, rec, sizeof(s));
            if (define(s.id, rec + sizeof(s), size - sizeof(s)))
                return -ENOMEM;
            break;
        }
        case GT_R_THREAD: {
            GET(struct gt_r_thread, t);
            printf("thread\t%u\n", t.tid);
            break;
        }
        case GT_R_SCOPE_BEGIN: {
            GET(struct gt_r_scope_begin, b);
            printf("begin\t%u\t%s\t%s\t%" PRIu64 "\n", b.kind, name_of(b.name),
                   name_of(b.cls), b.ts);
            break;
        }
        case GT_R_SCOPE_END: {
            GET(struct gt_r_scope_end, e);
            printf("end\t%u\t%s\t%" PRIu64 "\n", e.kind, name_of(e.name), e.ts);
            break;
        }
        case GT_R_INSTANT: {
            GET(struct gt_r_instant, i);
            printf("instant\t%s\t%" PRIu64 "\n", name_of(i.name), i.ts);
            break;
        }
        case GT_R_NODE_CREATED: {
            GET(struct gt_r_node_created, n);
            printf("node\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%s\n", n.seq,
                   n.fwd_tid, n.ts, name_of(n.layer));
            break;
        }
        case GT_R_BWD_NODE_BEGIN: {
            GET(struct gt_r_bwd_node_begin, b);
            printf("bwd_begin\t%" PRId64 "\t%" PRIu64 "\t%" PRIu64 "\t%s\n",
                   b.seq == UINT64_MAX ? (int64_t)-1 : (int64_t)b.seq,
                   b.fwd_tid, b.ts, name_of(b.name));
            break;
        }
        case GT_R_BWD_NODE_END: {
            GET(struct gt_r_bwd_node_end, e);
            printf("bwd_end\t%" PRId64 "\t%" PRIu64 "\t%" PRIu64 "\n",
                   e.seq == UINT64_MAX ? (int64_t)-1 : (int64_t)e.seq,
                   e.fwd_tid, e.ts);
            break;
        }
        case GT_R_GPU_KERNEL: {
            GET(struct gt_r_gpu_kernel, k);
            printf("kernel\t%u\t%u\t%u\t%" PRIu64 "\t%" PRIu64 "\t%s\n", k.device,
                   k.stream, k.corr, k.start, k.end, name_of(k.name));
            break;
        }
        case GT_R_GPU_MEMCPY: {
            GET(struct gt_r_gpu_memcpy, m);
            printf("memcpy\t%u\t%u\t%u\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\n",
                   m.device, m.stream, m.corr, m.bytes, m.start, m.end);
            break;
        }
        case GT_R_GPU_MEMSET: {
            GET(struct gt_r_gpu_memset, m);
            printf("memset\t%u\t%u\t%u\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\n",
                   m.device, m.stream, m.corr, m.bytes, m.start, m.end);
            break;
        }
        case GT_R_CUDA_API: {
            GET(struct gt_r_cuda_api, a);
            printf("api\t%u\t%u\t%" PRIu64 "\t%" PRIu64 "\t%s\n", a.tid, a.corr,
                   a.start, a.end, name_of(a.name));
            break;
        }
        case GT_R_EXT_CORR: {
            GET(struct gt_r_ext_corr, e);
            /* Layer ids are string ids: name them. */
            printf("ext\t%u\t%u\t%" PRIu64 "\t%s\n", e.kind, e.corr, e.ext,
                   e.kind == GT_EXT_LAYER_FWD || e.kind == GT_EXT_LAYER_BWD
                       ? name_of((uint32_t)e.ext)
                       : "-");
            break;
        }
        case GT_R_CLOCK_SYNC: {
            GET(struct gt_r_clock_sync, c);
            printf("clock\t%d\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\n",
                   c.device, c.mono_ns, c.real_ns, c.device_ts,
                   c.uncertainty_ns);
            break;
        }
        case GT_R_LOST: {
            GET(struct gt_r_lost, l);
            printf("lost\t%u\t%u\t%" PRIu64 "\n", l.tid, l.what, l.count);
            break;
        }
        case GT_R_WARNING: {
            GET(struct gt_r_warning, w);
            printf("warning\t%u\t%s\n", w.code, name_of(w.text));
            break;
        }
        default:
            break;
        }
    }
    return r < 0 ? r : 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: cuda_gtr_dump FILE.gtr\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        fprintf(stderr, "cuda_gtr_dump: %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    struct gt__framer *fr = gt__framer_create(GT__FRAMER_RESYNC, NULL, on_chunk, NULL);
    if (!fr) {
        fclose(f);
        return 1;
    }
    static uint8_t buf[1 << 16];
    size_t n;
    int r = 0;
    while (!r && (n = fread(buf, 1, sizeof(buf), f)) > 0)
        r = gt__framer_feed(fr, buf, n);
    if (!r)
        r = gt__framer_finish(fr);
    const struct gt__framer_stats *st = gt__framer_stats(fr);
    printf("summary\trecords=%" PRIu64 " chunks=%" PRIu64 " corrupt=%" PRIu64
           " lost_chunks=%" PRIu64 "\n",
           g_records, st->chunks, st->corrupt_chunks, st->chunks_lost);
    int ok = (r == 0 || r == GT__ETRUNC) && gt__framer_hello(fr) != NULL;
    if (!ok)
        fprintf(stderr, "cuda_gtr_dump: %s: %s\n", argv[1], gt__strerror(r));
    gt__framer_free(fr);
    fclose(f);
    for (uint32_t i = 0; i < g_str.cap; i++)
        free(g_str.s[i]);
    free(g_str.s);
    return ok ? 0 : 1;
}
