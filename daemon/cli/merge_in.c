/*
 * `gradtrace merge`'s inputs: what each trace file says about itself
 * (its metadata tail: process, rank, host, clock, collectives), read
 * without reading its events. The converter writes the metadata after
 * `traceEvents` and no event line starts with `]`, so the tail begins at
 * the file's only "\n]," and is bounded (every list in it is capped,
 * schema/trace-output.md): it is read from the end of the file, at most
 * GT__MERGE_TAIL_MAX bytes, and parsed whole with cJSON.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cJSON.h>

#include "common/alloc.h"
#include "daemon/cli/merge.h"

/* Member k of o as a number in [lo, hi], else dflt: the metadata is
 * untrusted, and an out-of-range double cast to an integer is undefined. */
static double num_in(const cJSON *o, const char *k, double lo, double hi,
                     double dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi))
        return dflt;
    return v->valuedouble;
}

/* Times: at most 2^61 ns (CLOCK_REALTIME until 2043), so that the merge's
 * sums and differences of a few of them never overflow an int64. */
#define NS_MAX 2305843009213693952.0
#define U32_MAX 4294967295.0

static double num(const cJSON *o, const char *k, double dflt)
{
    return num_in(o, k, -NS_MAX, NS_MAX, dflt);
}

/* The tail text "{...}" (from the byte after "\n],"), and where the
 * events end. @return 0, or -errno / -EINVAL with the reason in why. */
static int read_tail(int fd, off_t size, char **text, off_t *events_end,
                     const char **why)
{
    off_t from = size > GT__MERGE_TAIL_MAX ? size - GT__MERGE_TAIL_MAX : 0;
    size_t n = (size_t)(size - from);
    char *buf = gt__malloc(n + 2), *mark = NULL;
    ssize_t got;

    if (!buf)
        return -ENOMEM;
    got = pread(fd, buf + 1, n, from);
    if (got != (ssize_t)n) {
        gt__free(buf);
        *why = "cannot read it";
        return got < 0 ? -errno : -EIO;
    }
    buf[n + 1] = '\0';
    for (char *p = buf + 1; (p = strstr(p, "\n],")) != NULL; p++)
        mark = p; /* the last one: the tail itself has none */
    if (!mark) {
        gt__free(buf);
        *why = "not a complete gradtrace trace (no metadata after traceEvents; "
               "`gradtrace convert --repair` finishes a cut one)";
        return -EINVAL;
    }
    *events_end = from + (mark - (buf + 1)) + 1;
    mark[2] = '{'; /* "\n],<rest>}" -> "{<rest>}" */
    memmove(buf, mark + 2, strlen(mark + 2) + 1);
    *text = buf;
    return 0;
}

/* The collectives of the tail's "collectives" list into f. */
static int read_colls(struct gt__merge_file *f, const cJSON *list)
{
    const cJSON *c;
    int n = cJSON_GetArraySize(list), i = 0;

    if (n <= 0)
        return 0;
    f->colls = gt__calloc((size_t)n, sizeof(*f->colls));
    if (!f->colls)
        return -ENOMEM;
    cJSON_ArrayForEach(c, list)
    {
        const cJSON *op = cJSON_GetObjectItemCaseSensitive(c, "op");
        struct gt__merge_coll *k = &f->colls[i];
        if (i == n)
            break;
        k->group = (uint32_t)num_in(c, "group", 0, U32_MAX, 0);
        k->ranks = (uint32_t)num_in(c, "ranks", 0, U32_MAX, 0);
        k->seq = (uint64_t)num_in(c, "seq", 0, 9e18, 0);
        k->begin_mono = (int64_t)num(c, "begin_ns", 0);
        k->end_mono = (int64_t)num(c, "end_ns", 0);
        snprintf(k->op, sizeof(k->op), "%s",
                 cJSON_IsString(op) ? op->valuestring : "collective");
        if (k->end_mono >= k->begin_mono && k->begin_mono > 0)
            i++; /* a hostile or broken entry is left out */
    }
    f->ncolls = (size_t)i;
    return 0;
}

static int parse_tail(struct gt__merge_file *f, const char *text,
                      const char **why)
{
    cJSON *doc = cJSON_Parse(text);
    const cJSON *g = cJSON_GetObjectItemCaseSensitive(doc, "gradtrace");
    const cJSON *clk = cJSON_GetObjectItemCaseSensitive(g, "clock");
    const cJSON *host = cJSON_GetObjectItemCaseSensitive(g, "hostname");
    int rc = 0;

    if (cJSON_GetObjectItemCaseSensitive(g, "merge")) {
        *why = "already a merged trace (merge the ranks' own files)";
        rc = -EINVAL;
    } else if (!cJSON_IsObject(g) || !cJSON_IsObject(clk)) {
        *why = "not a gradtrace trace (no gradtrace clock metadata)";
        rc = -EINVAL;
    } else if (num(doc, "baseTimeNanoseconds", 0) <= 0 ||
               num(clk, "base_mono_ns", 0) <= 0) {
        *why = "its clock is unknown (baseTimeNanoseconds 0: a repaired file)";
        rc = -EINVAL;
    } else {
        f->base_real = (int64_t)num(doc, "baseTimeNanoseconds", 0);
        f->base_mono = (int64_t)num(clk, "base_mono_ns", 0);
        f->pid = (uint32_t)num_in(g, "pid", 0, U32_MAX, 0);
        f->rank = (int32_t)num_in(g, "rank", -1, 2147483647.0, -1);
        f->world = (int32_t)num_in(g, "world_size", -1, 2147483647.0, -1);
        snprintf(f->host, sizeof(f->host), "%s",
                 cJSON_IsString(host) ? host->valuestring : "?");
        const cJSON *lost = cJSON_GetObjectItemCaseSensitive(g, "lost");
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(g, "stream");
        f->lost_events = (uint64_t)num_in(lost, "events", 0, NS_MAX, 0);
        f->lost_cupti = (uint64_t)num_in(lost, "cupti", 0, NS_MAX, 0);
        f->lost_chunks = (uint64_t)num_in(lost, "chunks", 0, NS_MAX, 0);
        f->truncated = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(st, "truncated"));
        rc = read_colls(f, cJSON_GetObjectItemCaseSensitive(g, "collectives"));
    }
    if (!doc) {
        *why = "not a gradtrace trace (its metadata is not JSON)";
        rc = -EINVAL;
    }
    cJSON_Delete(doc);
    return rc;
}

int gt__merge_file_open(struct gt__merge_file *f, const char *path,
                        const char **why)
{
    struct stat st;
    char *text = NULL, head[20];
    int fd, rc;

    *why = NULL;
    f->path = path;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        *why = "not a regular file";
        rc = -EINVAL;
    } else if (pread(fd, head, 16, 0) != 16 ||
               memcmp(head, "{\"traceEvents\":[", 16) != 0) {
        *why = "not a gradtrace trace (it must start with {\"traceEvents\":[)";
        rc = -EINVAL;
    } else if ((rc = read_tail(fd, st.st_size, &text, &f->events_end, why)) == 0) {
        rc = parse_tail(f, text, why);
    }
    gt__free(text);
    close(fd);
    return rc;
}

void gt__merge_file_close(struct gt__merge_file *f)
{
    gt__free(f->colls);
    f->colls = NULL;
    f->ncolls = 0;
}
