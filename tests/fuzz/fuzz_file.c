/*
 * Fuzz target: a whole .gtr file through the framer in resync mode, fed in
 * pieces whose sizes come from the input itself, so framing across read
 * boundaries is exercised. Invariants checked: the framer never delivers a
 * chunk whose records run past raw_size, and the byte accounting adds up
 * (everything fed is either the hello, a delivered chunk, or skipped).
 */
#include <stdlib.h>
#include <string.h>

#include "common/codec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct acct {
    uint64_t chunk_bytes;
    uint64_t hello_bytes;
};

static int on_hello(void *ud, const struct gt__hello_info *hello)
{
    struct acct *a = ud;
    a->hello_bytes = hello->h.size;
    return 0;
}

static int on_chunk(void *ud, const struct gt_chunk_header *h,
                    const uint8_t *records, size_t raw_size)
{
    struct acct *a = ud;
    struct gt__rec_iter it;
    uint16_t type, rsize;
    const uint8_t *r;

    if (raw_size != h->raw_size)
        abort();
    a->chunk_bytes += sizeof(*h) + h->payload_size;
    gt__rec_iter_init(&it, records, raw_size);
    while (gt__rec_next(&it, &type, &rsize, &r) == 1)
        if (r + rsize > records + raw_size)
            abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct acct a = {0, 0};
    struct gt__framer *f;
    size_t off = 0, step = 1;
    int rc = 0;

    if (size == 0)
        return 0;
    f = gt__framer_create(GT__FRAMER_RESYNC, on_hello, on_chunk, &a);
    if (!f)
        return 0;
    step = 1 + data[0] % 97; /* piece size from the first byte */
    while (off < size && rc == 0) {
        size_t n = size - off < step ? size - off : step;
        rc = gt__framer_feed(f, data + off, n);
        off += n;
        step = step * 3 % 4099 + 1;
    }
    if (rc == 0) {
        const struct gt__framer_stats *s;
        int frc = gt__framer_finish(f);
        s = gt__framer_stats(f);
        if (frc != 0 && frc != GT__ETRUNC)
            abort(); /* resync mode reports only truncation at the end */
        if (a.hello_bytes + a.chunk_bytes + s->skipped_bytes != size)
            abort();
    }
    gt__framer_free(f);
    return 0;
}
