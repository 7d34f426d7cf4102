/*
 * Conversion throughput and memory: a generated multi-GB trace (the
 * synthetic training stream of tests/progs/gen_core.h) converted to JSON,
 * side by side with the cost of just decompressing the same input.
 *
 * Prints, for a small and a full-size input of the same stream:
 *   - JSON MB per CPU-second of the converter (the DESIGN.md budget is
 *     >= 1.5 GB/s per core) and peak RSS (budget: flat, <= 64 MB);
 *   - the framer alone (CRC + zstd decompression, no conversion);
 *   - `zstd -d` of the same compressed payloads, as an external reference.
 * The converter writes to /dev/null (GT__BENCH_CONVERT_DISK=1: to real files
 * under /tmp, rotated at the default size), each run in a child process so
 * its peak RSS is its own. Inputs live under /tmp and are deleted after.
 * Size: GT__BENCH_CONVERT_ITERS (default 30000 iterations, ~2.5 GB of JSON).
 * Never fails on time.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/codec.h"
#include "daemon/convert/convert.h"
#include "../progs/gen_core.h"

struct sinks {
    FILE *gtr;
    FILE *zst; /* the chunks' zstd payloads, concatenated */
    int hello_done;
};

static int bench_sink(void *ud, const void *data, size_t len)
{
    struct sinks *s = ud;
    if (fwrite(data, 1, len, s->gtr) != len)
        return -1;
    if (!s->hello_done) {
        s->hello_done = 1; /* the first write is the hello */
        return 0;
    }
    if (len > sizeof(struct gt_chunk_header) &&
        fwrite((const char *)data + sizeof(struct gt_chunk_header), 1,
               len - sizeof(struct gt_chunk_header), s->zst) !=
            len - sizeof(struct gt_chunk_header))
        return -1;
    return 0;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double tv(struct timeval t)
{
    return (double)t.tv_sec + (double)t.tv_usec / 1e6;
}

struct conv_ud {
    struct gt__conv *c;
};

static int c_hello(void *ud, const struct gt__hello_info *h)
{
    return gt__conv_hello(((struct conv_ud *)ud)->c, h);
}

static int c_chunk(void *ud, const struct gt_chunk_header *h,
                   const uint8_t *r, size_t n)
{
    return gt__conv_chunk(((struct conv_ud *)ud)->c, h, r, n);
}

static int null_hello(void *ud, const struct gt__hello_info *h)
{
    (void)ud;
    (void)h;
    return 0;
}

static int null_chunk(void *ud, const struct gt_chunk_header *h,
                      const uint8_t *r, size_t n)
{
    (void)h;
    (void)r;
    *(uint64_t *)ud += n;
    return 0;
}

/* Feeds the file through a framer. @return 0 or -1. */
static int feed_file(const char *path, struct gt__framer *f)
{
    static uint8_t buf[4 << 20];
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    ssize_t n;
    int rc = 0;
    while ((n = read(fd, buf, sizeof(buf))) > 0)
        if (gt__framer_feed(f, buf, (size_t)n)) {
            rc = -1;
            break;
        }
    close(fd);
    return n < 0 ? -1 : rc;
}

/* Child: converts path, writes "bytes events" to fd out. */
static int convert_child(const char *path, const char *outdir, int out)
{
    struct gt__conv_opts o = {.out_path = "/dev/null",
                             .max_file_bytes = UINT64_MAX >> 1,
                             .max_file_events = UINT64_MAX >> 1};
    if (outdir) {
        o = (struct gt__conv_opts){.out_dir = outdir, .stem = "bench"};
    }
    struct conv_ud ud = {gt__conv_create(&o)};
    struct gt__framer *f = gt__framer_create(GT__FRAMER_RESYNC, c_hello,
                                           c_chunk, &ud);
    if (!ud.c || !f || feed_file(path, f) ||
        gt__framer_finish(f) != 0 ||
        gt__conv_finish(ud.c, gt__framer_stats(f), 0) != 0)
        return 1;
    struct gt__conv_summary s;
    gt__conv_summary(ud.c, &s);
    char line[96];
    int n = snprintf(line, sizeof(line), "%llu %llu %llu\n",
                     (unsigned long long)s.bytes,
                     (unsigned long long)s.events,
                     (unsigned long long)s.files);
    if (write(out, line, (size_t)n) != n)
        return 1;
    if (outdir) {
        const char *const *paths;
        size_t k = gt__conv_files(ud.c, &paths);
        for (size_t i = 0; i < k; i++)
            unlink(paths[i]);
    }
    gt__framer_free(f);
    gt__conv_free(ud.c);
    return 0;
}

static void run_convert(const char *label, const char *path,
                        const char *outdir)
{
    int p[2];
    if (pipe(p))
        return;
    double t0 = now();
    pid_t pid = fork();
    if (pid == 0) {
        close(p[0]);
        _exit(convert_child(path, outdir, p[1]));
    }
    close(p[1]);
    char line[96] = {0};
    ssize_t n = read(p[0], line, sizeof(line) - 1);
    close(p[0]);
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) < 0 || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0 || n <= 0) {
        printf("  %-28s conversion failed\n", label);
        return;
    }
    double wall = now() - t0;
    double cpu = tv(ru.ru_utime) + tv(ru.ru_stime);
    unsigned long long bytes, events, files;
    if (sscanf(line, "%llu %llu %llu", &bytes, &events, &files) != 3)
        return;
    printf("  %-28s %8.1f MB JSON, %9llu events, %llu file(s): "
           "%6.2f s wall, %6.2f s cpu -> %7.1f MB/s per core "
           "(%.1f ns/event), peak RSS %.1f MB\n",
           label, (double)bytes / 1e6, events, files, wall, cpu,
           (double)bytes / 1e6 / cpu, cpu * 1e9 / (double)events,
           (double)ru.ru_maxrss / 1024.0);
}

static void run_decode_only(const char *path, double raw_mb)
{
    uint64_t raw = 0;
    struct gt__framer *f = gt__framer_create(GT__FRAMER_RESYNC, null_hello,
                                           null_chunk, &raw);
    struct rusage a, b;
    getrusage(RUSAGE_SELF, &a);
    double t0 = now();
    int rc = f ? feed_file(path, f) : -1;
    double wall = now() - t0;
    getrusage(RUSAGE_SELF, &b);
    gt__framer_free(f);
    double cpu = tv(b.ru_utime) - tv(a.ru_utime) + tv(b.ru_stime) -
                 tv(a.ru_stime);
    if (rc)
        return;
    printf("  %-28s %8.1f MB records out: %6.2f s wall, %6.2f s cpu -> "
           "%7.1f MB/s per core\n",
           "framer (crc + zstd) only", raw_mb, wall, cpu,
           (double)raw / 1e6 / cpu);
}

static void run_zstd_cli(const char *zst, double raw_mb)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "zstd -q -d -c '%s' > /dev/null", zst);
    if (system("command -v zstd >/dev/null 2>&1") != 0) {
        printf("  zstd -d: zstd not installed\n");
        return;
    }
    struct rusage a, b;
    getrusage(RUSAGE_CHILDREN, &a);
    double t0 = now();
    int rc = system(cmd);
    double wall = now() - t0;
    getrusage(RUSAGE_CHILDREN, &b);
    double cpu = tv(b.ru_utime) - tv(a.ru_utime) + tv(b.ru_stime) -
                 tv(a.ru_stime);
    if (rc != 0) {
        printf("  zstd -d failed\n");
        return;
    }
    printf("  %-28s %8.1f MB out: %6.2f s wall, %6.2f s cpu -> %7.1f MB/s "
           "per core\n",
           "zstd -d (same payloads)", raw_mb, wall, cpu, raw_mb / cpu);
}

static int generate(const char *gtr, const char *zst, uint64_t iters,
                    struct gen_counts *n)
{
    struct gen_opts o = {.iterations = iters, .layers = 12, .worker = 1,
                         .gpu = 1, .steps = 1, .level = 1, .chunk_kb = 1024};
    struct sinks s = {fopen(gtr, "wb"), fopen(zst, "wb"), 0};
    int rc = -1;
    if (s.gtr && s.zst)
        rc = gen_run(&o, bench_sink, &s, n);
    if (s.gtr && fclose(s.gtr))
        rc = -1;
    if (s.zst && fclose(s.zst))
        rc = -1;
    return rc;
}

int main(void)
{
    const char *e = getenv("GT__BENCH_CONVERT_ITERS");
    uint64_t iters = e ? strtoull(e, NULL, 10) : 30000;
    int disk = getenv("GT__BENCH_CONVERT_DISK") != NULL;
    char dir[] = "/tmp/gt-bench-convert-XXXXXX";
    if (!mkdtemp(dir) || iters < 8) {
        perror("bench_convert");
        return 1;
    }
    char gtr[128], zst[128];
    snprintf(gtr, sizeof(gtr), "%s/in.gtr", dir);
    snprintf(zst, sizeof(zst), "%s/in.zst", dir);
    printf("bench_convert: synthetic training stream (12 layers, GPU "
           "launches + kernels, backward on a worker thread)\n");
    int rc = 0;
    /* Two sizes: memory must not grow with the input (the small one is
     * already large enough to fill every bounded map). */
    uint64_t sizes[2] = {iters / 4, iters};
    for (int i = 0; i < 2; i++) {
        struct gen_counts n;
        double t0 = now();
        if (generate(gtr, zst, sizes[i], &n)) {
            printf("  generation failed\n");
            rc = 1;
            break;
        }
        double raw_mb = (double)n.raw_bytes / 1e6;
        printf(" %llu iterations: %.1f MB .gtr (%llu chunks, %.1f MB of "
               "records, %llu records), generated in %.1f s\n",
               (unsigned long long)sizes[i], (double)n.bytes / 1e6,
               (unsigned long long)n.chunks, raw_mb,
               (unsigned long long)n.records, now() - t0);
        run_convert("convert -> /dev/null", gtr, NULL);
        if (disk)
            run_convert("convert -> files in /tmp", gtr, dir);
        run_decode_only(gtr, raw_mb);
        run_zstd_cli(zst, raw_mb);
        unlink(gtr);
        unlink(zst);
    }
    rmdir(dir);
    return rc;
}
