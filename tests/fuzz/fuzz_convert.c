/*
 * Fuzz target: arbitrary bytes as the records of chunks fed to both
 * converter consumers through their interface (daemon/convert/consumer.h),
 * the Chrome-JSON consumer and the per-layer aggregation consumer (the first byte
 * picks how the input is cut into chunks and a tiny node-map cap, so
 * eviction and multi-chunk state are exercised). Invariants checked:
 * whatever the records say, the Chrome consumer produces at least one file
 * (the main one, or capture windows' files), and every file it lists is
 * valid JSON with a traceEvents array and the gradtrace metadata (parsed
 * back with cJSON); every row of the aggregation has a span or a GPU kernel; neither
 * crashes or reads outside the input (ASan/UBSan in the libFuzzer build).
 * Files go to a private directory made once per process and are removed
 * after each input.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/codec.h"
#include "daemon/convert/agg.h"
#include "daemon/convert/consumer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Parses one output file; aborts unless it is a trace. */
static void check_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        abort();
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)len + 1);
    if (fread(text, 1, (size_t)len, f) != (size_t)len)
        abort();
    fclose(f);
    text[len] = 0;
    cJSON *doc = cJSON_Parse(text);
    if (!doc || !cJSON_IsArray(cJSON_GetObjectItem(doc, "traceEvents")) ||
        !cJSON_IsObject(cJSON_GetObjectItem(doc, "gradtrace"))) {
        fprintf(stderr, "fuzz_convert: %s is not a valid trace\n", path);
        abort();
    }
    cJSON_Delete(doc);
    free(text);
}

static char dir[64];

static void remove_dir(void)
{
    rmdir(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[96];
    if (size < 1)
        return 0;
    if (!dir[0]) {
        strcpy(dir, "/tmp/gt-fuzz-convert-XXXXXX");
        if (!mkdtemp(dir))
            abort();
        atexit(remove_dir);
    }
    snprintf(path, sizeof(path), "%s/out.json", dir);
    struct gt__conv_opts o = {.out_path = path,
                             .max_file_bytes = 1ull << 40,
                             .max_file_events = 1ull << 40,
                             .max_pending_nodes = 1u + (data[0] & 7),
                             .keep_empty_main = 1};
    struct gt__agg agg;
    gt__agg_init(&agg);
    struct gt__consumer *k[2] = {gt__chrome_consumer_create(&o),
                              gt__agg_consumer_create(&agg)};
    if (!k[0] || !k[1])
        abort();
    struct gt__hello_info *h = calloc(1, sizeof(*h));
    h->h.pid = 1234;
    h->h.rank = -1;
    h->h.start_mono_ns = 1000000;
    strcpy(h->cmdline, "fuzz");
    for (int i = 0; i < 2; i++)
        if (k[i]->ops->hello(k[i], h))
            abort();
    free(h);
    size_t piece = 1 + (size_t)(data[0] >> 3) * 16;
    const uint8_t *p = data + 1;
    size_t left = size - 1;
    struct gt_chunk_header ch;
    memset(&ch, 0, sizeof(ch));
    while (left > 0) {
        size_t n = left < piece ? left : piece;
        /* The converter gets an exact copy, so ASan sees any overread. */
        uint8_t *copy = malloc(n);
        memcpy(copy, p, n);
        for (int i = 0; i < 2; i++)
            if (k[i]->ops->chunk(k[i], &ch, copy, n))
                abort();
        free(copy);
        ch.seq++;
        p += n;
        left -= n;
    }
    for (int i = 0; i < 2; i++)
        if (k[i]->ops->finish(k[i], NULL, 1))
            abort();
    const char *const *paths;
    size_t n = gt__conv_files(gt__chrome_consumer_conv(k[0]), &paths);
    if (n == 0)
        abort();
    for (size_t i = 0; i < n; i++) {
        check_file(paths[i]);
        unlink(paths[i]);
    }
    for (size_t i = 0; i < agg.n; i++)
        if (agg.layers[i].fwd_calls + agg.layers[i].rc_calls +
                agg.layers[i].bwd_spans + agg.layers[i].gpu_kernels == 0)
            abort();
    gt__consumer_free(k[0]);
    gt__consumer_free(k[1]);
    gt__agg_close(&agg);
    return 0;
}
