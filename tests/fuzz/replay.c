/*
 * Replays a fuzz target's corpus without libFuzzer, so `make test` runs
 * every checked-in input (seeds and past crashers) on each build.
 * Usage: replay-binary DIR... (files directly in each DIR).
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0, n;

    if (!f) {
        fprintf(stderr, "replay: %s: cannot open\n", path);
        return -1;
    }
    do {
        if (len == cap) {
            uint8_t *b;
            cap = cap ? cap * 2 : 65536;
            b = realloc(buf, cap);
            if (!b) {
                free(buf);
                fclose(f);
                return -1;
            }
            buf = b;
        }
        n = fread(buf + len, 1, cap - len, f);
        len += n;
    } while (n > 0);
    fclose(f);
    LLVMFuzzerTestOneInput(buf, len);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    int files = 0;

    for (int i = 1; i < argc; i++) {
        DIR *d = opendir(argv[i]);
        struct dirent *e;
        if (!d) {
            fprintf(stderr, "replay: %s: no corpus directory\n", argv[i]);
            return 1;
        }
        while ((e = readdir(d))) {
            char path[4096];
            if (e->d_name[0] == '.')
                continue;
            snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
            if (run_file(path) < 0)
                return 1;
            files++;
        }
        closedir(d);
    }
    printf("replay %s: %d inputs, no crash\n", argc > 1 ? argv[1] : "-", files);
    return 0;
}
