/*
 * Fuzz target: arbitrary bytes as the records of chunks fed to the
 * converter (the first byte picks how the input is cut into chunks and a
 * tiny node-map cap, so eviction and multi-chunk state are exercised).
 * Invariant checked: whatever the records say, the converter produces at
 * least one file (the main one, or capture windows' files), and every file
 * it lists is valid JSON with a traceEvents array and the gradtrace
 * metadata (parsed back with cJSON); it never crashes or reads outside the
 * input (ASan/UBSan in the libFuzzer build). Files go to a private
 * directory made once per process and are removed after each input.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/codec.h"
#include "daemon/convert/convert.h"

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
    struct gt__conv *c = gt__conv_create(&o);
    if (!c)
        abort();
    struct gt__hello_info *h = calloc(1, sizeof(*h));
    h->h.pid = 1234;
    h->h.rank = -1;
    h->h.start_mono_ns = 1000000;
    strcpy(h->cmdline, "fuzz");
    if (gt__conv_hello(c, h))
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
        if (gt__conv_chunk(c, &ch, copy, n))
            abort();
        free(copy);
        ch.seq++;
        p += n;
        left -= n;
    }
    if (gt__conv_finish(c, NULL, 1))
        abort();
    const char *const *paths;
    size_t n = gt__conv_files(c, &paths);
    if (n == 0)
        abort();
    for (size_t i = 0; i < n; i++) {
        check_file(paths[i]);
        unlink(paths[i]);
    }
    gt__conv_free(c);
    return 0;
}
