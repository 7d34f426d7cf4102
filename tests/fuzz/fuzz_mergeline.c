/*
 * Fuzz target: `gradtrace merge`'s event-line rewriter
 * (daemon/convert/mergeline.c), which reads trace files from anywhere.
 *
 * Properties: no crash, out-of-bounds access or undefined behaviour on any
 * input and any shift; a rewritten line fits the room the header promises
 * and is itself a line the rewriter accepts.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/convert/mergeline.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const int64_t deltas[] = {0, -1000000, 123456789012345, INT64_MAX / 4};
    struct gt__mline m = {.pid = 5000, .id_base = 7ull << 32,
                          .prefix = "rank 3 host \\\"h\\\": ", .prefix_len = 19};
    size_t cap = size + m.prefix_len + GT__MLINE_SLACK;
    char *out = malloc(cap), *again = malloc(cap + m.prefix_len + GT__MLINE_SLACK);
    ssize_t n;

    if (!out || !again)
        abort();
    m.delta_ns = deltas[size % 4];
    n = gt__mline_rewrite(&m, (const char *)data, size, out, cap);
    if (n > (ssize_t)cap)
        abort();
    if (n > 0) {
        m.delta_ns = 0;
        ssize_t k = gt__mline_rewrite(&m, out, (size_t)n, again,
                                      cap + m.prefix_len + GT__MLINE_SLACK);
        if (k == 0 || k == -EINVAL)
            abort();
    }
    free(out);
    free(again);
    return 0;
}
