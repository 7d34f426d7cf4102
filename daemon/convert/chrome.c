/*
 * Chrome Trace Event output: files, rotation, tracks, metadata, and the
 * event emitters the record handlers use.
 *
 * A file is `{"traceEvents":[` + events + `],` + trailing keys + `}`. The
 * trailing keys (baseTimeNanoseconds, distributedInfo, the "gradtrace"
 * object with lost counts and anomalies) are written when the file closes,
 * because only then are its counts known; JSON does not care about key
 * order. Process and thread metadata ('M' events) are written lazily: each
 * track remembers the file that has its metadata, and the first event on
 * the track in a new file writes it again, so every rotated file is
 * self-describing without replaying anything.
 *
 * Tracks are (pid, tid) pairs with a pre-rendered `"pid":P,"tid":T` so that
 * an event's identity is one memcpy. Tracks fed with complete events that
 * are not known to nest (GPU activity, CUDA API calls, computed layer spans)
 * go through gt__place, which keeps a small stack of open ends per track
 * and sends anything that would overlap without nesting to an overlap
 * track, so no track ever holds invalid nesting.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/alloc.h"
#include "daemon/convert/internal.h"

#define COUNT_WIDTH 12 /* bytes reserved for the patched file_count value */

/* ------------------------------------------------------------ files */

/* Path of file index i: out_path or <dir>/<stem>.json, then .<i>.json. */
static char *file_path(const struct gt__conv *c, uint32_t i)
{
    char *p = NULL;
    int n;
    if (c->out_path) {
        size_t len = strlen(c->out_path);
        int json = len > 5 && strcmp(c->out_path + len - 5, ".json") == 0;
        if (i == 0)
            return gt__strdup(c->out_path);
        if (json)
            n = asprintf(&p, "%.*s.%u.json", (int)(len - 5), c->out_path, i);
        else
            n = asprintf(&p, "%s.%u", c->out_path, i);
    } else if (i == 0) {
        n = asprintf(&p, "%s/%s.json", c->out_dir, c->stem);
    } else {
        n = asprintf(&p, "%s/%s.%u.json", c->out_dir, c->stem, i);
    }
    if (n < 0)
        return NULL;
    /* asprintf allocates with malloc; hand back an allocator copy. */
    char *q = gt__strdup(p);
    free(p);
    return q;
}

int gt__file_open(struct gt__conv *c)
{
    int rc = 0;
    char *path = file_path(c, c->file_index);
    if (!path)
        return -ENOMEM;
    struct gt__file *nf = gt__realloc(c->files, (c->nfiles + 1) * sizeof(*nf));
    char **np = gt__realloc(c->paths, (c->nfiles + 2) * sizeof(*np));
    if (nf)
        c->files = nf;
    if (np)
        c->paths = np;
    if (!nf || !np) {
        rc = -ENOMEM;
        goto out_free_path;
    }
    c->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (c->fd < 0) {
        rc = -errno;
        goto out_free_path;
    }
    c->files[c->nfiles].path = path;
    c->files[c->nfiles].count_off = 0;
    c->paths[c->nfiles] = path;
    c->paths[c->nfiles + 1] = NULL;
    c->nfiles++;
    c->w.fd = c->fd;
    c->w.bytes = 0;
    c->file_events = 0;
    c->file_open = 1;
    gt__jw_puts(&c->w, "{\"traceEvents\":[");
    gt__win_file_opened(c, path);
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

static void put_sid(struct gt__conv *c, uint32_t id)
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

static void write_clock(struct gt__conv *c)
{
    struct gt__jw *w = &c->w;
    gt__jw_puts(w, ",\n\"clock\":{\"model\":\"host CLOCK_MONOTONIC; GPU times "
                   "mapped to it by the agent\"");
    put_kv_u64(w, ",\"base_mono_ns\":", c->base_ns);
    put_kv_u64(w, ",\"hello_mono_ns\":", c->start_mono);
    put_kv_u64(w, ",\"hello_real_ns\":", c->start_real);
    put_kv_u64(w, ",\"host_pairs\":", c->host_pairs);
    if (c->host_pairs) {
        put_kv_u64(w, ",\"first_pair\":{\"mono_ns\":", c->host_first_mono);
        put_kv_u64(w, ",\"real_ns\":", c->host_first_real);
        put_kv_u64(w, "},\"last_pair\":{\"mono_ns\":", c->host_last_mono);
        put_kv_u64(w, ",\"real_ns\":", c->host_last_real);
        gt__jw_puts(w, "}");
    }
    gt__jw_puts(w, ",\"devices\":[");
    for (uint32_t i = 0; i < c->ndevclk; i++) {
        const struct gt__dev_clock *d = &c->devclk[i];
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

static void write_lists(struct gt__conv *c)
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
    for (uint32_t i = 0; i < c->nwarnings; i++) {
        gt__jw_puts(w, i ? ",{" : "{");
        put_kv_u64(w, "\"code\":", c->warnings[i].code);
        put_kv_u64(w, ",\"ts_ns\":", c->warnings[i].ts);
        gt__jw_puts(w, ",\"text\":");
        put_sid(c, c->warnings[i].text);
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

int gt__file_close(struct gt__conv *c, int last)
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
    int64_t real_off = (int64_t)(c->start_real - c->start_mono);
    if (!c->start_real && c->host_pairs)
        real_off = (int64_t)(c->host_first_real - c->host_first_mono);
    uint64_t base_real = (uint64_t)((int64_t)c->base_ns + real_off);
    put_kv_u64(w, ",\n\"baseTimeNanoseconds\":", base_real);
    gt__jw_puts(w, ",\n\"deviceProperties\":[]");
    if (c->rank >= 0) {
        put_kv_i64(w, ",\n\"distributedInfo\":{\"rank\":", c->rank);
        put_kv_i64(w, ",\"local_rank\":", c->local_rank);
        put_kv_i64(w, ",\"world_size\":", c->world_size);
        gt__jw_puts(w, "}");
    }
    gt__jw_puts(w, ",\n\"gradtrace\":{\"converter\":\"gradtrace "
                   GT__VERSION "\",\"converter_version\":\""
                   GT__VERSION "\"");
    put_kv_u64(w, ",\"wire_major\":", GT_WIRE_MAJOR);
    put_kv_u64(w, ",\"wire_minor\":", GT_WIRE_MINOR);
    put_kv_u64(w, ",\"pid\":", c->pid);
    put_kv_u64(w, ",\"ppid\":", c->ppid);
    put_kv_i64(w, ",\"rank\":", c->rank);
    put_kv_i64(w, ",\"local_rank\":", c->local_rank);
    put_kv_i64(w, ",\"world_size\":", c->world_size);
    put_kv_str(w, ",\"hostname\":", c->hostname);
    put_kv_str(w, ",\"cmdline\":", c->cmdline);
    gt__win_write_meta(c);
    put_kv_u64(w, ",\n\"file_index\":", c->file_index);
    /* Patched at gt__conv_finish; stays null if the converter never
     * finishes (daemon killed), which readers take as "unknown". */
    gt__jw_puts(w, ",\"file_count\":");
    uint64_t off = w->bytes;
    gt__jw_puts(w, "null        ");
    put_kv_str(w, ",\"next_file\":", next);
    put_kv_u64(w, ",\"events\":", c->file_events);
    put_kv_u64(w, ",\n\"lost\":{\"events\":", c->lost_sum[GT_LOST_EVENTS]);
    put_kv_u64(w, ",\"cupti\":", c->lost_sum[GT_LOST_CUPTI]);
    put_kv_u64(w, ",\"chunks\":", c->lost_sum[GT_LOST_CHUNKS]);
    gt__jw_puts(w, "}");
    put_kv_u64(w, ",\n\"stream\":{\"chunks\":", c->chunks);
    put_kv_u64(w, ",\"records\":", c->records);
    uint64_t gaps = c->have_stats ? c->stats.chunks_lost : 0;
    put_kv_u64(w, ",\"chunks_missing\":", gaps);
    put_kv_u64(w, ",\"corrupt_chunks\":",
               c->have_stats ? c->stats.corrupt_chunks : 0);
    put_kv_u64(w, ",\"skipped_bytes\":",
               c->have_stats ? c->stats.skipped_bytes : 0);
    gt__jw_puts(w, last && c->truncated ? ",\"truncated\":true"
                                        : ",\"truncated\":false");
    gt__jw_puts(w, last && c->finished ? ",\"complete\":true}"
                                       : ",\"complete\":false}");
    write_clock(c);
    write_lists(c);
    gt__jw_puts(w, "}\n}\n");
    c->files[c->nfiles - 1].count_off = off;
    c->total_bytes += w->bytes;
    rc = gt__jw_flush(w);
    if (close(c->fd) != 0 && rc == 0)
        rc = -errno;
    c->fd = -1;
    w->fd = -1;
    c->file_open = 0;
    gt__free(next);
    if (rc && !c->err)
        c->err = rc;
    return rc;
}

void gt__files_patch_count(struct gt__conv *c)
{
    char num[COUNT_WIDTH + 1];
    int n = snprintf(num, sizeof(num), "%-*zu", COUNT_WIDTH, c->nfiles);
    if (n != COUNT_WIDTH)
        return;
    for (size_t i = 0; i < c->nfiles; i++) {
        if (c->files[i].count_off == 0)
            continue;
        int fd = open(c->files[i].path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        /* Best effort: a failed patch leaves the valid "null". */
        if (pwrite(fd, num, COUNT_WIDTH, (off_t)c->files[i].count_off) !=
            COUNT_WIDTH)
            c->err = c->err ? c->err : -EIO;
        close(fd);
    }
}

int gt__maybe_rotate(struct gt__conv *c)
{
    int rc;
    if (!c->file_open || c->err)
        return c->err;
    if (c->w.bytes < c->max_bytes && c->file_events < c->max_events)
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

/* ------------------------------------------------------------ tracks */

static char *escape_dup(const char *raw, size_t n, uint32_t *len)
{
    char *e = gt__malloc(GT__JSON_ESCAPED_MAX(n) + 1);
    if (!e)
        return NULL;
    size_t k = gt__json_escape(e, raw, n);
    e[k] = 0;
    *len = (uint32_t)k;
    return e;
}

static uint32_t proc_new(struct gt__conv *c, uint32_t pid, uint32_t sort,
                         const char *name)
{
    struct gt__proc *np = gt__realloc(c->procs, (c->nprocs + 1) * sizeof(*np));
    if (!np)
        return UINT32_MAX;
    c->procs = np;
    struct gt__proc *p = &c->procs[c->nprocs];
    memset(p, 0, sizeof(*p));
    p->pid = pid;
    p->sort = sort;
    p->next_synth = GT__SYNTH_TID_BASE;
    p->name = escape_dup(name, strlen(name), &p->name_len);
    if (!p->name)
        return UINT32_MAX;
    return c->nprocs++;
}

/* "python3 [rank 0] pid 1234": the command's basename, rank, pid. */
static void main_proc_name(const struct gt__conv *c, char *name, size_t cap)
{
    const char *cmd = c->cmdline ? c->cmdline : "";
    size_t n = strcspn(cmd, " ");
    const char *base = cmd;
    for (size_t i = 0; i < n; i++)
        if (cmd[i] == '/')
            base = cmd + i + 1;
    int bl = (int)(n - (size_t)(base - cmd));
    if (bl > 200)
        bl = 200;
    if (bl <= 0) {
        base = "process";
        bl = 7;
    }
    if (c->rank >= 0)
        snprintf(name, cap, "%.*s [rank %d] pid %u", bl, base, c->rank,
                 c->pid);
    else
        snprintf(name, cap, "%.*s pid %u", bl, base, c->pid);
}

uint32_t gt__main_proc(struct gt__conv *c)
{
    if (c->nprocs == 0) {
        char name[320];
        main_proc_name(c, name, sizeof(name));
        if (proc_new(c, c->pid, 0, name) == UINT32_MAX)
            c->err = c->err ? c->err : -ENOMEM;
    }
    return 0;
}

void gt__main_proc_rename(struct gt__conv *c)
{
    char name[320];
    if (c->nprocs == 0)
        return;
    main_proc_name(c, name, sizeof(name));
    gt__proc_rename(c, 0, name);
}

uint32_t gt__gpu_proc(struct gt__conv *c, uint32_t device)
{
    if (device >= GT__MAX_DEVICES)
        return UINT32_MAX;
    gt__main_proc(c);
    if (!c->gpu_proc[device]) {
        char name[32];
        snprintf(name, sizeof(name), "GPU %u", device);
        uint32_t p = proc_new(c, GT__GPU_PID_BASE + device, 1000 + device,
                              name);
        if (p == UINT32_MAX)
            return UINT32_MAX;
        c->gpu_proc[device] = p + 1;
    }
    return c->gpu_proc[device] - 1;
}

static uint32_t track_new_esc(struct gt__conv *c, uint32_t proc, uint32_t tid,
                              uint32_t sort, char *esc, uint32_t esc_len)
{
    if (c->ntracks + 1 >= GT__MAX_TRACKS)
        goto out_free;
    if (c->ntracks + 1 >= c->tracks_cap) {
        uint32_t cap = c->tracks_cap ? c->tracks_cap * 2 : 64;
        struct gt__track *nt = gt__realloc(c->tracks, cap * sizeof(*nt));
        if (!nt)
            goto out_free;
        c->tracks = nt;
        c->tracks_cap = cap;
        if (c->ntracks == 0)
            c->ntracks = 1; /* index 0 means "no track" */
    }
    if (tid == UINT32_MAX)
        tid = c->procs[proc].next_synth++;
    struct gt__track *t = &c->tracks[c->ntracks];
    memset(t, 0, sizeof(*t));
    t->proc = proc;
    t->tid = tid;
    t->sort = sort;
    t->name = esc;
    t->name_len = esc_len;
    t->pt_len = (uint32_t)snprintf(t->pt, sizeof(t->pt),
                                   "\"pid\":%u,\"tid\":%u",
                                   c->procs[proc].pid, tid);
    return c->ntracks++;

out_free:
    gt__free(esc);
    return 0;
}

uint32_t gt__track_new(struct gt__conv *c, uint32_t proc, uint32_t tid,
                       uint32_t sort, const char *name)
{
    uint32_t len;
    char *esc = escape_dup(name, strlen(name), &len);
    if (!esc)
        return 0;
    return track_new_esc(c, proc, tid, sort, esc, len);
}

void gt__track_rename(struct gt__conv *c, uint32_t t, const char *name)
{
    uint32_t len;
    char *esc = escape_dup(name, strlen(name), &len);
    if (!esc || t == 0) {
        gt__free(esc);
        return;
    }
    gt__free(c->tracks[t].name);
    c->tracks[t].name = esc;
    c->tracks[t].name_len = len;
    c->tracks[t].meta_file = 0; /* re-emit thread_name in this file */
}

void gt__proc_rename(struct gt__conv *c, uint32_t proc, const char *name)
{
    uint32_t len;
    char *esc = escape_dup(name, strlen(name), &len);
    if (!esc)
        return;
    gt__free(c->procs[proc].name);
    c->procs[proc].name = esc;
    c->procs[proc].name_len = len;
    c->procs[proc].meta_file = 0;
}

static int lane_try(struct gt__track *t, uint64_t s, uint64_t e)
{
    if (s < t->last_start)
        return 0; /* out of start order: nesting cannot be verified */
    while (t->depth > 0 && t->ends[t->depth - 1] <= s)
        t->depth--;
    if (t->depth > 0 && e > t->ends[t->depth - 1])
        return 0;
    if (t->depth == GT__LANE_DEPTH)
        return 0;
    t->ends[t->depth++] = e;
    t->last_start = s;
    return 1;
}

uint32_t gt__place(struct gt__conv *c, uint32_t t, uint64_t s, uint64_t e)
{
    while (t) {
        if (lane_try(&c->tracks[t], s, e)) {
            if (c->tracks[t].level)
                c->an.overlap_moved++;
            return t;
        }
        if (!c->tracks[t].overflow) {
            const struct gt__track *pt = &c->tracks[t];
            if (pt->level >= GT__MAX_OVERFLOW)
                break;
            /* Name the overlap track after the primary one. */
            uint32_t lvl = pt->level + 1;
            const struct gt__track *base = pt;
            size_t cut = base->name_len;
            if (lvl > 1) {
                const char *par = strstr(base->name, " (overlap ");
                if (par)
                    cut = (size_t)(par - base->name);
            }
            char *esc = gt__malloc(cut + 32);
            if (!esc)
                break;
            int n = snprintf(esc, cut + 32, "%.*s (overlap %u)", (int)cut,
                             base->name, lvl);
            uint32_t nt = track_new_esc(c, pt->proc, UINT32_MAX,
                                        pt->sort + lvl, esc, (uint32_t)n);
            if (!nt)
                break;
            c->tracks[nt].level = lvl;
            c->tracks[t].overflow = nt;
        }
        t = c->tracks[t].overflow;
    }
    c->an.overlap_dropped++;
    return 0;
}

/* ------------------------------------------------------------ events */

uint64_t gt__rel(struct gt__conv *c, uint64_t ts)
{
    if (ts < c->base_ns) {
        c->an.before_base++;
        return 0;
    }
    return ts - c->base_ns;
}

static const char unknown_str[] = "(unknown string)";

const char *gt__str_esc(struct gt__conv *c, uint32_t id, uint32_t *len)
{
    if (id < c->nstrs && c->strs[id].esc) {
        *len = c->strs[id].esc_len;
        return c->strs[id].esc;
    }
    c->an.unknown_strings++;
    *len = sizeof(unknown_str) - 1;
    return unknown_str;
}

const char *gt__str_raw(struct gt__conv *c, uint32_t id, uint32_t *len)
{
    if (id < c->nstrs && c->strs[id].raw) {
        *len = c->strs[id].raw_len;
        return c->strs[id].raw;
    }
    *len = sizeof(unknown_str) - 1;
    return unknown_str;
}

/* Writes one metadata event; name is a literal key, val escaped text. */
/* Starts a metadata event: {"ph":"M","name":"<what>",<pid/tid>,"args":{
 * with room for extra more bytes after it. */
static char *meta_head(struct gt__conv *c, const char *what, const char *pt,
                       size_t pt_len, size_t extra)
{
    size_t wl = strlen(what);
    char *p = gt__jw_reserve(&c->w, wl + pt_len + extra + 64);
    if (c->file_events)
        *p++ = ',';
    *p++ = '\n';
    p = GT__LIT(p, "{\"ph\":\"M\",\"name\":\"");
    memcpy(p, what, wl);
    p += wl;
    p = GT__LIT(p, "\",");
    memcpy(p, pt, pt_len);
    p += pt_len;
    return GT__LIT(p, ",\"args\":{");
}

static void meta_name(struct gt__conv *c, const char *what, const char *pt,
                      size_t pt_len, const char *val, uint32_t len)
{
    char *p = meta_head(c, what, pt, pt_len, len + 16);
    p = GT__LIT(p, "\"name\":\"");
    memcpy(p, val, len);
    p += len;
    p = GT__LIT(p, "\"}}");
    gt__jw_commit(&c->w, p);
    c->file_events++;
    c->total_events++;
}

static void meta_sort(struct gt__conv *c, const char *what, const char *pt,
                      size_t pt_len, uint32_t sort)
{
    char *p = meta_head(c, what, pt, pt_len, 48);
    p = GT__LIT(p, "\"sort_index\":");
    p = gt__fmt_u64(p, sort);
    p = GT__LIT(p, "}}");
    gt__jw_commit(&c->w, p);
    c->file_events++;
    c->total_events++;
}

static void write_track_meta(struct gt__conv *c, uint32_t t)
{
    struct gt__track *tr = &c->tracks[t];
    struct gt__proc *pr = &c->procs[tr->proc];
    uint32_t mark = c->file_index + 1;
    if (pr->meta_file != mark) {
        char pt[48];
        int n = snprintf(pt, sizeof(pt), "\"pid\":%u,\"tid\":0", pr->pid);
        meta_name(c, "process_name", pt, (size_t)n, pr->name, pr->name_len);
        meta_sort(c, "process_sort_index", pt, (size_t)n, pr->sort);
        pr->meta_file = mark;
    }
    meta_name(c, "thread_name", tr->pt, tr->pt_len, tr->name, tr->name_len);
    meta_sort(c, "thread_sort_index", tr->pt, tr->pt_len, tr->sort);
    tr->meta_file = mark;
}

char *gt__ev_begin(struct gt__conv *c, uint32_t t, size_t extra)
{
    /* Files are created with their first event (see gt__conv_hello). A
     * failure is sticky in c->err; the event then goes to the writer with
     * no file behind it, which discards it. */
    if (!c->file_open && !c->err) {
        int rc = gt__file_open(c);
        if (rc)
            c->err = rc;
    }
    if (c->tracks[t].meta_file != c->file_index + 1)
        write_track_meta(c, t);
    char *p = gt__jw_reserve(&c->w, extra + 256);
    if (c->file_events)
        *p++ = ',';
    *p++ = '\n';
    return p;
}

void gt__ev_end(struct gt__conv *c, char *end)
{
    gt__jw_commit(&c->w, end);
    c->file_events++;
    c->total_events++;
}

char *gt__x_open(struct gt__conv *c, uint32_t t, const char *cat, uint64_t s,
                 uint64_t e, size_t extra)
{
    size_t cl = strlen(cat);
    char *p = gt__ev_begin(c, t, cl + extra);
    if (e < s) {
        c->an.negative_durations++;
        e = s;
    }
    p = GT__LIT(p, "{\"ph\":\"X\",\"cat\":\"");
    memcpy(p, cat, cl);
    p += cl;
    p = GT__LIT(p, "\",");
    p = gt__put_pt(c, p, t);
    p = GT__LIT(p, ",\"ts\":");
    p = gt__fmt_us(p, gt__rel(c, s));
    p = GT__LIT(p, ",\"dur\":");
    p = gt__fmt_us(p, e - s);
    p = GT__LIT(p, ",\"name\":\"");
    return p;
}

void gt__emit_x(struct gt__conv *c, uint32_t t, const char *cat,
                const char *n1, uint32_t l1, const char *n2, uint32_t l2,
                const char *n3, uint32_t l3, uint64_t s, uint64_t e,
                const char *args, size_t args_len)
{
    char *p = gt__x_open(c, t, cat, s, e, l1 + l2 + l3 + args_len);
    memcpy(p, n1, l1);
    p += l1;
    memcpy(p, n2, l2);
    p += l2;
    memcpy(p, n3, l3);
    p += l3;
    *p++ = '"';
    if (args_len) {
        p = GT__LIT(p, ",\"args\":{");
        memcpy(p, args, args_len);
        p += args_len;
        *p++ = '}';
    }
    *p++ = '}';
    gt__ev_end(c, p);
}

static char *flow_one(struct gt__conv *c, char *p, char ph, const char *cat,
                      size_t cl, uint32_t t, uint64_t ts)
{
    p = GT__LIT(p, "{\"ph\":\"");
    *p++ = ph;
    p = GT__LIT(p, "\",\"cat\":\"");
    memcpy(p, cat, cl);
    p += cl;
    p = GT__LIT(p, "\",\"name\":\"");
    memcpy(p, cat, cl);
    p += cl;
    p = GT__LIT(p, "\",\"id\":");
    p = gt__fmt_u64(p, c->flow_id);
    if (ph == 'f')
        p = GT__LIT(p, ",\"bp\":\"e\"");
    *p++ = ',';
    p = gt__put_pt(c, p, t);
    p = GT__LIT(p, ",\"ts\":");
    p = gt__fmt_us(p, gt__rel(c, ts));
    *p++ = '}';
    return p;
}

void gt__emit_flow(struct gt__conv *c, const char *cat, uint32_t s_t,
                   uint64_t s_ts, uint32_t f_t, uint64_t f_ts)
{
    size_t cl = strlen(cat);
    c->flow_id++;
    char *p = gt__ev_begin(c, s_t, 2 * cl);
    p = flow_one(c, p, 's', cat, cl, s_t, s_ts);
    gt__ev_end(c, p);
    p = gt__ev_begin(c, f_t, 2 * cl);
    p = flow_one(c, p, 'f', cat, cl, f_t, f_ts);
    gt__ev_end(c, p);
}
