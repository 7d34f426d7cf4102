/*
 * Writes the seed corpus for the codec fuzz targets: well-formed chunks of
 * every record type (raw and zstd) and a small multi-chunk file. Run by
 * hand when the format changes: cc ... tests/fuzz/gen_seeds.c && ./a.out
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "common/codec.h"

static void put(const char *dir, const char *name, const void *p, size_t n)
{
    char path[512];
    FILE *f;
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n)
        exit(1);
    fclose(f);
}

int main(void)
{
    struct gt__recbuf b = {0};
    uint8_t rec[256], out[65536], file[262144];
    ZSTD_CCtx *cctx = ZSTD_createCCtx();
    struct gt_hello hh = {.pid = 7, .rank = -1, .local_rank = -1, .world_size = -1};
    size_t fl;
    ssize_t n;

    if (gt__recbuf_string(&b, 1, "layers.0.mlp", 12) != 0)
        return 1;
    for (uint16_t t = 2; t < GT_R_TYPE_COUNT; t++) {
        struct gt_rec h = {t, (uint16_t)gt__rec_size(t)};
        if (h.size == 0)
            continue; /* a reserved number */
        memset(rec, (int)t, sizeof(rec));
        memcpy(rec, &h, sizeof(h));
        if (gt__recbuf_append(&b, rec, h.size) != 0)
            return 1;
    }
    for (int level = 0; level <= 3; level += 3) {
        char name[32];
        n = gt__chunk_encode(cctx, level, b.data, b.len, b.count, 0, 1, out, sizeof(out));
        if (n < 0)
            return 1;
        snprintf(name, sizeof(name), "all-types-l%d", level);
        put("tests/fuzz/corpus/fuzz_chunk", name, out, (size_t)n);
    }
    n = gt__hello_encode(&hh, "host", "prog\0arg", 8, file, sizeof(file));
    if (n < 0)
        return 1;
    fl = (size_t)n;
    for (uint64_t seq = 0; seq < 4; seq++) {
        n = gt__chunk_encode(cctx, seq & 1 ? 3 : 0, b.data, b.len, b.count,
                            seq == 3 ? 5 : seq, 1, file + fl, sizeof(file) - fl);
        if (n < 0)
            return 1;
        fl += (size_t)n;
    }
    put("tests/fuzz/corpus/fuzz_file", "four-chunks-gap", file, fl);
    put("tests/fuzz/corpus/fuzz_file", "truncated", file, fl - 17);
    file[fl / 2] ^= 0x5a;
    put("tests/fuzz/corpus/fuzz_file", "corrupt-middle", file, fl);
    ZSTD_freeCCtx(cctx);
    gt__recbuf_free(&b);
    return 0;
}
