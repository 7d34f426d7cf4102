/*
 * Chunk and record codec; see codec.h for the contract and
 * include/gradtrace/wire.h for the format.
 *
 * Decoding order for a chunk: header fields are range-checked before any
 * size from them is used; the CRC covers header and payload and is checked
 * before decompression, so zstd never sees bytes the producer did not
 * write; the decompressed size must equal raw_size exactly.
 */
#include "common/codec.h"

#include <errno.h>
#include <string.h>
#include <zstd.h>

#include "common/alloc.h"

const char *gt__strerror(int err)
{
    switch (err) {
    case 0:
        return "success";
    case GT__ETRUNC:
        return "truncated input";
    case GT__EMAGIC:
        return "bad magic (not a gradtrace stream)";
    case GT__EVERSION:
        return "unsupported wire format version";
    case GT__ECRC:
        return "checksum mismatch";
    case GT__ESIZE:
        return "length field out of bounds";
    case GT__ECORRUPT:
        return "payload does not decode";
    case GT__ERECORD:
        return "malformed record";
    case GT__ENOSPACE:
        return "output buffer too small";
    default:
        break;
    }
    if (err < 0 && err > -GT__E_BASE)
        return strerror(-err);
    return "unknown error";
}

/* ------------------------------------------------------------ hello */

ssize_t gt__hello_encode(const struct gt_hello *fields, const char *hostname,
                        const char *cmdline, size_t cmdline_len, void *out,
                        size_t out_cap)
{
    struct gt_hello h = *fields;
    size_t hl = hostname ? strnlen(hostname, 255) : 0;
    size_t room = GT_HELLO_MAX_SIZE - sizeof(h) - hl;
    size_t cl = cmdline ? cmdline_len : 0;

    if (cl > room)
        cl = room;
    memcpy(h.magic, GT_HELLO_MAGIC, 8);
    h.major = GT_WIRE_MAJOR;
    h.minor = GT_WIRE_MINOR;
    h.hostname_len = (uint16_t)hl;
    h.cmdline_len = (uint16_t)cl;
    h.size = (uint32_t)(sizeof(h) + hl + cl);
    h.reserved = 0;
    if (out_cap < h.size)
        return GT__ENOSPACE;
    memcpy(out, &h, sizeof(h));
    if (hl)
        memcpy((char *)out + sizeof(h), hostname, hl);
    if (cl)
        memcpy((char *)out + sizeof(h) + hl, cmdline, cl);
    return (ssize_t)h.size;
}

ssize_t gt__hello_parse(const void *buf, size_t len, struct gt__hello_info *out)
{
    struct gt_hello h;
    const char *p = buf;
    size_t n = len < 8 ? len : 8;

    /* Reject a wrong magic as soon as its first bytes are in. */
    if (memcmp(p, GT_HELLO_MAGIC, n) != 0)
        return GT__EMAGIC;
    if (len < sizeof(h))
        return GT__ETRUNC;
    memcpy(&h, p, sizeof(h));
    if (h.major != GT_WIRE_MAJOR)
        return GT__EVERSION;
    if (h.hostname_len > 255 || h.size > GT_HELLO_MAX_SIZE ||
        h.size != sizeof(h) + (uint32_t)h.hostname_len + h.cmdline_len)
        return GT__ESIZE;
    if (len < h.size)
        return GT__ETRUNC;
    out->h = h;
    memcpy(out->hostname, p + sizeof(h), h.hostname_len);
    out->hostname[h.hostname_len] = '\0';
    /* Arguments arrive NUL-separated; present them space-joined. */
    for (uint16_t i = 0; i < h.cmdline_len; i++) {
        char c = p[sizeof(h) + h.hostname_len + i];
        out->cmdline[i] = c ? c : ' ';
    }
    out->cmdline[h.cmdline_len] = '\0';
    return (ssize_t)h.size;
}

/* ------------------------------------------------------------ chunks */

size_t gt__chunk_bound(size_t raw_size)
{
    return sizeof(struct gt_chunk_header) + ZSTD_compressBound(raw_size);
}

static uint32_t chunk_crc(const struct gt_chunk_header *h, const void *payload)
{
    struct gt_chunk_header z = *h;
    uint32_t crc;

    z.crc = 0;
    crc = gt__crc32c(0, &z, sizeof(z));
    return gt__crc32c(crc, payload, h->payload_size);
}

ssize_t gt__chunk_encode(void *cctx, int level, const void *records,
                        size_t raw_size, uint32_t record_count, uint64_t seq,
                        uint64_t first_ns, void *out, size_t out_cap)
{
    struct gt_chunk_header h;
    uint8_t *payload = (uint8_t *)out + sizeof(h);
    size_t psize;

    if (raw_size > GT_CHUNK_MAX_RAW)
        return GT__ESIZE;
    if (out_cap < sizeof(h) + (level <= 0 ? raw_size : ZSTD_compressBound(raw_size)))
        return GT__ENOSPACE;

    memset(&h, 0, sizeof(h));
    h.magic = GT_CHUNK_MAGIC;
    h.major = GT_WIRE_MAJOR;
    h.minor = GT_WIRE_MINOR;
    h.header_size = sizeof(h);
    h.raw_size = (uint32_t)raw_size;
    h.record_count = record_count;
    h.seq = seq;
    h.first_ns = first_ns;

    if (level <= 0 || raw_size == 0) {
        h.flags = GT_CHUNK_RAW;
        if (raw_size)
            memcpy(payload, records, raw_size);
        psize = raw_size;
    } else {
        psize = ZSTD_compressCCtx(cctx, payload, out_cap - sizeof(h), records,
                                  raw_size, level);
        if (ZSTD_isError(psize))
            return GT__ENOSPACE;
        /* Incompressible input: storing it raw is smaller and cheaper. */
        if (psize >= raw_size) {
            h.flags = GT_CHUNK_RAW;
            memcpy(payload, records, raw_size);
            psize = raw_size;
        }
    }
    h.payload_size = (uint32_t)psize;
    h.crc = chunk_crc(&h, payload);
    memcpy(out, &h, sizeof(h));
    return (ssize_t)(sizeof(h) + psize);
}

int gt__chunk_header_parse(const void *buf, size_t len,
                          struct gt_chunk_header *out)
{
    struct gt_chunk_header h;

    if (len >= 4) {
        uint32_t m;
        memcpy(&m, buf, 4);
        if (m != GT_CHUNK_MAGIC)
            return GT__EMAGIC;
    }
    if (len < sizeof(h))
        return GT__ETRUNC;
    memcpy(&h, buf, sizeof(h));
    if (h.major != GT_WIRE_MAJOR)
        return GT__EVERSION;
    if (h.header_size != sizeof(h) || h.reserved != 0 ||
        (h.flags & ~GT_CHUNK_RAW) != 0 || h.raw_size > GT_CHUNK_MAX_RAW ||
        h.payload_size > GT_CHUNK_MAX_PAYLOAD ||
        ((h.flags & GT_CHUNK_RAW) && h.payload_size != h.raw_size) ||
        h.record_count > h.raw_size / sizeof(struct gt_rec))
        return GT__ESIZE;
    *out = h;
    return 0;
}

int gt__chunk_decode(void *dctx, const struct gt_chunk_header *h,
                    const void *buf, void *raw, size_t raw_cap)
{
    const uint8_t *payload = (const uint8_t *)buf + sizeof(*h);
    size_t n;

    if (chunk_crc(h, payload) != h->crc)
        return GT__ECRC;
    if (raw_cap < h->raw_size)
        return GT__ENOSPACE;
    if (h->raw_size == 0)
        return h->payload_size == 0 || !(h->flags & GT_CHUNK_RAW) ? 0 : GT__ECORRUPT;
    if (h->flags & GT_CHUNK_RAW) {
        memcpy(raw, payload, h->raw_size);
        return 0;
    }
    if (!dctx)
        return GT__ECORRUPT;
    /* The frame's declared content size must agree before we decompress. */
    {
        unsigned long long fs = ZSTD_getFrameContentSize(payload, h->payload_size);
        if (fs != ZSTD_CONTENTSIZE_UNKNOWN && fs != h->raw_size)
            return GT__ECORRUPT;
    }
    n = ZSTD_decompressDCtx(dctx, raw, h->raw_size, payload, h->payload_size);
    if (ZSTD_isError(n) || n != h->raw_size)
        return GT__ECORRUPT;
    return 0;
}

/* ------------------------------------------------------------ records */

#define SIZE_OF(type, st) [type] = sizeof(struct st),
static const uint16_t rec_sizes[GT_R_TYPE_COUNT] = {GT_WIRE_RECORDS(SIZE_OF)};
#undef SIZE_OF

#define NAME_OF(type, st) [type] = #type,
static const char *const rec_names[GT_R_TYPE_COUNT] = {GT_WIRE_RECORDS(NAME_OF)};
#undef NAME_OF

size_t gt__rec_size(uint16_t type)
{
    return type < GT_R_TYPE_COUNT ? rec_sizes[type] : 0;
}

const char *gt__rec_name(uint16_t type)
{
    /* Skip the "GT_R_" prefix. */
    return type < GT_R_TYPE_COUNT && rec_names[type] ? rec_names[type] + 5
                                                     : "unknown";
}

int gt__rec_next(struct gt__rec_iter *it, uint16_t *type, uint16_t *size,
                const uint8_t **rec)
{
    struct gt_rec h;

    if (it->p >= it->end)
        return 0;
    if ((size_t)(it->end - it->p) < sizeof(h))
        return GT__ERECORD;
    memcpy(&h, it->p, sizeof(h));
    if (h.size < sizeof(h) || h.size > (size_t)(it->end - it->p))
        return GT__ERECORD;
    *type = h.type;
    *size = h.size;
    *rec = it->p;
    it->p += h.size;
    return 1;
}

int gt__rec_get(const uint8_t *rec, uint16_t size, void *out, size_t out_size)
{
    struct gt_rec h;
    size_t want;

    if (size < sizeof(h))
        return GT__ERECORD;
    memcpy(&h, rec, sizeof(h));
    want = gt__rec_size(h.type);
    if (want == 0 || want != out_size || h.size != size)
        return GT__ERECORD;
    if (h.type == GT_R_STRING) {
        if (size < want || size - want > GT_STRING_MAX)
            return GT__ERECORD;
    } else if (size != want) {
        return GT__ERECORD;
    }
    memcpy(out, rec, want);
    return 0;
}

int gt__recbuf_append(struct gt__recbuf *b, const void *rec, size_t size)
{
    if (b->len + size > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        uint8_t *d;
        while (cap < b->len + size)
            cap *= 2;
        d = gt__realloc(b->data, cap);
        if (!d)
            return -ENOMEM;
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, rec, size);
    b->len += size;
    b->count++;
    return 0;
}

int gt__recbuf_string(struct gt__recbuf *b, uint32_t id, const char *s, size_t len)
{
    struct gt_r_string r;
    size_t start = b->len;
    int rc;

    if (len > GT_STRING_MAX)
        return GT__ESIZE;
    r.h.type = GT_R_STRING;
    r.h.size = (uint16_t)(sizeof(r) + len);
    r.id = id;
    rc = gt__recbuf_append(b, &r, sizeof(r));
    if (rc < 0)
        return rc;
    b->count--; /* the text below completes the same record */
    rc = gt__recbuf_append(b, s, len);
    if (rc < 0) {
        b->len = start;
        return rc;
    }
    return 0;
}

void gt__recbuf_reset(struct gt__recbuf *b)
{
    b->len = 0;
    b->count = 0;
}

void gt__recbuf_free(struct gt__recbuf *b)
{
    gt__free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    b->count = 0;
}
