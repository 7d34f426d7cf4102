/*
 * `gradtrace convert`: a .gtr file -> Chrome-trace JSON file(s).
 *
 * The file is fed to a framer in GT__FRAMER_RESYNC mode in fixed blocks, so
 * memory stays bounded for any input size and a corrupt chunk costs only
 * itself. "Nothing readable" (exit 1) means: no valid hello, or a file with
 * bytes after the hello of which not one chunk decoded. A file that merely
 * ends early converts what is whole and is marked truncated in the trace.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/codec.h"
#include "daemon/cli/cli.h"
#include "daemon/convert/convert.h"

#define BLOCK (4u << 20)

static const char usage[] =
    "usage: gradtrace convert IN.gtr [-o OUT.json] [--max-file-mb N]\n"
    "                         [--max-file-events N] [--quiet]\n"
    "\n"
    "Converts a recorded gradtrace stream to Chrome Trace Event JSON that\n"
    "Perfetto and chrome://tracing load. Output rotates to OUT.1.json,\n"
    "OUT.2.json, ... past the size or event limit (default 200 MB, 4M\n"
    "events); every file is a complete trace. Default OUT: IN with .gtr\n"
    "replaced by .json.\n"
    "\n"
    "Truncated or partly corrupt input converts what is whole; the trace's\n"
    "metadata says what was lost.\n"
    "\n"
    "exit status: 0 converted, 1 nothing readable or output failed,\n"
    "2 usage error\n";

struct run {
    struct gt__conv *conv;
    int err; /* first converter error */
};

static int on_hello(void *ud, const struct gt__hello_info *hello)
{
    struct run *r = ud;
    int rc = gt__conv_hello(r->conv, hello);
    if (rc)
        r->err = rc;
    return rc;
}

static int on_chunk(void *ud, const struct gt_chunk_header *h,
                    const uint8_t *records, size_t raw_size)
{
    struct run *r = ud;
    int rc = gt__conv_chunk(r->conv, h, records, raw_size);
    if (rc)
        r->err = rc;
    return rc;
}

static int parse_u64(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || *s == '-')
        return -EINVAL;
    *out = v;
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void progress(uint64_t done, uint64_t total, double t0, int final)
{
    int width = 30;
    double frac = total ? (double)done / (double)total : 1.0;
    int fill = (int)(frac * width);
    double el = now_s() - t0;
    fprintf(stderr, "\r[%.*s%*s] %3d%% %6.1f MB/s read", fill,
            "==============================", width - fill, "",
            (int)(frac * 100), el > 0 ? (double)done / el / 1e6 : 0.0);
    if (final)
        fputs("\r\033[K", stderr);
}

/* Default output: IN minus .gtr plus .json. */
static char *default_out(const char *in)
{
    size_t n = strlen(in);
    if (n > 4 && strcmp(in + n - 4, ".gtr") == 0)
        n -= 4;
    char *out = gt__malloc(n + 6);
    if (out) {
        memcpy(out, in, n);
        memcpy(out + n, ".json", 6);
    }
    return out;
}

int gt__cmd_convert(int argc, char **argv)
{
    const char *in = NULL, *out = NULL;
    uint64_t mb = 0, events = 0;
    int quiet = 0, status = 1, fd = -1, rc;
    char *out_alloc = NULL;
    uint8_t *buf = NULL;
    struct gt__framer *fr = NULL;
    struct run run = {0};

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage, stdout);
            return 0;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (++i >= argc)
                goto out_usage_missing;
            out = argv[i];
        } else if (!strcmp(a, "--max-file-mb") ||
                   !strcmp(a, "--max-file-events")) {
            if (++i >= argc)
                goto out_usage_missing;
            uint64_t *dst = a[11] == 'm' ? &mb : &events;
            if (parse_u64(argv[i], dst) || *dst == 0) {
                fprintf(stderr, "gradtrace convert: %s wants a positive "
                                "integer, got '%s'\n", a, argv[i]);
                return 2;
            }
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            quiet = 1;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "gradtrace convert: unknown option '%s'\n%s", a,
                    usage);
            return 2;
        } else if (!in) {
            in = a;
        } else {
            fprintf(stderr, "gradtrace convert: one input file only "
                            "('%s' and '%s')\n", in, a);
            return 2;
        }
    }
    if (!in) {
        fprintf(stderr, "gradtrace convert: no input file\n%s", usage);
        return 2;
    }
    if (mb > UINT64_MAX >> 20) {
        fprintf(stderr, "gradtrace convert: --max-file-mb too large\n");
        return 2;
    }

    fd = open(in, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "gradtrace convert: %s: %s\n", in, strerror(errno));
        goto out;
    }
    struct stat st;
    uint64_t total = fstat(fd, &st) == 0 ? (uint64_t)st.st_size : 0;
    if (!out && !(out = out_alloc = default_out(in)))
        goto out_nomem;
    struct stat ost;
    if (stat(out, &ost) == 0 && ost.st_dev == st.st_dev &&
        ost.st_ino == st.st_ino) {
        /* Opening the output truncates it: it must not be the input. */
        fprintf(stderr, "gradtrace convert: output %s is the input file\n",
                out);
        goto out;
    }
    struct gt__conv_opts opts = {
        .out_path = out,
        .max_file_bytes = mb << 20,
        .max_file_events = events,
        /* The user named the output: it exists afterwards, even when the
         * input held only capture windows or nothing at all. */
        .keep_empty_main = 1,
    };
    run.conv = gt__conv_create(&opts);
    buf = gt__malloc(BLOCK);
    fr = gt__framer_create(GT__FRAMER_RESYNC, on_hello, on_chunk, &run);
    if (!run.conv || !buf || !fr)
        goto out_nomem;

    int tty = !quiet && isatty(2);
    double t0 = now_s(), last = t0;
    uint64_t done = 0;
    for (;;) {
        ssize_t n = read(fd, buf, BLOCK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            fprintf(stderr, "gradtrace convert: %s: %s\n", in,
                    strerror(errno));
            goto out;
        }
        if (n == 0)
            break;
        done += (uint64_t)n;
        rc = gt__framer_feed(fr, buf, (size_t)n);
        if (rc) {
            if (run.err)
                fprintf(stderr, "gradtrace convert: writing %s: %s\n", out,
                        gt__strerror(run.err));
            else
                fprintf(stderr, "gradtrace convert: %s: not a gradtrace "
                                "stream (%s)\n", in, gt__strerror(rc));
            goto out;
        }
        if (tty && now_s() - last > 0.1) {
            progress(done, total, t0, 0);
            last = now_s();
        }
    }
    if (tty)
        progress(done, total, t0, 1);
    int fin = gt__framer_finish(fr);
    const struct gt__framer_stats *stats = gt__framer_stats(fr);
    if (!gt__framer_hello(fr)) {
        fprintf(stderr, "gradtrace convert: %s: %s\n", in,
                done == 0 ? "empty file"
                          : "not a gradtrace stream (no complete header)");
        goto out;
    }
    int truncated = fin == GT__ETRUNC;
    rc = gt__conv_finish(run.conv, stats, truncated);
    if (rc) {
        fprintf(stderr, "gradtrace convert: writing %s: %s\n", out,
                gt__strerror(rc));
        goto out;
    }
    struct gt__conv_summary sum;
    gt__conv_summary(run.conv, &sum);
    const char *const *paths;
    size_t nfiles = gt__conv_files(run.conv, &paths);
    int nothing = stats->chunks == 0 && stats->skipped_bytes > 0;
    if (!quiet || nothing) {
        fprintf(stderr,
                "gradtrace convert: %s: %" PRIu64 " events from %" PRIu64
                " chunks; lost %" PRIu64 " events, %" PRIu64 " cupti, %"
                PRIu64 " chunks; %" PRIu64 " corrupt chunks%s; %zu file%s: "
                "%s%s\n",
                in, sum.events, stats->chunks, sum.lost_events,
                sum.lost_cupti, sum.lost_chunks + stats->chunks_lost,
                stats->corrupt_chunks, truncated ? "; truncated" : "",
                nfiles, nfiles == 1 ? "" : "s", nfiles ? paths[0] : "",
                nfiles > 1 ? " ..." : "");
        /* Rotated parts and capture windows: every file, one a line. */
        for (size_t i = 1; i < nfiles && !quiet; i++)
            fprintf(stderr, "gradtrace convert: file: %s\n", paths[i]);
    }
    status = nothing ? 1 : 0;
    goto out;

out_usage_missing:
    fprintf(stderr, "gradtrace convert: %s needs a value\n", argv[argc - 1]);
    return 2;
out_nomem:
    fprintf(stderr, "gradtrace convert: out of memory\n");
out:
    gt__framer_free(fr);
    gt__conv_free(run.conv);
    gt__free(buf);
    gt__free(out_alloc);
    if (fd >= 0)
        close(fd);
    return status;
}
