/*
 * Fuzz target: one chunk from hostile bytes. Header validation, CRC,
 * decompression and record iteration must never read out of bounds, leak,
 * or accept a record whose size disagrees with its type.
 *
 * The CRC would make almost every mutation fail early, so the target also
 * re-seals the input's header with a correct CRC (when the input is long
 * enough to hold one) and decodes that too: the fuzzer then reaches zstd
 * and the record iterator with arbitrary payloads.
 */
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "common/codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static ZSTD_DCtx *dctx;

static void walk(const uint8_t *raw, size_t n)
{
    struct gt__rec_iter it;
    uint16_t type, rsize;
    const uint8_t *r;
    uint8_t out[256];

    gt__rec_iter_init(&it, raw, n);
    while (gt__rec_next(&it, &type, &rsize, &r) == 1) {
        size_t want = gt__rec_size(type);
        if (want && want <= sizeof(out) && gt__rec_get(r, rsize, out, want) == 0 &&
            type == GT_R_STRING && rsize - want > GT_STRING_MAX)
            abort(); /* gt__rec_get must have refused an oversized string */
    }
}

static void decode(const uint8_t *buf, size_t size)
{
    struct gt_chunk_header h;
    uint8_t *raw;

    if (gt__chunk_header_parse(buf, size, &h) != 0)
        return;
    if (size < sizeof(h) + h.payload_size)
        return;
    raw = malloc(h.raw_size ? h.raw_size : 1);
    if (!raw)
        return;
    if (gt__chunk_decode(dctx, &h, buf, raw, h.raw_size) == 0)
        walk(raw, h.raw_size);
    free(raw);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gt_chunk_header h;
    uint8_t *copy;

    if (!dctx)
        dctx = ZSTD_createDCtx();
    decode(data, size);

    /* Re-seal: fix magic/version/header_size/payload_size and the CRC. */
    if (size < sizeof(h) || size > (1u << 20))
        return 0;
    copy = malloc(size);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    memcpy(&h, copy, sizeof(h));
    h.magic = GT_CHUNK_MAGIC;
    h.major = GT_WIRE_MAJOR;
    h.header_size = sizeof(h);
    h.reserved = 0;
    h.flags &= GT_CHUNK_RAW;
    h.payload_size = (uint32_t)(size - sizeof(h));
    if (h.flags & GT_CHUNK_RAW)
        h.raw_size = h.payload_size;
    else
        h.raw_size %= 1u << 20;
    h.record_count = h.raw_size / 4;
    h.crc = 0;
    memcpy(copy, &h, sizeof(h));
    h.crc = gt__crc32c(gt__crc32c(0, copy, sizeof(h)), copy + sizeof(h), h.payload_size);
    memcpy(copy, &h, sizeof(h));
    decode(copy, size);
    free(copy);
    return 0;
}
