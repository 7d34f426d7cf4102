/*
 * `gradtrace merge TRACE... -o OUT`: the traces (or capture windows) of
 * several ranks in one Chrome-trace file, one process group per rank
 * (sorted by rank, rank and host in the names), every timestamp on one
 * reference clock, flows kept with ids made unique.
 *
 * Clocks (schema/trace-output.md, "Merged traces"): each process's
 * CLOCK_MONOTONIC goes first onto its host's CLOCK_REALTIME by its own
 * (monotonic, realtime) pair; the hosts' realtime errors against the
 * reference rank's (the lowest rank) are then corrected from the
 * collectives both ran (daemon/convert/align.h), which gives each rank's
 * offset and how far it can be trusted; both go into the merged trace's
 * metadata.
 *
 * Streaming: inputs are read twice, their metadata tail first
 * (merge_in.c), then their events line by line through the rewriter
 * (daemon/convert/mergeline.h) straight to the output; memory is one line
 * plus the inputs' collectives (at most 256 per file), whatever the size
 * of the traces.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/version.h"
#include "daemon/cli/cli.h"
#include "daemon/cli/merge.h"
#include "daemon/convert/align.h"
#include "daemon/convert/jsonchk.h"
#include "daemon/convert/jsonw.h"
#include "daemon/convert/mergeline.h"

static const char merge_usage[] =
    "usage: gradtrace merge [OPTIONS] TRACE... -o OUT\n"
    "  Writes the traces of several ranks (whole traces, rotated parts or\n"
    "  capture windows, as the daemon or `gradtrace convert` wrote them) into\n"
    "  one Chrome-trace file: one process group per rank, sorted by rank,\n"
    "  named with rank and host; every timestamp on the reference rank's\n"
    "  clock (its CLOCK_REALTIME); flows kept. Clocks of other hosts are\n"
    "  aligned by their realtime first, then by the ends of the collectives\n"
    "  (torch.distributed) the ranks ran together; each rank's offset and its\n"
    "  uncertainty go into the merged trace's metadata (gradtrace report\n"
    "  shows them).\n"
    "  -o, --output OUT          the merged trace (required)\n"
    "  --reference-rank R        the rank whose clock the trace uses (default:\n"
    "                            the lowest rank)\n"
    "exit status: 0 ok, 1 unreadable or unsuitable input, 2 usage\n";

/* Largest believable correction (2^50 ns, 13 days): beyond it the inputs'
 * collectives are not the same calls (or are hostile). */
#define CORRECTION_MAX (1ll << 50)

/* Where collectives are drawn, as a track of each rank's process. */
#define COLL_TID 268435455u /* 2^28 - 1: above pid_max, below synthetic */

struct proc {
    int32_t rank, world;
    const char *host;
    uint32_t pid, new_pid;
    int64_t first_off;          /* realtime - monotonic of its pair */
    struct gt__align_coll *al;  /* its collectives on the first estimate */
    struct gt__merge_coll *colls; /* the same, for drawing (deduplicated) */
    size_t ncolls;
    struct gt__align_result res;
    char prefix[1600];          /* "rank R host H: ", JSON-escaped */
};

struct merge {
    const char *out;
    int32_t ref_rank;           /* -2: the lowest */
    struct gt__merge_file *files;
    size_t nfiles;
    struct proc *procs;
    size_t nprocs, ref;
    int64_t out_base;           /* reference-clock ns of the output's ts 0 */
    uint64_t events;
    FILE *o;
};

static int parse_args(int argc, char **argv, struct merge *m)
{
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'},
        {"reference-rank", required_argument, NULL, 'r'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    uint64_t v;
    int c;

    gt__cli_opt_begin(argv, "gradtrace merge");
    while ((c = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
        if (c == 'o') {
            m->out = optarg;
        } else if (c == 'r') {
            if (gt__cli_parse_count("--reference-rank", optarg, 0, INT32_MAX, &v) < 0)
                return GT__EXIT_USAGE;
            m->ref_rank = (int32_t)v;
        } else if (c == 'h') {
            fputs(merge_usage, stdout);
            return -1;
        } else {
            return GT__EXIT_USAGE; /* getopt said why, in one line */
        }
    }
    if (!m->out)
        return gt__cli_usage_error("gradtrace merge", "-o OUT is required");
    if (optind >= argc)
        return gt__cli_usage_error("gradtrace merge", "no input trace");
    return 0;
}

static int proc_cmp(const void *a, const void *b)
{
    const struct proc *x = a, *y = b;
    int c;
    /* Ranks in order, unknown (-1) last; then host, then pid. */
    if (x->rank != y->rank)
        return (uint32_t)x->rank < (uint32_t)y->rank ? -1 : 1;
    if ((c = strcmp(x->host, y->host)) != 0)
        return c;
    return x->pid < y->pid ? -1 : x->pid > y->pid;
}

/* s as a JSON string body into d (cap bytes), cut to fit: valid UTF-8
 * (an invalid or cut sequence becomes U+FFFD), controls escaped. The
 * inputs' hosts, operation names and paths are untrusted text. */
static void json_esc(char *d, size_t cap, const char *s)
{
    size_t n = strlen(s), max = (cap - 1) / 6;

    d[gt__json_escape(d, s, n < max ? n : max)] = '\0';
}

static int coll_cmp(const void *a, const void *b)
{
    const struct gt__merge_coll *x = a, *y = b;
    if (x->group != y->group)
        return x->group < y->group ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Files into processes (same host, pid and rank), sorted by rank. */
static int group_files(struct merge *m)
{
    m->procs = gt__calloc(m->nfiles, sizeof(*m->procs));
    if (!m->procs)
        return -ENOMEM;
    for (size_t i = 0; i < m->nfiles; i++) {
        const struct gt__merge_file *f = &m->files[i];
        size_t k;
        for (k = 0; k < m->nprocs; k++)
            if (m->procs[k].pid == f->pid && m->procs[k].rank == f->rank &&
                strcmp(m->procs[k].host, f->host) == 0)
                break;
        if (k == m->nprocs) {
            struct proc *p = &m->procs[m->nprocs++];
            p->rank = f->rank;
            p->world = f->world;
            p->host = f->host;
            p->pid = f->pid;
            p->first_off = f->base_real - f->base_mono;
        }
    }
    qsort(m->procs, m->nprocs, sizeof(*m->procs), proc_cmp);
    for (size_t i = 0; i < m->nfiles; i++) {
        struct gt__merge_file *f = &m->files[i];
        for (size_t k = 0; k < m->nprocs; k++)
            if (m->procs[k].pid == f->pid && m->procs[k].rank == f->rank &&
                strcmp(m->procs[k].host, f->host) == 0)
                f->proc = k;
    }
    return 0;
}

/* A process's collectives from all its files, each (group, seq) once. */
static int gather_colls(struct merge *m, struct proc *p, size_t k)
{
    size_t n = 0, u = 0;
    for (size_t i = 0; i < m->nfiles; i++)
        if (m->files[i].proc == k)
            n += m->files[i].ncolls;
    if (n == 0)
        return 0;
    p->colls = gt__calloc(n, sizeof(*p->colls));
    p->al = gt__calloc(n, sizeof(*p->al));
    if (!p->colls || !p->al)
        return -ENOMEM;
    for (size_t i = 0; i < m->nfiles; i++)
        if (m->files[i].proc == k) {
            memcpy(p->colls + u, m->files[i].colls,
                   m->files[i].ncolls * sizeof(*p->colls));
            u += m->files[i].ncolls;
        }
    qsort(p->colls, n, sizeof(*p->colls), coll_cmp);
    u = 0;
    for (size_t i = 0; i < n; i++)
        if (u == 0 || coll_cmp(&p->colls[u - 1], &p->colls[i]) != 0)
            p->colls[u++] = p->colls[i];
    p->ncolls = u;
    for (size_t i = 0; i < u; i++)
        p->al[i] = (struct gt__align_coll){
            .group = p->colls[i].group, .seq = p->colls[i].seq,
            .begin_ns = p->colls[i].begin_mono + p->first_off,
            .end_ns = p->colls[i].end_mono + p->first_off};
    return 0;
}

/* Every process's correction onto the reference, and the output's base. */
static int align_all(struct merge *m)
{
    int rc = 0;
    m->ref = 0;
    for (size_t k = 0; k < m->nprocs; k++) {
        if (m->ref_rank >= 0 && m->procs[k].rank == m->ref_rank)
            m->ref = k;
        if ((rc = gather_colls(m, &m->procs[k], k)) < 0)
            return rc;
    }
    if (m->ref_rank >= 0 && m->procs[m->ref].rank != m->ref_rank) {
        fprintf(stderr, "gradtrace merge: no input of rank %d\n", m->ref_rank);
        return -EINVAL;
    }
    for (size_t k = 0; k < m->nprocs; k++) {
        struct proc *p = &m->procs[k], *r = &m->procs[m->ref];
        char host[GT__JSON_ESCAPED_MAX(255) + 1];
        p->new_pid = (uint32_t)(k + 1) * 1000u;
        json_esc(host, sizeof(host), p->host);
        if (p->rank >= 0)
            snprintf(p->prefix, sizeof(p->prefix), "rank %d host %s: ", p->rank, host);
        else
            snprintf(p->prefix, sizeof(p->prefix), "host %s: ", host);
        if (k == m->ref) {
            p->res = (struct gt__align_result){.method = GT__ALIGN_REFERENCE,
                                               .matched = p->ncolls};
            continue;
        }
        if ((rc = gt__align_pair(r->al, r->ncolls, p->al, p->ncolls, &p->res)) < 0)
            return rc;
    }
    for (size_t k = 0; k < m->nprocs; k++)
        if (m->procs[k].res.correction_ns > CORRECTION_MAX ||
            m->procs[k].res.correction_ns < -CORRECTION_MAX) {
            fprintf(stderr, "gradtrace merge: rank %d's clock would move by more than "
                            "13 days: its collectives do not match the reference's\n",
                    m->procs[k].rank);
            return -EINVAL;
        }
    m->out_base = INT64_MAX;
    for (size_t i = 0; i < m->nfiles; i++) {
        const struct proc *p = &m->procs[m->files[i].proc];
        int64_t b = m->files[i].base_mono + p->first_off + p->res.correction_ns;
        if (b < m->out_base)
            m->out_base = b;
    }
    m->out_base -= m->out_base % 1000000; /* a whole millisecond, as files */
    return 0;
}

static void put_event(struct merge *m, const char *text, size_t n)
{
    fputs(m->events++ ? ",\n" : "\n", m->o);
    fwrite(text, 1, n, m->o);
}

/* One file's events, rewritten, to the output. */
static int copy_events(struct merge *m, size_t fi, size_t *cap, char **buf)
{
    const struct gt__merge_file *f = &m->files[fi];
    const struct proc *p = &m->procs[f->proc];
    struct gt__mline ml = {
        .delta_ns = f->base_mono + p->first_off + p->res.correction_ns - m->out_base,
        .pid = p->new_pid, .id_base = (uint64_t)(fi + 1) << 32,
        .prefix = p->prefix, .prefix_len = strlen(p->prefix)};
    FILE *in = fopen(f->path, "r");
    char *line = NULL;
    size_t lcap = 0;
    ssize_t n;
    off_t pos = 0;
    int rc = 0;

    if (!in)
        return -errno;
    while (pos < f->events_end && (n = getline(&line, &lcap, in)) > 0) {
        ssize_t w;
        off_t at = pos;
        pos += n;
        if (at == 0)
            continue; /* {"traceEvents":[ */
        if (at >= f->events_end || line[strspn(line, " \t\n")] == '\0')
            continue; /* an acknowledgement mark alone, or the end */
        if ((size_t)n + ml.prefix_len + GT__MLINE_SLACK > *cap) {
            size_t want = (size_t)n + ml.prefix_len + GT__MLINE_SLACK;
            char *nb = gt__realloc(*buf, want);
            if (!nb) {
                rc = -ENOMEM;
                break;
            }
            *buf = nb;
            *cap = want;
        }
        w = gt__mline_rewrite(&ml, line, (size_t)n, *buf, *cap);
        /* The rewriter only follows braces and strings: an event that is
         * not strict JSON (damaged, hostile) would make the output
         * invalid, so the merge stops there. */
        if (w < 0 || !gt__json_check(*buf, (size_t)w)) {
            fprintf(stderr, "gradtrace merge: %s: event at byte %lld is not "
                            "one valid JSON event line\n", f->path, (long long)at);
            rc = -EINVAL;
            break;
        }
        put_event(m, *buf, (size_t)w);
    }
    if (rc == 0 && ferror(in))
        rc = -EIO;
    free(line);
    fclose(in);
    return rc;
}

/* A rank's collectives as spans on a track of its own, on the merged
 * clock: the ends the alignment used, to be seen lined up. */
static void put_colls(struct merge *m, const struct proc *p)
{
    char ev[640], op[GT__JSON_ESCAPED_MAX(47) + 1];
    int64_t off = p->first_off + p->res.correction_ns - m->out_base;
    int n;
    if (p->ncolls == 0)
        return;
    n = snprintf(ev, sizeof(ev), "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%u,"
                 "\"tid\":%u,\"args\":{\"name\":\"collectives\"}}", p->new_pid, COLL_TID);
    put_event(m, ev, (size_t)n);
    for (size_t i = 0; i < p->ncolls; i++) {
        const struct gt__merge_coll *c = &p->colls[i];
        int64_t s = c->begin_mono + off, d = c->end_mono - c->begin_mono;
        if (s < 0)
            continue;
        json_esc(op, sizeof(op), c->op);
        n = snprintf(ev, sizeof(ev),
                     "{\"ph\":\"X\",\"cat\":\"collective\",\"pid\":%u,\"tid\":%u,"
                     "\"ts\":%" PRId64 ".%03" PRId64 ",\"dur\":%" PRId64 ".%03" PRId64
                     ",\"name\":\"%s\",\"args\":{\"seq\":%" PRIu64 ",\"group\":%u,"
                     "\"ranks\":%u}}",
                     p->new_pid, COLL_TID, s / 1000, s % 1000, d / 1000, d % 1000,
                     op, c->seq, c->group, c->ranks);
        put_event(m, ev, (size_t)n);
    }
}

static const char *method_name(int method)
{
    static const char *const names[] = {"reference", "collectives", "realtime",
                                        "inconsistent"};
    return method >= 0 && method <= 3 ? names[method] : "realtime";
}

static void put_proc_meta(struct merge *m, const struct proc *p, size_t k)
{
    char host[GT__JSON_ESCAPED_MAX(255) + 1];
    json_esc(host, sizeof(host), p->host);
    fprintf(m->o, "%s{\"rank\":%d,\"world_size\":%d,\"host\":\"%s\",\"pid\":%u,"
                  "\"trace_pid\":%u,\"method\":\"%s\","
                  "\"offset_ns\":%" PRId64 ",\"realtime_offset_ns\":%" PRId64
                  ",\"correction_ns\":%" PRId64 ",\"uncertainty_ns\":",
            k ? "," : "", p->rank, p->world, host, p->pid, p->new_pid,
            method_name(p->res.method), p->first_off + p->res.correction_ns,
            p->first_off, p->res.correction_ns);
    if (p->res.uncertainty_ns < 0)
        fputs("null", m->o);
    else
        fprintf(m->o, "%" PRId64, p->res.uncertainty_ns);
    fprintf(m->o, ",\"collectives\":%zu,\"collectives_matched\":%" PRIu64,
            p->ncolls, p->res.matched);
    if (p->res.method == GT__ALIGN_COLLECTIVES || p->res.method == GT__ALIGN_INCONSISTENT)
        fprintf(m->o, ",\"bounds_ns\":[%" PRId64 ",%" PRId64 "],\"end_median_ns\":%" PRId64
                      ",\"end_spread_ns\":%" PRId64,
                p->res.lo_ns, p->res.hi_ns, p->res.end_median_ns, p->res.spread_ns);
    fputs(",\"files\":[", m->o);
    for (size_t i = 0, n = 0; i < m->nfiles; i++) {
        char path[GT__JSON_ESCAPED_MAX(1024) + 1];
        if (m->files[i].proc != k)
            continue;
        json_esc(path, sizeof(path), m->files[i].path);
        fprintf(m->o, "%s\"%s\"", n++ ? "," : "", path);
    }
    fputs("]}", m->o);
}

static void put_tail(struct merge *m)
{
    const struct proc *r = &m->procs[m->ref];
    uint64_t ev = 0, cupti = 0, chunks = 0;
    int truncated = 0;
    for (size_t i = 0; i < m->nfiles; i++) {
        ev += m->files[i].lost_events;
        cupti += m->files[i].lost_cupti;
        chunks += m->files[i].lost_chunks;
        truncated |= m->files[i].truncated;
    }
    fprintf(m->o, "\n],\n\"displayTimeUnit\":\"ns\",\n\"baseTimeNanoseconds\":%" PRId64
                  ",\n\"deviceProperties\":[],\n\"gradtrace\":{\"converter\":\"gradtrace "
                  "merge " GT__VERSION "\",\"converter_version\":\"" GT__VERSION "\","
                  "\"wire_major\":%d,\"wire_minor\":%d,\"merged\":true,"
                  "\"file_index\":0,\"file_count\":1,\"next_file\":null,"
                  "\"events\":%" PRIu64 ",\n",
            m->out_base, GT_WIRE_MAJOR, GT_WIRE_MINOR, m->events);
    fprintf(m->o, "\"lost\":{\"events\":%" PRIu64 ",\"cupti\":%" PRIu64
                  ",\"chunks\":%" PRIu64 "},\n\"stream\":{\"inputs\":%zu,"
                  "\"truncated\":%s},\n\"anomalies\":{},\n",
            ev, cupti, chunks, m->nfiles, truncated ? "true" : "false");
    fprintf(m->o, "\"merge\":{\"reference_rank\":%d,\"clock\":\"CLOCK_REALTIME of the "
                  "reference rank: each rank's CLOCK_MONOTONIC + offset_ns "
                  "(realtime_offset_ns from its own pair + correction_ns from "
                  "collectives)\",\"ranks\":[",
            r->rank);
    for (size_t k = 0; k < m->nprocs; k++)
        put_proc_meta(m, &m->procs[k], k);
    fputs("]}}\n}\n", m->o);
}

static int open_inputs(struct merge *m, int argc, char **argv)
{
    m->nfiles = (size_t)(argc - optind);
    m->files = gt__calloc(m->nfiles, sizeof(*m->files));
    if (!m->files)
        return -ENOMEM;
    for (size_t i = 0; i < m->nfiles; i++) {
        const char *why;
        int rc = gt__merge_file_open(&m->files[i], argv[optind + (int)i], &why);
        if (rc < 0) {
            fprintf(stderr, "gradtrace merge: %s: %s\n", argv[optind + (int)i],
                    why ? why : strerror(-rc));
            return rc;
        }
    }
    return 0;
}

static int write_output(struct merge *m)
{
    char *buf = NULL;
    size_t cap = 0;
    int rc = 0, fd = open(m->out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

    if (fd < 0 || !(m->o = fdopen(fd, "w"))) {
        fprintf(stderr, "gradtrace merge: %s: %s\n", m->out, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -errno;
    }
    fputs("{\"traceEvents\":[", m->o);
    for (size_t k = 0; k < m->nprocs && rc == 0; k++) {
        for (size_t i = 0; i < m->nfiles && rc == 0; i++)
            if (m->files[i].proc == k)
                rc = copy_events(m, i, &cap, &buf);
        put_colls(m, &m->procs[k]);
    }
    gt__free(buf);
    if (rc == 0)
        put_tail(m);
    if (fclose(m->o) != 0 && rc == 0) {
        fprintf(stderr, "gradtrace merge: %s: %s\n", m->out, strerror(errno));
        rc = -EIO;
    }
    if (rc < 0)
        unlink(m->out);
    return rc;
}

static void merge_free(struct merge *m)
{
    for (size_t i = 0; i < m->nfiles; i++)
        gt__merge_file_close(&m->files[i]);
    for (size_t k = 0; k < m->nprocs; k++) {
        gt__free(m->procs[k].al);
        gt__free(m->procs[k].colls);
    }
    gt__free(m->files);
    gt__free(m->procs);
}

int gt__cmd_merge(int argc, char **argv)
{
    struct merge m = {.ref_rank = -2};
    int rc = parse_args(argc, argv, &m);

    if (rc != 0)
        return rc < 0 ? GT__EXIT_OK : rc;
    rc = open_inputs(&m, argc, argv);
    if (rc == 0 && (rc = group_files(&m)) == 0)
        rc = align_all(&m);
    if (rc == 0)
        rc = write_output(&m);
    if (rc == -ENOMEM)
        fputs("gradtrace merge: out of memory\n", stderr);
    merge_free(&m);
    return rc < 0 ? GT__EXIT_ERROR : GT__EXIT_OK;
}
