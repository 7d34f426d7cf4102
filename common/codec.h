/*
 * Codec for the gradtrace wire format (include/gradtrace/wire.h), shared by
 * the agent, the daemon, the CLI, the fuzzers and the tests.
 *
 * Three layers:
 *   - chunk encode/decode: one chunk <-> a buffer of records;
 *   - record iteration over a decoded buffer, every length checked;
 *   - the framer: a push decoder that takes bytes as they come (socket reads
 *     or file blocks), checks the hello, cuts chunks, verifies and
 *     decompresses them, detects sequence gaps and, in resync mode, skips
 *     corrupt bytes to the next valid chunk.
 *
 * Everything decoding treats its input as hostile: no read outside the
 * given bytes, no allocation sized by an unchecked field.
 *
 * Errors: functions return 0 or a negative code; codes below -GT__E_BASE are
 * this codec's (GT_E*), others are negative errno values. gt__strerror()
 * names both.
 */
#ifndef GRADTRACE_COMMON_CODEC_H
#define GRADTRACE_COMMON_CODEC_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "gradtrace/wire.h"

#define GT__WUR __attribute__((warn_unused_result))

#define GT__E_BASE 1000
enum gt__codec_error {
    GT__ETRUNC = -(GT__E_BASE + 1),    /* input ends inside a header/payload */
    GT__EMAGIC = -(GT__E_BASE + 2),    /* bad magic */
    GT__EVERSION = -(GT__E_BASE + 3),  /* unsupported major version */
    GT__ECRC = -(GT__E_BASE + 4),      /* checksum mismatch */
    GT__ESIZE = -(GT__E_BASE + 5),     /* a length field is out of bounds */
    GT__ECORRUPT = -(GT__E_BASE + 6),  /* payload does not decode */
    GT__ERECORD = -(GT__E_BASE + 7),   /* a record's size is invalid */
    GT__ENOSPACE = -(GT__E_BASE + 8),  /* caller's output buffer too small */
};

/* @return a static one-line description of a GT_E* code or -errno. */
const char *gt__strerror(int err);

/* CRC-32C (Castagnoli) of buf, continuing from crc (start with 0). */
uint32_t gt__crc32c(uint32_t crc, const void *buf, size_t len);
/* The table-driven CRC-32C that gt__crc32c falls back to without SSE4.2
 * (exported so the tests check it on machines that have SSE4.2). */
uint32_t gt__crc32c_soft(uint32_t crc, const void *buf, size_t len);

/* ------------------------------------------------------------ the hello */

struct gt__hello_info {
    struct gt_hello h;            /* host byte order copy */
    char hostname[256];           /* NUL-terminated, truncated if longer */
    char cmdline[GT_HELLO_MAX_SIZE]; /* NUL-terminated; args joined by ' ' */
};

/*
 * Writes a hello into out. hostname and cmdline (argv joined by NUL bytes,
 * cmdline_len bytes) are cut to fit GT_HELLO_MAX_SIZE.
 * @return bytes written, or GT__ENOSPACE when out_cap is too small.
 */
GT__WUR ssize_t gt__hello_encode(const struct gt_hello *fields,
                               const char *hostname, const char *cmdline,
                               size_t cmdline_len, void *out, size_t out_cap);

/*
 * Parses and validates a hello at the start of buf.
 * @return bytes consumed (> 0), GT__ETRUNC if more bytes are needed,
 *         GT__EMAGIC, GT__EVERSION or GT__ESIZE.
 */
GT__WUR ssize_t gt__hello_parse(const void *buf, size_t len,
                              struct gt__hello_info *out);

/* ------------------------------------------------------------ chunks */

/* Worst-case encoded size of a chunk holding raw_size record bytes. */
size_t gt__chunk_bound(size_t raw_size);

/*
 * Encodes records[0..raw_size) as one chunk into out. level <= 0 stores the
 * records uncompressed (GT_CHUNK_RAW); otherwise zstd at that level using
 * cctx (a ZSTD_CCtx *, reused across calls; may not be NULL then).
 * Thread: any, one cctx per thread.
 * @return chunk bytes written, GT__ESIZE if raw_size > GT_CHUNK_MAX_RAW,
 *         GT__ENOSPACE if out_cap < gt__chunk_bound(raw_size).
 */
GT__WUR ssize_t gt__chunk_encode(void *cctx, int level, const void *records,
                               size_t raw_size, uint32_t record_count,
                               uint64_t seq, uint64_t first_ns, void *out,
                               size_t out_cap);

/*
 * Validates a chunk header at buf (magic, major, header_size, raw and
 * payload size limits, reserved fields) and copies it to *out.
 * @return 0, GT__ETRUNC, GT__EMAGIC, GT__EVERSION or GT__ESIZE.
 */
GT__WUR int gt__chunk_header_parse(const void *buf, size_t len,
                                 struct gt_chunk_header *out);

/*
 * Verifies the CRC of a whole chunk (header + payload at buf) and
 * decompresses its payload into raw (capacity raw_cap >= h->raw_size).
 * dctx is a ZSTD_DCtx * (may be NULL for GT_CHUNK_RAW chunks).
 * @return 0, GT__ECRC, GT__ECORRUPT (payload does not decompress to exactly
 *         raw_size bytes), GT__ENOSPACE.
 */
GT__WUR int gt__chunk_decode(void *dctx, const struct gt_chunk_header *h,
                           const void *buf, void *raw, size_t raw_cap);

/* ------------------------------------------------------------ records */

struct gt__rec_iter {
    const uint8_t *p;
    const uint8_t *end;
};

static inline void gt__rec_iter_init(struct gt__rec_iter *it, const void *raw,
                                    size_t len)
{
    it->p = (const uint8_t *)raw;
    it->end = it->p + len;
}

/*
 * Steps to the next record. On 1, *type and *size describe it and *rec
 * points at its first byte (the struct gt_rec header), size bytes valid.
 * @return 1 record, 0 end of buffer, GT__ERECORD when a record's size is
 *         below 4 or runs past the buffer (the rest is then unreadable).
 */
GT__WUR int gt__rec_next(struct gt__rec_iter *it, uint16_t *type, uint16_t *size,
                       const uint8_t **rec);

/*
 * The exact size a fixed record type must have, the minimum for
 * variable-sized types (GT_R_STRING), 0 for types this build does not know.
 */
size_t gt__rec_size(uint16_t type);

/* Name of a record type, "unknown" for others. */
const char *gt__rec_name(uint16_t type);

/*
 * Copies a record of known type into out (a struct of gt__rec_size(type)
 * bytes) after checking its size. For GT_R_STRING, *text and *text_len
 * (which may be NULL for other types) receive the string bytes.
 * @return 0 or GT__ERECORD when the size does not match the type.
 */
GT__WUR int gt__rec_get(const uint8_t *rec, uint16_t size, void *out,
                      size_t out_size);

/* Appending records: a growable buffer for tests, the daemon and tools. */
struct gt__recbuf {
    uint8_t *data;
    size_t len;
    size_t cap;
    uint32_t count;
};

/* @return 0 or -ENOMEM. rec's h.size must equal size. */
GT__WUR int gt__recbuf_append(struct gt__recbuf *b, const void *rec, size_t size);
/* Appends a GT_R_STRING record. @return 0, -ENOMEM or GT__ESIZE. */
GT__WUR int gt__recbuf_string(struct gt__recbuf *b, uint32_t id, const char *s,
                            size_t len);
void gt__recbuf_reset(struct gt__recbuf *b);
void gt__recbuf_free(struct gt__recbuf *b);

/* ------------------------------------------------------------ framer */

/* The largest sequence gap counted as lost chunks: 2^24 chunks of up to
 * 1 MiB is 16 TiB of records, more than any stream sends. */
#define GT__SEQ_JUMP_MAX (1ull << 24)

enum gt__framer_mode {
    GT__FRAMER_STRICT = 0, /* socket: first error is final */
    GT__FRAMER_RESYNC = 1, /* file: skip corrupt bytes to the next chunk */
};

struct gt__framer_stats {
    uint64_t chunks;          /* chunks decoded and delivered */
    uint64_t records;         /* records in delivered chunks (header count) */
    uint64_t raw_bytes;       /* decompressed bytes delivered */
    uint64_t wire_bytes;      /* bytes fed */
    uint64_t chunks_lost;     /* sum of sequence gaps */
    uint64_t corrupt_chunks;  /* chunks rejected (CRC, size, zstd) */
    uint64_t skipped_bytes;   /* bytes skipped while resynchronising */
    uint64_t seq_jumps;       /* sequence jumps too large (or backwards)
                               * to be lost chunks: not counted as lost */
    int last_error;           /* most recent error seen (0 if none) */
};

/*
 * Called once per valid chunk with its header and its decompressed records
 * (valid until the callback returns). A negative return stops feeding and
 * is returned by gt__framer_feed.
 */
typedef int (*gt__chunk_fn)(void *ud, const struct gt_chunk_header *h,
                           const uint8_t *records, size_t raw_size);
/* Called once when the hello has been parsed; negative stops feeding. */
typedef int (*gt__hello_fn)(void *ud, const struct gt__hello_info *hello);

struct gt__framer;

/* @return a framer, or NULL when out of memory. */
struct gt__framer *gt__framer_create(enum gt__framer_mode mode,
                                   gt__hello_fn on_hello, gt__chunk_fn on_chunk,
                                   void *ud);
void gt__framer_free(struct gt__framer *f);

/*
 * Feeds len bytes. Complete chunks are delivered through on_chunk before
 * this returns; a partial chunk is kept for the next call.
 * @return 0, or in strict mode the first decode error, or a callback's
 *         negative return; after either the framer is dead and every later
 *         call (feed or finish) returns the same code without delivering. In resync mode decode errors are counted in the stats
 *         and skipped; only a bad hello is returned.
 */
GT__WUR int gt__framer_feed(struct gt__framer *f, const void *data, size_t len);

/*
 * Declares end of input. @return 0 when input ended on a chunk boundary,
 * GT__ETRUNC when bytes of an incomplete hello or chunk were left over
 * (counted in skipped_bytes), or the strict-mode error.
 */
GT__WUR int gt__framer_finish(struct gt__framer *f);

const struct gt__framer_stats *gt__framer_stats(const struct gt__framer *f);
/* The hello once parsed, else NULL. */
const struct gt__hello_info *gt__framer_hello(const struct gt__framer *f);

/* ------------------------------------------------------------ helpers */

/* Little-endian host assumed (x86-64, aarch64); checked at build time. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gradtrace's wire format is little-endian; big-endian hosts unsupported"
#endif

#endif /* GRADTRACE_COMMON_CODEC_H */
