/*
 * `gradtrace convert`: a .gtr file -> Chrome-trace JSON file(s).
 *
 * The Chrome-JSON consumer is fed by gt__convert_file (daemon/convert/consumer.h),
 * which reads the file in fixed blocks through a framer in resync mode, so
 * memory stays bounded for any input size and a corrupt chunk costs only
 * itself. "Nothing readable" (exit 1) means: no valid hello, or a file with
 * bytes after the hello of which not one chunk decoded. A file that merely
 * ends early converts what is whole and is marked truncated in the trace.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/codec.h"
#include "common/util.h"
#include "daemon/cli/cli.h"
#include "daemon/convert/repair.h"
#include "daemon/convert/names.h"
#include "daemon/convert/consumer.h"

static const char usage[] =
    "usage: gradtrace convert IN.gtr [-o OUT.json] [--max-file-mb N]\n"
    "                         [--max-file-events N] [--quiet]\n"
    "       gradtrace convert --repair TRACE.json...\n"
    "\n"
    "Converts a recorded gradtrace stream to Chrome Trace Event JSON that\n"
    "Perfetto and chrome://tracing load. Output rotates to OUT.1.json,\n"
    "OUT.2.json, ... past the size or event limit (default 200 MB, 4M\n"
    "events); every file is a complete trace. Default OUT: IN with .gtr\n"
    "replaced by .pt.trace.json (rotating to IN.1.pt.trace.json, ...).\n"
    "\n"
    "Truncated or partly corrupt input converts what is whole; the trace's\n"
    "metadata says what was lost.\n"
    "\n"
    "--repair finishes trace files a killed daemon left unfinished, in\n"
    "place: cut back to their last whole event, valid, marked repaired and\n"
    "truncated (finished files are left alone; gradtraced does this itself\n"
    "at start).\n"
    "\n"
    "exit status: 0 converted, 1 nothing readable or output failed,\n"
    "2 usage error\n";

/* What the command line asked for. */
struct convert_args {
    const char *in, *out;
    uint64_t mb, events;
    int quiet, repair;
    char **files;          /* --repair: the files */
    int nfiles;
};

/* Progress bar state: drawn on a terminal only, at most every 0.1 s. */
struct progress {
    int tty;
    uint64_t t0, last;     /* monotonic ns */
};

static void progress_draw(uint64_t done, uint64_t total, uint64_t t0,
                          int final)
{
    int width = 30;
    double frac = total ? (double)done / (double)total : 1.0;
    int fill = (int)(frac * width);
    double el = (double)(gt__mono_ns() - t0) / 1e9;
    fprintf(stderr, "\r[%.*s%*s] %3d%% %6.1f MB/s read", fill,
            "==============================", width - fill, "",
            (int)(frac * 100), el > 0 ? (double)done / el / 1e6 : 0.0);
    if (final)
        fputs("\r\033[K", stderr);
}

static void on_progress(void *ud, uint64_t done, uint64_t total)
{
    struct progress *p = ud;
    uint64_t now = gt__mono_ns();
    if (now - p->last > 100000000u) {
        progress_draw(done, total, p->t0, 0);
        p->last = gt__mono_ns();
    }
}

/* Default output: IN minus .gtr plus .pt.trace.json (Kineto's suffix). */
static char *default_out(const char *in)
{
    size_t n = strlen(in);
    if (n > 4 && strcmp(in + n - 4, ".gtr") == 0)
        n -= 4;
    char *out = gt__malloc(n + sizeof(GT__TRACE_EXT));
    if (out) {
        memcpy(out, in, n);
        memcpy(out + n, GT__TRACE_EXT, sizeof(GT__TRACE_EXT));
    }
    return out;
}

enum { OPT_MAX_MB = 256, OPT_MAX_EVENTS, OPT_REPAIR };

static const struct option convert_opts[] = {
    {"help", no_argument, NULL, 'h'},
    {"output", required_argument, NULL, 'o'},
    {"max-file-mb", required_argument, NULL, OPT_MAX_MB},
    {"max-file-events", required_argument, NULL, OPT_MAX_EVENTS},
    {"repair", no_argument, NULL, OPT_REPAIR},
    {"quiet", no_argument, NULL, 'q'},
    {NULL, 0, NULL, 0},
};

/* A positive count for option name. @return 0, or 2 (message printed). */
static int positive(const char *name, const char *v, uint64_t *out)
{
    if (gt__parse_u64(v, 1, UINT64_MAX, out) == 0)
        return 0;
    fprintf(stderr, "gradtrace convert: %s wants a positive integer, got "
                    "'%s'\n", name, v);
    return 2;
}

/*
 * Parses argv into *a. @return -1 to go on, or the exit status: 0 after
 * --help, 2 on a usage error (message printed).
 */
static int parse_args(int argc, char **argv, struct convert_args *a)
{
    int ch;
    optind = 0; /* glibc: rescan from argv[1], whatever ran before */
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":ho:q", convert_opts, NULL)) != -1) {
        switch (ch) {
        case 'h':
            fputs(usage, stdout);
            return 0;
        case 'o':
            a->out = optarg;
            break;
        case OPT_MAX_MB:
            if (positive("--max-file-mb", optarg, &a->mb))
                return 2;
            break;
        case OPT_MAX_EVENTS:
            if (positive("--max-file-events", optarg, &a->events))
                return 2;
            break;
        case 'q':
            a->quiet = 1;
            break;
        case OPT_REPAIR:
            a->repair = 1;
            break;
        case ':':
            fprintf(stderr, "gradtrace convert: %s needs a value\n",
                    argv[optind - 1]);
            return 2;
        default:
            return gt__cli_usage_error("gradtrace convert", "unknown option '%s'",
                                       argv[optind - 1]);
        }
    }
    if (optind >= argc) {
        return gt__cli_usage_error("gradtrace convert", "no input file");
    }
    if (a->repair) {
        a->files = argv + optind;
        a->nfiles = argc - optind;
        return -1;
    }
    if (argc - optind > 1) {
        fprintf(stderr, "gradtrace convert: one input file only "
                        "('%s' and '%s')\n", argv[optind], argv[optind + 1]);
        return 2;
    }
    a->in = argv[optind];
    if (a->mb > UINT64_MAX >> 20) {
        fprintf(stderr, "gradtrace convert: --max-file-mb too large\n");
        return 2;
    }
    return -1;
}

/* Opening the output truncates it: it must not be the input. */
static int same_file(const char *in, const char *out)
{
    struct stat ist, ost;
    return stat(in, &ist) == 0 && stat(out, &ost) == 0 &&
           ost.st_dev == ist.st_dev && ost.st_ino == ist.st_ino;
}

/* Says why gt__convert_file stopped. */
static void report_failure(const struct convert_args *a, int rc,
                           const struct gt__convert_info *info)
{
    char why[160];

    switch (info->stage) {
    case GT__CONVERT_CONSUMER:
        fprintf(stderr, "gradtrace convert: writing %s: %s\n", a->out,
                gt__strerror(rc));
        break;
    case GT__CONVERT_STREAM:
    case GT__CONVERT_NO_HELLO:
        fprintf(stderr, "gradtrace convert: %s: %s\n", a->in,
                gt__cli_gtr_why(a->in, rc, info, why, sizeof(why)));
        break;
    default:
        fprintf(stderr, "gradtrace convert: %s: %s\n", a->in, strerror(-rc));
        break;
    }
}

/* The summary line (and every file after the first, one a line).
 * @return the exit status: 1 when nothing was readable. */
static int print_summary(const struct convert_args *a, struct gt__conv *conv,
                         const struct gt__convert_info *info)
{
    const struct gt__framer_stats *stats = &info->stats;
    struct gt__conv_summary sum;
    const char *const *paths;
    size_t nfiles = gt__conv_files(conv, &paths);
    int nothing = stats->chunks == 0 && stats->skipped_bytes > 0;

    gt__conv_summary(conv, &sum);
    if (a->quiet && !nothing)
        return 0;
    fprintf(stderr,
            "gradtrace convert: %s: %" PRIu64 " events from %" PRIu64
            " chunks; lost %" PRIu64 " events, %" PRIu64 " cupti, %" PRIu64
            " chunks; %" PRIu64 " corrupt chunks%s; %zu file%s: %s%s\n",
            a->in, sum.events, stats->chunks, sum.lost_events, sum.lost_cupti,
            sum.lost_chunks + stats->chunks_lost, stats->corrupt_chunks,
            info->truncated || !gt__conv_goodbye(conv) ? "; truncated" : "",
            nfiles,
            nfiles == 1 ? "" : "s", nfiles ? paths[0] : "",
            nfiles > 1 ? " ..." : "");
    /* Rotated parts and capture windows: every file, one a line. */
    for (size_t i = 1; i < nfiles && !a->quiet; i++)
        fprintf(stderr, "gradtrace convert: file: %s\n", paths[i]);
    return nothing ? 1 : 0;
}

/* --repair: each file finished in place. @return the exit status. */
static int repair_files(const struct convert_args *a)
{
    int status = 0;

    for (int i = 0; i < a->nfiles; i++) {
        struct gt__repair_info info;
        int rc = gt__trace_repair(a->files[i], &info);

        if (rc > 0 && !a->quiet)
            fprintf(stderr, "gradtrace convert: repaired %s: %" PRIu64
                    " events kept, %" PRIu64 " bytes cut\n", a->files[i],
                    info.events, info.cut_bytes);
        else if (rc == 0 && !a->quiet)
            fprintf(stderr, "gradtrace convert: %s is whole\n", a->files[i]);
        if (rc < 0) {
            fprintf(stderr, "gradtrace convert: cannot repair %s: %s\n",
                    a->files[i], rc == -EINVAL ? "not a gradtrace trace"
                                 : rc == -EBUSY ? "a live writer holds it"
                                                : strerror(-rc));
            status = 1;
        }
    }
    return status;
}

int gt__cmd_convert(int argc, char **argv)
{
    struct convert_args a = {0};
    struct progress pr = {0};
    struct gt__convert_info info = {0};
    struct gt__consumer *consumer = NULL;
    char *out_alloc = NULL;
    int status, rc;

    if ((status = parse_args(argc, argv, &a)) >= 0)
        return status;
    if (a.repair)
        return repair_files(&a);
    status = 1;
    if (!a.out && !(a.out = out_alloc = default_out(a.in)))
        goto out_nomem;
    if (same_file(a.in, a.out)) {
        fprintf(stderr, "gradtrace convert: output %s is the input file\n",
                a.out);
        goto out;
    }
    struct gt__conv_opts opts = {
        .out_path = a.out,
        .max_file_bytes = a.mb << 20,
        .max_file_events = a.events,
        /* The user named the output: it exists afterwards, even when the
         * input held only capture windows or nothing at all. */
        .keep_empty_main = 1,
    };
    if (!(consumer = gt__chrome_consumer_create(&opts)))
        goto out_nomem;
    pr.tty = !a.quiet && isatty(2);
    pr.t0 = pr.last = gt__mono_ns();
    if (pr.tty) {
        info.progress = on_progress;
        info.progress_ud = &pr;
    }
    rc = gt__convert_file(a.in, &consumer, 1, &info);
    if (pr.tty && info.read)
        progress_draw(info.read, info.size, pr.t0, 1);
    if (rc)
        report_failure(&a, rc, &info);
    else
        status = print_summary(&a, gt__chrome_consumer_conv(consumer), &info);
    goto out;

out_nomem:
    fprintf(stderr, "gradtrace convert: out of memory\n");
out:
    gt__consumer_free(consumer);
    gt__free(out_alloc);
    return status;
}
