/*
 * The framer: a push decoder for a gradtrace stream or file (codec.h).
 *
 * Bytes are appended to one buffer; complete units (the hello, then
 * chunks) are cut from its front, verified and delivered. Memory is bounded
 * by the largest legal chunk (GT_CHUNK_MAX_PAYLOAD + header) plus one
 * decompressed payload (GT_CHUNK_MAX_RAW), whatever the input claims.
 *
 * Strict mode (sockets): the first bad byte kills the stream; the caller
 * closes the connection. Resync mode (files): a bad header or a chunk whose
 * CRC fails is skipped one byte at a time by scanning for the next chunk
 * magic whose header and CRC verify; a corrupt length can therefore never
 * swallow the good chunks after it. At end of input a header that claims
 * more bytes than remain is treated the same way before the leftovers are
 * reported as truncation.
 */
#include <errno.h>
#include <string.h>
#include <zstd.h>

#include "common/alloc.h"
#include "common/codec.h"

struct gt__framer {
    enum gt__framer_mode mode;
    gt__hello_fn on_hello;
    gt__chunk_fn on_chunk;
    void *ud;

    uint8_t *buf;        /* unconsumed bytes are buf[off..len) */
    size_t off, len, cap;
    uint8_t *raw;        /* decompression target */
    size_t raw_cap;
    ZSTD_DCtx *dctx;

    int have_hello;
    int dead;            /* strict mode: sticky error */
    int have_seq;
    uint64_t next_seq;
    struct gt__hello_info hello;
    struct gt__framer_stats stats;
};

struct gt__framer *gt__framer_create(enum gt__framer_mode mode,
                                   gt__hello_fn on_hello, gt__chunk_fn on_chunk,
                                   void *ud)
{
    struct gt__framer *f = gt__calloc(1, sizeof(*f));

    if (!f)
        return NULL;
    f->dctx = ZSTD_createDCtx();
    if (!f->dctx) {
        gt__free(f);
        return NULL;
    }
    f->mode = mode;
    f->on_hello = on_hello;
    f->on_chunk = on_chunk;
    f->ud = ud;
    return f;
}

void gt__framer_free(struct gt__framer *f)
{
    if (!f)
        return;
    ZSTD_freeDCtx(f->dctx);
    gt__free(f->buf);
    gt__free(f->raw);
    gt__free(f);
}

const struct gt__framer_stats *gt__framer_stats(const struct gt__framer *f)
{
    return &f->stats;
}

const struct gt__hello_info *gt__framer_hello(const struct gt__framer *f)
{
    return f->have_hello ? &f->hello : NULL;
}

static int append(struct gt__framer *f, const void *data, size_t len)
{
    if (f->off > 0 && (f->off == f->len || f->len + len > f->cap)) {
        memmove(f->buf, f->buf + f->off, f->len - f->off);
        f->len -= f->off;
        f->off = 0;
    }
    if (f->len + len > f->cap) {
        size_t cap = f->cap ? f->cap : 65536;
        uint8_t *b;
        while (cap < f->len + len)
            cap *= 2;
        b = gt__realloc(f->buf, cap);
        if (!b)
            return -ENOMEM;
        f->buf = b;
        f->cap = cap;
    }
    memcpy(f->buf + f->len, data, len);
    f->len += len;
    return 0;
}

static int fail(struct gt__framer *f, int err)
{
    f->stats.last_error = err;
    if (f->mode == GT__FRAMER_STRICT)
        f->dead = err;
    return err;
}

/* Resync: drop at least one byte, then everything before the next magic. */
static void skip_to_magic(struct gt__framer *f)
{
    static const uint8_t magic[4] = {'G', 'T', 'C', 'K'};
    size_t avail = f->len - f->off;
    const uint8_t *start = f->buf + f->off + 1;
    const uint8_t *hit;

    if (avail <= 1) {
        f->stats.skipped_bytes += avail;
        f->off = f->len;
        return;
    }
    hit = memmem(start, avail - 1, magic, sizeof(magic));
    if (hit) {
        f->stats.skipped_bytes += (size_t)(hit - (f->buf + f->off));
        f->off = (size_t)(hit - f->buf);
        return;
    }
    /* Keep a tail that may be the start of a magic split across reads. */
    {
        size_t keep = avail - 1 < 3 ? avail - 1 : 3;
        f->stats.skipped_bytes += avail - keep;
        f->off = f->len - keep;
    }
}

static int ensure_raw(struct gt__framer *f, size_t n)
{
    uint8_t *r;

    if (n <= f->raw_cap)
        return 0;
    r = gt__realloc(f->raw, n);
    if (!r)
        return -ENOMEM;
    f->raw = r;
    f->raw_cap = n;
    return 0;
}

/*
 * Cuts and delivers units from the buffer. eof: no more bytes will come,
 * so a unit that claims more than what remains is bad, not pending.
 * @return 0 (need more input or done), or an error / callback return.
 */
static int process(struct gt__framer *f, int eof)
{
    for (;;) {
        const uint8_t *p = f->buf + f->off;
        size_t avail = f->len - f->off;
        struct gt_chunk_header h;
        int rc;

        if (avail == 0)
            return 0;
        if (!f->have_hello) {
            ssize_t n = gt__hello_parse(p, avail, &f->hello);
            if (n == GT__ETRUNC)
                return 0;
            if (n < 0) {
                /* A stream that does not start with a hello is not ours. */
                f->dead = (int)n;
                f->stats.last_error = (int)n;
                return (int)n;
            }
            f->have_hello = 1;
            f->off += (size_t)n;
            if (f->on_hello && (rc = f->on_hello(f->ud, &f->hello)) < 0)
                return f->dead = rc;
            continue;
        }

        rc = gt__chunk_header_parse(p, avail, &h);
        if (rc == GT__ETRUNC && !eof)
            return 0;
        if (rc == 0 && avail < sizeof(h) + (size_t)h.payload_size) {
            if (!eof)
                return 0;
            rc = GT__ETRUNC;
        }
        if (rc == 0) {
            if ((rc = ensure_raw(f, h.raw_size ? h.raw_size : 1)) < 0)
                return rc;
            rc = gt__chunk_decode(f->dctx, &h, p, f->raw, f->raw_cap);
        }
        if (rc == -ENOMEM)
            return rc;
        if (rc < 0) {
            if (rc == GT__ECRC || rc == GT__ECORRUPT)
                f->stats.corrupt_chunks++;
            if (fail(f, rc) < 0 && f->mode == GT__FRAMER_STRICT)
                return rc;
            if (rc == GT__ETRUNC && avail < sizeof(h)) {
                /* Too short to be anything: leave it for finish(). */
                return 0;
            }
            skip_to_magic(f);
            continue;
        }

        f->off += sizeof(h) + h.payload_size;
        /* A gap no agent could produce (more chunks than GT__SEQ_JUMP_MAX,
         * or backwards) is one hostile or corrupt jump, not that many
         * lost chunks: counted apart so lost counts stay believable. */
        if (f->have_seq && h.seq > f->next_seq &&
            h.seq - f->next_seq <= GT__SEQ_JUMP_MAX)
            f->stats.chunks_lost += h.seq - f->next_seq;
        else if (f->have_seq && h.seq != f->next_seq)
            f->stats.seq_jumps++;
        f->have_seq = 1;
        f->next_seq = h.seq + 1;
        f->stats.chunks++;
        f->stats.records += h.record_count;
        f->stats.raw_bytes += h.raw_size;
        if (f->on_chunk && (rc = f->on_chunk(f->ud, &h, f->raw, h.raw_size)) < 0)
            return f->dead = rc;
    }
}

int gt__framer_feed(struct gt__framer *f, const void *data, size_t len)
{
    int rc;

    if (f->dead)
        return f->dead;
    f->stats.wire_bytes += len;
    if (len && (rc = append(f, data, len)) < 0)
        return rc;
    return process(f, 0);
}

int gt__framer_finish(struct gt__framer *f)
{
    int rc;
    size_t left;

    if (f->dead)
        return f->dead;
    rc = process(f, 1);
    if (rc < 0)
        return rc;
    left = f->len - f->off;
    if (left == 0)
        return f->have_hello ? 0 : GT__ETRUNC;
    f->stats.skipped_bytes += left;
    f->off = f->len;
    f->stats.last_error = GT__ETRUNC;
    return GT__ETRUNC;
}
