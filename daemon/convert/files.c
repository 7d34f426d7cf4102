/*
 * The files of one writer: creation, rotation, and the metadata tail each
 * file gets when it closes.
 *
 * A file is `{"traceEvents":[` + events + `],` + trailing keys + `}`. The
 * trailing keys (baseTimeNanoseconds, distributedInfo, the "gradtrace"
 * object with lost counts and anomalies) are written when the file closes,
 * because only then are its counts known; JSON does not care about key
 * order. Everything about the stream in them (identity, clocks, lost
 * counts, warnings, the capture windows) is read from the shared stream
 * state at that moment; a window writer's file also describes its own
 * window, from the stream's window history. A new file is added to the
 * stream's list of paths; nothing here calls back into window routing.
 *
 * A stream whose outputs are not files (the aggregation sink, agg.c) has
 * s->no_files set: files are then "opened" without a path and the bytes
 * go to the JSON writer with no file behind it, which discards them.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/alloc.h"
#include "daemon/convert/internal.h"
#include "daemon/convert/names.h"
#include "daemon/convert/repair.h"

#define COUNT_WIDTH 12 /* bytes reserved for the patched file_count value */
#define COUNT_NULL "null        " /* its placeholder, COUNT_WIDTH bytes */
#define GT__ALT_NAMES_MAX 1000 /* "-<k>" names tried when a name is taken */

/* ------------------------------------------------------------ files */

/* Path of file index i: out_path or <dir>/<stem>.pt.trace.json, then
 * <stem>.<i>.pt.trace.json (for out_path, .<i> before its suffix). */
static char *file_path(const struct gt__writer *c, uint32_t i)
{
    char *p = NULL;
    int n;
    if (c->s->no_files)
        return gt__strdup("");
    if (c->out_path) {
        size_t len = strlen(c->out_path), ext = gt__trace_ext_len(c->out_path);
        if (i == 0)
            return gt__strdup(c->out_path);
        if (ext)
            n = asprintf(&p, "%.*s.%u%s", (int)(len - ext), c->out_path, i,
                         c->out_path + len - ext);
        else
            n = asprintf(&p, "%s.%u", c->out_path, i);
    } else if (i == 0) {
        n = asprintf(&p, "%s/%s" GT__TRACE_EXT, c->s->out_dir, c->stem);
    } else {
        n = asprintf(&p, "%s/%s.%u" GT__TRACE_EXT, c->s->out_dir, c->stem, i);
    }
    if (n < 0)
        return NULL;
    /* asprintf allocates with malloc; hand back an allocator copy. */
    char *q = gt__strdup(p);
    free(p);
    return q;
}

/* path with "-<k>" before its trace suffix (or at its end). Caller frees. */
static char *alt_path(const char *path, unsigned k)
{
    size_t len = strlen(path), ext = gt__trace_ext_len(path);
    char *p = NULL, *q;

    if (asprintf(&p, "%.*s-%u%s", (int)(len - ext), path, k,
                 path + len - ext) < 0)
        return NULL;
    q = gt__strdup(p);
    free(p);
    return q;
}

/* The index entry of path: <index dir>/<path's last component>. */
static int index_entry(const struct gt__writer *c, const char *path,
                       char *buf, size_t cap)
{
    const char *base = strrchr(path, '/');
    int n = snprintf(buf, cap, "%s/%s", c->s->index_dir, base ? base + 1 : path);
    return n > 0 && (size_t)n < cap ? 0 : -ENAMETOOLONG;
}

/* Puts the new file at *path or, when that is taken, at the next free
 * "-<k>" name (*path replaced): by linking tmp there (the file was made
 * in the index), or by creating it (*fd set). Never through a symlink:
 * link() and O_EXCL fail on any existing name. @return 0 or -errno. */
static int free_name(const char *tmp, char **path, int *fd)
{
    char *orig = *path, *alt;
    int rc;

    for (unsigned k = 2;; k++) {
        if (tmp)
            rc = link(tmp, *path) == 0 ? 0 : -errno;
        else if ((*fd = open(*path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW |
                                        O_CLOEXEC, 0600)) >= 0)
            rc = 0;
        else
            rc = -errno;
        if (rc != -EEXIST || k > GT__ALT_NAMES_MAX)
            break;
        if (!(alt = alt_path(orig, k))) {
            rc = -ENOMEM;
            break;
        }
        if (*path != orig)
            gt__free(*path);
        *path = alt;
    }
    if (*path != orig)
        gt__free(orig);
    return rc;
}

/*
 * A daemon's file is born in the unfinished-file index (repair.h), locked,
 * then linked at its name in the output directory, and its index entry
 * renamed after that name: a daemon killed at any point leaves either no
 * trace at all (an index entry alone, removed at the next start) or a
 * trace the index lists. @return the fd; -errno with *tried 1 (the output
 * directory refused the name), or with *tried 0 (no index: create the
 * file without it).
 */
static int create_indexed(const struct gt__writer *c, char **path, int *indexed,
                          int *tried)
{
    static unsigned long seq;
    char tmp[4096], e[4096];
    int fd, rc;

    *indexed = *tried = 0;
    if (snprintf(tmp, sizeof(tmp), "%s/.new-%d-%lu", c->s->index_dir,
                 (int)getpid(), __atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED)) >=
        (int)sizeof(tmp))
        return -ENAMETOOLONG;
    fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    /* Held while the file is written: repair leaves it alone. */
    (void)flock(fd, LOCK_SH | LOCK_NB);
    *tried = 1;
    rc = free_name(tmp, path, &fd);
    if (rc == 0 && index_entry(c, *path, e, sizeof(e)) == 0 && link(tmp, e) == 0)
        *indexed = 1;
    (void)unlink(tmp);
    if (rc < 0) {
        close(fd);
        return rc;
    }
    return fd;
}

/*
 * Creates the file at *path, 0600 (traces hold command lines).
 * Names the converter chose (a stem in an output directory) are never an
 * existing file (another stream with the same pid and program, an earlier
 * run) or a symlink planted there: the next free "-<k>" name is used
 * instead and *path replaced. A path the user named (convert -o) is
 * truncated as asked. *indexed says whether the index lists it.
 * @return the fd, or -errno.
 */
static int create_file(const struct gt__writer *c, char **path, int *indexed)
{
    int fd = -1, rc, tried = 0;

    *indexed = 0;
    if (c->out_path || c->s->out_path) {
        fd = open(*path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd >= 0)
            (void)flock(fd, LOCK_SH | LOCK_NB);
        return fd < 0 ? -errno : fd;
    }
    if (c->s->index_dir) {
        fd = create_indexed(c, path, indexed, &tried);
        if (fd >= 0 || tried)
            return fd;
    }
    if ((rc = free_name(NULL, path, &fd)) < 0)
        return rc;
    /* Held while the file is written: repair leaves it alone. */
    (void)flock(fd, LOCK_SH | LOCK_NB);
    return fd;
}

void gt__file_unindex(struct gt__writer *c, size_t i)
{
    char e[4096];

    if (!c->files[i].indexed)
        return;
    c->files[i].indexed = 0;
    if (index_entry(c, c->files[i].path, e, sizeof(e)) == 0)
        (void)unlink(e);
}

int gt__file_open(struct gt__writer *c)
{
    int rc = 0;
    char *path = file_path(c, c->file_index);
    if (!path)
        return -ENOMEM;
    struct gt__file *nf = gt__realloc(c->files, (c->nfiles + 1) * sizeof(*nf));
    if (!nf) {
        rc = -ENOMEM;
        goto out_free_path;
    }
    c->files = nf;
    c->fd = -1;
    int indexed = 0;
    if (!c->s->no_files && (c->fd = create_file(c, &path, &indexed)) < 0) {
        rc = c->fd;
        c->fd = -1;
        goto out_free_path;
    }
    c->files[c->nfiles].path = path;
    c->files[c->nfiles].count_off = 0;
    c->files[c->nfiles].dev = c->files[c->nfiles].ino = 0;
    c->files[c->nfiles].indexed = indexed;
    if (c->fd >= 0) {
        struct stat st;
        if (fstat(c->fd, &st) == 0) {
            c->files[c->nfiles].dev = (uint64_t)st.st_dev;
            c->files[c->nfiles].ino = (uint64_t)st.st_ino;
        }
    }
    c->nfiles++;
    c->w.fd = c->fd;
    c->w.bytes = 0;
    c->file_events = 0;
    c->file_ops = 0;
    c->file_open = 1;
    /* A mark at the start: a repair keeps nothing until the first ACK. */
    gt__jw_puts(&c->w, c->s->ack_marks ? "{\"traceEvents\":[\t"
                                       : "{\"traceEvents\":[");
    if (!c->s->no_files)
        gt__cstream_file_opened(c->s, path, c->window, c->win_id);
    return 0;

out_free_path:
    gt__free(path);
    return rc;
}

static void put_kv_u64(struct gt__jw *w, const char *key, uint64_t v)
{
    gt__jw_puts(w, key);
    gt__jw_u64(w, v);
}

static void put_kv_i64(struct gt__jw *w, const char *key, int64_t v)
{
    gt__jw_puts(w, key);
    gt__jw_i64(w, v);
}

static void put_kv_str(struct gt__jw *w, const char *key, const char *s)
{
    gt__jw_puts(w, key);
    if (s)
        gt__jw_str(w, s, strlen(s));
    else
        gt__jw_puts(w, "null");
}

static void put_sid(struct gt__writer *c, uint32_t id)
{
    uint32_t len;
    const char *raw;
    if (id == 0) {
        gt__jw_puts(&c->w, "null");
        return;
    }
    raw = gt__str_raw(c, id, &len);
    gt__jw_str(&c->w, raw, len);
}

static void write_clock(struct gt__writer *c)
{
    struct gt__jw *w = &c->w;
    gt__jw_puts(w, ",\n\"clock\":{\"model\":\"host CLOCK_MONOTONIC; GPU times "
                   "mapped to it by the agent\"");
    put_kv_u64(w, ",\"base_mono_ns\":", c->s->base_ns);
    put_kv_u64(w, ",\"hello_mono_ns\":", c->s->start_mono);
    put_kv_u64(w, ",\"hello_real_ns\":", c->s->start_real);
    put_kv_u64(w, ",\"host_pairs\":", c->s->host_pairs);
    if (c->s->host_pairs) {
        put_kv_u64(w, ",\"first_pair\":{\"mono_ns\":", c->s->host_first_mono);
        put_kv_u64(w, ",\"real_ns\":", c->s->host_first_real);
        put_kv_u64(w, "},\"last_pair\":{\"mono_ns\":", c->s->host_last_mono);
        put_kv_u64(w, ",\"real_ns\":", c->s->host_last_real);
        gt__jw_puts(w, "}");
    }
    gt__jw_puts(w, ",\"devices\":[");
    for (uint32_t i = 0; i < c->s->ndevclk; i++) {
        const struct gt__dev_clock *d = &c->s->devclk[i];
        gt__jw_puts(w, i ? ",{" : "{");
        put_kv_i64(w, "\"device\":", d->device);
        put_kv_u64(w, ",\"syncs\":", d->count);
        put_kv_u64(w, ",\"mono_ns\":", d->mono_ns);
        put_kv_u64(w, ",\"device_ts\":", d->device_ts);
        put_kv_i64(w, ",\"offset_ns\":",
                   (int64_t)(d->device_ts - d->mono_ns));
        put_kv_u64(w, ",\"uncertainty_ns\":", d->uncertainty_ns);
        gt__jw_puts(w, "}");
    }
    gt__jw_puts(w, "]}");
}

/* The stream's newest collectives, oldest first, on one line of their
 * own ("collectives":[...]), so `gradtrace merge` finds them by prefix. */
static void write_collectives(struct gt__writer *c)
{
    struct gt__jw *w = &c->w;
    const struct gt__cstream *s = c->s;
    uint64_t n = s->ncoll_total < GT__MAX_COLLECTIVES ? s->ncoll_total
                                                      : GT__MAX_COLLECTIVES;
    put_kv_u64(w, ",\n\"collectives_total\":", s->ncoll_total);
    gt__jw_puts(w, ",\n\"collectives\":[");
    for (uint64_t i = 0; i < n; i++) {
        const struct gt__coll *k =
            &s->colls[(s->ncoll_total - n + i) % GT__MAX_COLLECTIVES];
        gt__jw_puts(w, i ? ",{\"op\":" : "{\"op\":");
        put_sid(c, k->op);
        put_kv_u64(w, ",\"group\":", k->group);
        put_kv_u64(w, ",\"ranks\":", k->ranks);
        put_kv_u64(w, ",\"seq\":", k->seq);
        put_kv_u64(w, ",\"begin_ns\":", k->begin_ns);
        put_kv_u64(w, ",\"end_ns\":", k->end_ns);
        gt__jw_puts(w, "}");
    }
    gt__jw_puts(w, "]");
}

static void write_lists(struct gt__writer *c)
{
    struct gt__jw *w = &c->w;
    gt__jw_puts(w, ",\n\"windows\":[");
    for (uint32_t i = 0; i < c->nwindows; i++) {
        const struct gt__window *win = &c->windows[i];
        gt__jw_puts(w, i ? ",{" : "{");
        put_kv_u64(w, "\"id\":", win->id);
        gt__jw_puts(w, ",\"spec\":");
        put_sid(c, win->spec);
        gt__jw_puts(w, ",\"layer\":");
        put_sid(c, win->layer);
        put_kv_u64(w, ",\"begin_ns\":", win->begin);
        put_kv_u64(w, ",\"end_ns\":", win->end);
        put_kv_u64(w, ",\"begin_iteration\":", win->iter_begin);
        put_kv_u64(w, ",\"end_iteration\":", win->iter_end);
        gt__jw_puts(w, "}");
    }
    put_kv_u64(w, "],\"windows_total\":", c->windows_total);
    gt__jw_puts(w, ",\n\"warnings\":[");
    for (uint32_t i = 0; i < c->s->nwarnings; i++) {
        gt__jw_puts(w, i ? ",{" : "{");
        put_kv_u64(w, "\"code\":", c->s->warnings[i].code);
        put_kv_u64(w, ",\"ts_ns\":", c->s->warnings[i].ts);
        gt__jw_puts(w, ",\"text\":");
        put_sid(c, c->s->warnings[i].text);
        gt__jw_puts(w, "}");
    }
    gt__jw_puts(w, "],\n\"anomalies\":{");
    int first = 1;
#define GT__ANOM_PUT(n)                                                    \
    gt__jw_puts(w, first ? "\"" #n "\":" : ",\"" #n "\":");               \
    gt__jw_u64(w, c->an.n);                                                \
    first = 0;
    GT__ANOMALIES(GT__ANOM_PUT)
#undef GT__ANOM_PUT
    gt__jw_puts(w, "}");
}

static const char *state_name(int s)
{
    static const char *const states[] = {"open", "done", "cut"};
    return states[s >= 0 && s <= 2 ? s : 0];
}

/* The main file: where the stream's windows went, "window_files":[...]. */
static void write_window_files(struct gt__writer *c)
{
    struct gt__jw *w = &c->w;
    const struct gt__cstream *s = c->s;
    gt__jw_puts(w, ",\n\"window_files\":[");
    for (uint32_t i = 0; i < s->nwinfo; i++) {
        const struct gt__conv_window *x = &s->winfo[i];
        gt__jw_puts(w, i ? ",{\"id\":" : "{\"id\":");
        gt__jw_u64(w, x->id);
        gt__jw_puts(w, ",\"iteration\":");
        gt__jw_u64(w, x->iteration);
        gt__jw_puts(w, ",\"spec\":");
        gt__jw_str(w, x->spec, strlen(x->spec));
        gt__jw_puts(w, ",\"state\":\"");
        gt__jw_puts(w, state_name(x->state));
        gt__jw_puts(w, "\",\"file\":");
        if (x->file)
            gt__jw_str(w, x->file, strlen(x->file));
        else
            gt__jw_puts(w, "null");
        gt__jw_puts(w, "}");
    }
    gt__jw_puts(w, "]");
}

/* "window":{...} of a window writer's file, or "window_files" of main's.
 * A live window is always in the stream's history: the history keeps the
 * last GT__MAX_WINDOWS and at most GT__MAX_WIN_OPEN are alive. */
static void write_window_meta(struct gt__writer *c)
{
    struct gt__jw *w = &c->w;
    const struct gt__conv_window *x;
    if (!c->window) {
        write_window_files(c);
        return;
    }
    if (!(x = gt__winfo_find(c->s, c->win_id)))
        return;
    gt__jw_puts(w, ",\n\"window\":{\"id\":");
    gt__jw_u64(w, x->id);
    gt__jw_puts(w, ",\"spec\":");
    gt__jw_str(w, x->spec, strlen(x->spec));
    gt__jw_puts(w, ",\"layer\":");
    gt__jw_str(w, x->layer, strlen(x->layer));
    gt__jw_puts(w, ",\"phase\":\"");
    gt__jw_puts(w, x->phase);
    gt__jw_puts(w, "\",\"iteration\":");
    gt__jw_u64(w, x->iteration);
    gt__jw_puts(w, ",\"segments\":");
    gt__jw_u64(w, x->segments);
    gt__jw_puts(w, ",\"state\":\"");
    gt__jw_puts(w, state_name(x->state));
    gt__jw_puts(w, "\"}");
}

/*
 * The realtime of the trace's base: real - (mono - base) for the hello's
 * (mono, real) pair, or the first host pair without one. Unsigned and
 * exact, clamped to [0, UINT64_MAX]: the agent's times are untrusted, and
 * base + (real - mono) in int64 overflowed on extreme hellos.
 */
/* What the capture recorded beyond the default (layers, nodes, steps,
 * scopes, GPU activity): aten operators, for every capture
 * (GRADTRACE_OPS=1) or in the windows that asked (trigger ops=1), and how
 * many this file holds. */
static void write_detail(struct gt__writer *c)
{
    struct gt__jw *w = &c->w;

    gt__jw_puts(w, ",\n\"detail\":{\"ops\":");
    gt__jw_puts(w, (c->s->hello_flags & GT_HELLO_OPS) ? "\"all\""
                   : c->file_ops ? "\"windows\"" : "\"off\"");
    put_kv_u64(w, ",\"op_events\":", c->file_ops);
    gt__jw_puts(w, "}");
}

/* The stream's lost counts, and per thread the ones a thread's records
 * in the trace are short of: "threads":[{"tid":T,"events":N}, ...]
 * (undelivered: "undelivered" for "events"). */
static void write_lost(struct gt__writer *c)
{
    const struct gt__cstream *s = c->s;
    struct gt__jw *w = &c->w;
    const char *sep = "";

    put_kv_u64(w, ",\n\"lost\":{\"events\":", s->lost_sum[GT_LOST_EVENTS]);
    put_kv_u64(w, ",\"cupti\":", s->lost_sum[GT_LOST_CUPTI]);
    put_kv_u64(w, ",\"chunks\":", s->lost_sum[GT_LOST_CHUNKS]);
    put_kv_u64(w, ",\"disk_full_records\":", s->lost_disk_full);
    put_kv_u64(w, ",\"undelivered\":", s->lost_sum[GT_LOST_UNDELIVERED]);
    gt__jw_puts(w, ",\"threads\":[");
    for (uint32_t i = 0; i < s->nlost; i++) {
        const struct gt__lost *l = &s->lost[i];
        if (l->what != GT_LOST_EVENTS && l->what != GT_LOST_UNDELIVERED)
            continue;
        gt__jw_puts(w, sep);
        put_kv_u64(w, "{\"tid\":", l->tid);
        put_kv_u64(w, l->what == GT_LOST_EVENTS ? ",\"events\":"
                                                : ",\"undelivered\":",
                   l->count);
        gt__jw_puts(w, "}");
        sep = ",";
    }
    for (uint32_t i = 0; i < s->ndfull; i++) {
        gt__jw_puts(w, sep);
        put_kv_u64(w, "{\"tid\":", s->dfull[i].tid);
        put_kv_u64(w, ",\"disk_full\":", s->dfull[i].n);
        gt__jw_puts(w, "}");
        sep = ",";
    }
    gt__jw_puts(w, "]}");
}

static uint64_t base_real_ns(const struct gt__cstream *s)
{
    uint64_t mono = s->start_mono, real = s->start_real, d;

    if (!real && s->host_pairs) {
        mono = s->host_first_mono;
        real = s->host_first_real;
    }
    if (mono >= s->base_ns) {
        d = mono - s->base_ns;
        return real > d ? real - d : 0;
    }
    d = s->base_ns - mono;
    return real > UINT64_MAX - d ? UINT64_MAX : real + d;
}

int gt__file_close(struct gt__writer *c, int last)
{
    struct gt__jw *w = &c->w;
    char *next = NULL;
    int rc;
    if (!c->file_open)
        return 0;
    if (!last) {
        next = file_path(c, c->file_index + 1);
        if (!next)
            return -ENOMEM;
    }
    gt__jw_puts(w, "\n],\n\"displayTimeUnit\":\"ns\"");
    put_kv_u64(w, ",\n\"baseTimeNanoseconds\":", base_real_ns(c->s));
    gt__jw_puts(w, ",\n\"deviceProperties\":[]");
    if (c->s->rank >= 0) {
        /* Kineto's spacing: HTA finds a file's rank with the regular
         * expression "rank":\s+(\d+), whitespace required. */
        put_kv_i64(w, ",\n\"distributedInfo\":{\"rank\": ", c->s->rank);
        put_kv_i64(w, ", \"local_rank\": ", c->s->local_rank);
        put_kv_i64(w, ", \"world_size\": ", c->s->world_size);
        gt__jw_puts(w, "}");
    }
    gt__jw_puts(w, ",\n\"gradtrace\":{\"converter\":\"gradtrace "
                   GT__VERSION "\",\"converter_version\":\""
                   GT__VERSION "\"");
    put_kv_u64(w, ",\"wire_major\":", GT_WIRE_MAJOR);
    put_kv_u64(w, ",\"wire_minor\":", GT_WIRE_MINOR);
    put_kv_u64(w, ",\"pid\":", c->s->pid);
    put_kv_u64(w, ",\"ppid\":", c->s->ppid);
    put_kv_i64(w, ",\"rank\":", c->s->rank);
    put_kv_i64(w, ",\"local_rank\":", c->s->local_rank);
    put_kv_i64(w, ",\"world_size\":", c->s->world_size);
    put_kv_str(w, ",\"hostname\":", c->s->hostname);
    put_kv_str(w, ",\"cmdline\":", c->s->cmdline);
    write_window_meta(c);
    put_kv_u64(w, ",\n\"file_index\":", c->file_index);
    /* Patched at gt__conv_finish; stays null if the converter never
     * finishes (daemon killed), which readers take as "unknown". */
    gt__jw_puts(w, ",\"file_count\":");
    uint64_t off = w->bytes;
    gt__jw_puts(w, COUNT_NULL);
    put_kv_str(w, ",\"next_file\":", next);
    put_kv_u64(w, ",\"events\":", c->file_events);
    write_detail(c);
    write_lost(c);
    put_kv_u64(w, ",\n\"stream\":{\"chunks\":", c->chunks);
    put_kv_u64(w, ",\"records\":", c->records);
    /* The framer's counts describe the whole input: main's files only. */
    const struct gt__framer_stats *st =
        c->s->have_stats && !c->window ? &c->s->stats : NULL;
    put_kv_u64(w, ",\"chunks_missing\":", st ? st->chunks_lost : 0);
    put_kv_u64(w, ",\"corrupt_chunks\":", st ? st->corrupt_chunks : 0);
    put_kv_u64(w, ",\"skipped_bytes\":", st ? st->skipped_bytes : 0);
    put_kv_u64(w, ",\"seq_jumps\":", st ? st->seq_jumps : 0);
    gt__jw_puts(w, last && c->truncated ? ",\"truncated\":true"
                                        : ",\"truncated\":false");
    gt__jw_puts(w, c->s->goodbye ? ",\"goodbye\":true" : ",\"goodbye\":false");
    put_kv_u64(w, ",\"last_ts_ns\":", c->max_ts);
    gt__jw_puts(w, last && c->finished ? ",\"complete\":true}"
                                       : ",\"complete\":false}");
    write_clock(c);
    write_collectives(c);
    write_lists(c);
    gt__jw_puts(w, "}\n}\n");
    c->files[c->nfiles - 1].count_off = off;
    c->files[c->nfiles - 1].size = w->bytes;
    c->total_bytes += w->bytes;
    rc = gt__jw_flush(w);
    /* Finished: out of the index while its lock is still held. */
    if (rc == 0) {
        gt__file_unindex(c, c->nfiles - 1);
        c->s->files_done++;
    }
    if ((rc == -ENOSPC || rc == -EDQUOT) && c->s->ack_marks) {
        /* Cut by a full disk: finished when space is back. */
        gt__file_cut(c);
        c->err = rc;
        gt__free(next);
        return rc;
    }
    if (c->fd >= 0 && close(c->fd) != 0 && rc == 0)
        rc = -errno;
    c->fd = -1;
    w->fd = -1;
    c->file_open = 0;
    gt__free(next);
    if (rc && !c->err)
        c->err = rc;
    return rc;
}

/*
 * Opens the closed file f again to patch it, only if it is still the file
 * this writer created: the path may have been replaced since (a FIFO,
 * whose open would block the daemon's loop; someone else's file). Never
 * blocks (O_NONBLOCK), never follows a link, and checks that it is a
 * regular file with the device and inode recorded at creation, the size
 * written and the placeholder where it was put (a file created after ours
 * was deleted may get its inode number).
 * @return the fd, or -1 (not ours any more, or gone).
 */
static int reopen_own(const struct gt__file *f)
{
    char at[COUNT_WIDTH];
    struct stat st;
    int fd = open(f->path, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

    if (fd < 0)
        return -1;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || f->ino == 0 ||
        (uint64_t)st.st_dev != f->dev || (uint64_t)st.st_ino != f->ino ||
        (uint64_t)st.st_size != f->size ||
        pread(fd, at, sizeof(at), (off_t)f->count_off) != (ssize_t)sizeof(at) ||
        memcmp(at, COUNT_NULL, sizeof(at)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

void gt__files_patch_count(struct gt__writer *c)
{
    char num[COUNT_WIDTH + 1];
    int n = snprintf(num, sizeof(num), "%-*zu", COUNT_WIDTH, c->nfiles);
    if (n != COUNT_WIDTH)
        return;
    for (size_t i = 0; i < c->nfiles; i++) {
        if (c->files[i].count_off == 0 || c->s->no_files)
            continue;
        /* Best effort: a file replaced or gone keeps its valid "null". */
        int fd = reopen_own(&c->files[i]);
        if (fd < 0)
            continue;
        if (pwrite(fd, num, COUNT_WIDTH, (off_t)c->files[i].count_off) !=
            COUNT_WIDTH)
            c->err = c->err ? c->err : -EIO;
        close(fd);
    }
}

void gt__file_cut(struct gt__writer *c)
{
    struct gt__cstream *s = c->s;

    if (c->file_open && c->fd >= 0 && s->ncut < GT__MAX_CUT) {
        struct gt__file *f = &c->files[c->nfiles - 1];
        char e[4096];

        s->cut[s->ncut].fd = c->fd;
        s->cut[s->ncut].entry = NULL;
        if (f->indexed && index_entry(c, f->path, e, sizeof(e)) == 0)
            s->cut[s->ncut].entry = gt__strdup(e);
        f->indexed = 0;
        s->ncut++;
    } else if (c->fd >= 0) {
        close(c->fd); /* past the cap: the index lists it for a restart */
    }
    c->fd = -1;
    c->w.fd = -1;
    c->w.err = 0;
    c->w.len = 0;
    if (c->err == -ENOSPC || c->err == -EDQUOT)
        c->err = 0;
    if (c->file_open)
        c->file_index++;
    c->file_open = 0;
}

int gt__files_finish_cut(struct gt__cstream *s)
{
    struct gt__repair_info info;
    int rc = 0;
    uint32_t k = 0;

    for (uint32_t i = 0; i < s->ncut; i++) {
        int r = gt__trace_repair_fd(s->cut[i].fd, &info, 1);
        if (r == -ENOSPC || r == -EDQUOT) {
            rc = rc ? rc : r;
            s->cut[k++] = s->cut[i]; /* tried again later */
            continue;
        }
        if (s->cut[i].entry)
            (void)unlink(s->cut[i].entry);
        gt__free(s->cut[i].entry);
        close(s->cut[i].fd);
    }
    s->ncut = k;
    return rc;
}

void gt__files_drop_cut(struct gt__cstream *s)
{
    for (uint32_t i = 0; i < s->ncut; i++) {
        close(s->cut[i].fd);
        gt__free(s->cut[i].entry);
    }
    s->ncut = 0;
}

int gt__maybe_rotate(struct gt__writer *c)
{
    int rc;
    if (!c->file_open || c->err)
        return c->err;
    if (c->w.bytes < c->s->max_bytes && c->file_events < c->s->max_events)
        return 0;
    rc = gt__file_close(c, 0);
    if (rc)
        return rc;
    c->file_index++;
    rc = gt__file_open(c);
    if (rc && !c->err)
        c->err = rc;
    return rc;
}

