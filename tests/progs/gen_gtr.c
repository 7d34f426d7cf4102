/*
 * gen_gtr: writes a synthetic .gtr stream (see gen_core.h) and prints, on
 * stdout as one JSON object, the counts its conversion must show.
 *
 *   gen_gtr -o OUT.gtr [--iterations N] [--layers L] [--worker] [--gpu]
 *           [--steps] [--ops] [--scale K] [--window IT] [--level Z]
 *           [--chunk-kb K]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen_core.h"

static int file_sink(void *ud, const void *data, size_t len)
{
    return fwrite(data, 1, len, ud) == len ? 0 : -1;
}

int main(int argc, char **argv)
{
    struct gen_opts o = {.iterations = 3, .layers = 2, .level = 1,
                         .chunk_kb = 256};
    const char *out = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-o") && v) {
            out = v;
            i++;
        } else if (!strcmp(a, "--iterations") && v) {
            o.iterations = strtoull(v, NULL, 10);
            i++;
        } else if (!strcmp(a, "--layers") && v) {
            o.layers = (uint32_t)strtoul(v, NULL, 10);
            i++;
        } else if (!strcmp(a, "--level") && v) {
            o.level = atoi(v);
            i++;
        } else if (!strcmp(a, "--window") && v) {
            o.window = strtoull(v, NULL, 10) + 1;
            i++;
        } else if (!strcmp(a, "--scale") && v) {
            o.scale = (uint32_t)strtoul(v, NULL, 10);
            i++;
        } else if (!strcmp(a, "--chunk-kb") && v) {
            o.chunk_kb = (uint32_t)strtoul(v, NULL, 10);
            i++;
        } else if (!strcmp(a, "--worker")) {
            o.worker = 1;
        } else if (!strcmp(a, "--gpu")) {
            o.gpu = 1;
        } else if (!strcmp(a, "--steps")) {
            o.steps = 1;
        } else if (!strcmp(a, "--ops")) {
            o.ops = 1;
        } else {
            fprintf(stderr, "gen_gtr: bad argument '%s'\n", a);
            return 2;
        }
    }
    if (!out || o.layers == 0 || o.chunk_kb == 0 || o.chunk_kb > 8192) {
        fprintf(stderr, "usage: gen_gtr -o OUT.gtr [--iterations N] "
                        "[--layers L] [--worker] [--gpu] [--steps] [--ops] [--scale K] "
                        "[--window IT] "
                        "[--level Z] [--chunk-kb K]\n");
        return 2;
    }
    FILE *f = fopen(out, "wb");
    if (!f) {
        perror(out);
        return 1;
    }
    struct gen_counts n;
    int rc = gen_run(&o, file_sink, f, &n);
    if (fclose(f) != 0)
        rc = -1;
    if (rc) {
        fprintf(stderr, "gen_gtr: failed writing %s\n", out);
        return 1;
    }
    printf("{\"iterations\":%llu,\"module_scopes\":%llu,\"nodes\":%llu,"
           "\"kernels\":%llu,\"api_calls\":%llu,\"ops\":%llu,"
           "\"layer_spans_per_pass\":%llu,\"chunks\":%llu,\"records\":%llu,"
           "\"bytes\":%llu,\"raw_bytes\":%llu}\n",
           (unsigned long long)n.iterations,
           (unsigned long long)n.module_scopes, (unsigned long long)n.nodes,
           (unsigned long long)n.kernels, (unsigned long long)n.api_calls,
           (unsigned long long)n.ops,
           (unsigned long long)n.layer_spans_per_pass,
           (unsigned long long)n.chunks, (unsigned long long)n.records,
           (unsigned long long)n.bytes, (unsigned long long)n.raw_bytes);
    return 0;
}
