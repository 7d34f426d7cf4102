/*
 * The per-stream state (struct gt__cstream): what every output of a stream
 * shares and reads when it writes, kept once.
 *
 * Design: a stream feeds several writers (the main file set and one per
 * capture window, window.c). Metadata records (strings, process and thread
 * information, thread context, clock pairs, lost counts, warnings) change
 * the stream, here, exactly once; the writers hold a pointer to it and
 * read it at the moment they write an event or a file's metadata, so a
 * string defined after a window opened is as visible to that window as to
 * the main file, and nothing is copied when a window begins. What a record
 * means for one output (a renamed track, a counter drawn in its file) is
 * that writer's part of the record (records.c), told through s->note.
 *
 * Strings are stored twice, raw (for layer paths and labels) and escaped
 * once for JSON, so naming an event is a memcpy. Ids index an array (the
 * agent numbers strings densely from 1), capped at GT__STR_MAX_IDS and
 * GT__STR_MAX_BYTES against hostile input. A string re-sent with the same
 * id and text (after a reconnect) costs nothing; a different text replaces
 * it and bumps its version, which invalidates every writer's cache of it.
 *
 * Memory: fixed tables (lost counts, clocks, warnings, window history) and
 * the string and thread-name tables, both capped.
 */
#include <errno.h>

#include "common/alloc.h"
#include "common/util.h"
#include "daemon/convert/internal.h"

/* ------------------------------------------------------------ lifecycle */

int gt__cstream_init(struct gt__cstream *s, const struct gt__conv_opts *opts)
{
    memset(s, 0, sizeof(*s));
    s->rank = s->local_rank = s->world_size = -1;
    s->max_bytes = opts->max_file_bytes ? opts->max_file_bytes
                                        : GT__CONV_DEFAULT_MAX_BYTES;
    if (s->max_bytes < GT__CONV_MIN_MAX_BYTES)
        s->max_bytes = GT__CONV_MIN_MAX_BYTES;
    s->max_events = opts->max_file_events ? opts->max_file_events
                                          : GT__CONV_DEFAULT_MAX_EVENTS;
    s->node_map_cap = opts->max_pending_nodes ? opts->max_pending_nodes
                                              : GT__NODE_MAP_DEFAULT;
    s->keep_empty_main = opts->keep_empty_main;
    s->ack_marks = opts->ack_marks;
    if (opts->out_path && !(s->out_path = gt__strdup(opts->out_path)))
        return -ENOMEM;
    if (opts->out_dir && !(s->out_dir = gt__strdup(opts->out_dir)))
        return -ENOMEM;
    if (opts->stem && !(s->stem = gt__strdup(opts->stem)))
        return -ENOMEM;
    if (opts->index_dir && !opts->out_path &&
        !(s->index_dir = gt__strdup(opts->index_dir)))
        return -ENOMEM;
    return 0;
}

void gt__cstream_close(struct gt__cstream *s)
{
    for (uint32_t i = 0; i < s->nstrs; i++) {
        gt__free(s->strs[i].raw);
        gt__free(s->strs[i].esc);
    }
    gt__free(s->strs);
    gt__free(s->tnames);
    gt__cs_compiled_free(s);
    for (uint32_t i = 0; i < s->nwinfo; i++)
        gt__winfo_release(&s->winfo[i]);
    gt__free(s->winfo);
    for (size_t i = 0; i < s->nall; i++)
        gt__free(s->all_paths[i]);
    gt__free(s->all_paths);
    gt__free(s->hostname);
    gt__free(s->cmdline);
    gt__free(s->out_dir);
    gt__free(s->index_dir);
    gt__free(s->stem);
    gt__free(s->out_path);
}

int gt__cstream_hello(struct gt__cstream *s, const struct gt__hello_info *hello)
{
    s->have_hello = 1;
    s->pid = hello->h.pid;
    s->ppid = hello->h.ppid;
    s->rank = hello->h.rank;
    s->local_rank = hello->h.local_rank;
    s->world_size = hello->h.world_size;
    s->hello_flags = hello->h.flags;
    s->start_mono = hello->h.start_mono_ns;
    s->start_real = hello->h.start_real_ns;
    gt__free(s->hostname);
    gt__free(s->cmdline);
    s->hostname = gt__strdup(hello->hostname);
    s->cmdline = gt__strdup(hello->cmdline);
    if (!s->hostname || !s->cmdline)
        return -ENOMEM;
    /* Time 0 of the trace: the agent's start, which precedes every event
     * it records, rounded down to a millisecond. */
    if (!s->have_base) {
        s->base_ns = s->start_mono - s->start_mono % 1000000u;
        s->have_base = 1;
    }
    return 0;
}

void gt__cstream_chunk_begin(struct gt__cstream *s,
                             const struct gt_chunk_header *h)
{
    if (!s->have_base) {
        /* No hello: the chunk's earliest time, with a margin for records
         * of other threads that arrive later. */
        uint64_t f = h && h->first_ns > 10000000000ull
                         ? h->first_ns - 10000000000ull
                         : 0;
        s->base_ns = f - f % 1000000u;
        s->have_base = 1;
    }
    s->have_cur = 0; /* each chunk names its threads again */
}

/* ------------------------------------------------------------ strings */

/* Grows the table so that id has an entry. @return 0 or -ENOMEM. */
static int str_reserve(struct gt__cstream *s, uint32_t id)
{
    uint32_t n = s->nstrs ? s->nstrs : 256;
    if (id < s->nstrs)
        return 0;
    while (n <= id)
        n *= 2;
    if (n > GT__STR_MAX_IDS)
        n = GT__STR_MAX_IDS;
    struct gt__str *ns = gt__realloc(s->strs, n * sizeof(*ns));
    if (!ns)
        return -ENOMEM;
    memset(ns + s->nstrs, 0, (n - s->nstrs) * sizeof(*ns));
    s->strs = ns;
    s->nstrs = n;
    return 0;
}

void gt__str_define(struct gt__cstream *s, uint32_t id, const char *text,
                    size_t len)
{
    if (id == 0 || id >= GT__STR_MAX_IDS) {
        s->an.bad_string_ids++;
        return;
    }
    if (len > GT_STRING_MAX)
        len = GT_STRING_MAX;
    if (str_reserve(s, id)) {
        s->an.strings_dropped++;
        return;
    }
    struct gt__str *e = &s->strs[id];
    if (e->raw && e->raw_len == len && memcmp(e->raw, text, len) == 0)
        return; /* re-sent after a reconnect: nothing changes */
    size_t need = len + 1 + GT__JSON_ESCAPED_MAX(len) + 1;
    if (s->str_bytes + need > GT__STR_MAX_BYTES) {
        s->an.strings_dropped++;
        return;
    }
    char *raw = gt__malloc(len + 1);
    char *esc = gt__malloc(GT__JSON_ESCAPED_MAX(len) + 1);
    if (!raw || !esc) {
        gt__free(raw);
        gt__free(esc);
        s->an.strings_dropped++;
        return;
    }
    memcpy(raw, text, len);
    raw[len] = 0;
    size_t el = gt__json_escape(esc, text, len);
    esc[el] = 0;
    /* Keep only what the escaped text needs. */
    char *fit = gt__realloc(esc, el + 1);
    if (fit)
        esc = fit;
    if (e->raw)
        s->str_bytes -= e->raw_len + 1 + e->esc_len + 1;
    gt__free(e->raw);
    gt__free(e->esc);
    e->raw = raw;
    e->esc = esc;
    e->raw_len = (uint32_t)len;
    e->esc_len = (uint32_t)el;
    e->ver++;
    if (e->ver == 0)
        e->ver = 1; /* 0 means undefined */
    s->str_bytes += len + 1 + el + 1;
}

const char *gt__cstream_raw(const struct gt__cstream *s, uint32_t id,
                            uint32_t *len)
{
    static const char unknown[] = "(unknown string)";
    if (id < s->nstrs && s->strs[id].raw) {
        *len = s->strs[id].raw_len;
        return s->strs[id].raw;
    }
    *len = sizeof(unknown) - 1;
    return unknown;
}

/* ------------------------------------------------------------ threads */

uint32_t gt__cstream_tname(const struct gt__cstream *s, uint32_t tid)
{
    const uint32_t mask = 2 * GT__MAX_THREADS - 1;
    if (!s->tnames)
        return 0;
    for (uint32_t i = gt__tid_hash(tid) & mask;; i = (i + 1) & mask) {
        const struct gt__tname *t = &s->tnames[i];
        if (!t->used)
            return 0;
        if (t->tid == tid)
            return t->name;
    }
}

int gt__cstream_tname_set(struct gt__cstream *s, uint32_t tid, uint32_t name)
{
    const uint32_t mask = 2 * GT__MAX_THREADS - 1;
    if (!s->tnames) {
        s->tnames = gt__calloc(2 * GT__MAX_THREADS, sizeof(*s->tnames));
        if (!s->tnames)
            return 0;
    }
    uint32_t i = gt__tid_hash(tid) & mask;
    while (s->tnames[i].used && s->tnames[i].tid != tid)
        i = (i + 1) & mask;
    struct gt__tname *t = &s->tnames[i];
    if (!t->used) {
        /* Full: the writers' thread tables are full too and count it. */
        if (s->ntnames >= GT__MAX_THREADS)
            return 0;
        *t = (struct gt__tname){.tid = tid, .used = 1};
        s->ntnames++;
    }
    if (t->name == name)
        return 0;
    t->name = name;
    return 1;
}

/* ------------------------------------------------------------ files */

void gt__cstream_file_opened(struct gt__cstream *s, const char *path,
                             int window, uint32_t win_id)
{
    char *dup = gt__strdup(path);
    char **np = gt__realloc(s->all_paths, (s->nall + 2) * sizeof(*np));

    if (np)
        s->all_paths = np;
    if (!dup || !np) {
        gt__free(dup);
        return; /* the file exists; only the listing misses it */
    }
    s->all_paths[s->nall++] = dup;
    s->all_paths[s->nall] = NULL;
    if (window) {
        struct gt__conv_window *info = gt__winfo_find(s, win_id);
        if (info && !info->file)
            info->file = gt__strdup(path);
    }
}

/* ------------------------------------------------------------ windows */

struct gt__conv_window *gt__winfo_find(struct gt__cstream *s, uint32_t id)
{
    for (uint32_t i = s->nwinfo; i > 0; i--)
        if (s->winfo[i - 1].id == id)
            return &s->winfo[i - 1];
    return NULL;
}

void gt__winfo_release(struct gt__conv_window *w)
{
    gt__free((char *)w->spec);
    gt__free((char *)w->layer);
    gt__free((char *)w->file);
}

struct gt__conv_window *gt__winfo_add(struct gt__cstream *s)
{
    if (!s->winfo) {
        s->winfo = gt__calloc(GT__MAX_WINDOWS, sizeof(*s->winfo));
        if (!s->winfo)
            return NULL;
    }
    if (s->nwinfo == GT__MAX_WINDOWS) {
        gt__winfo_release(&s->winfo[0]);
        memmove(s->winfo, s->winfo + 1,
                (GT__MAX_WINDOWS - 1) * sizeof(*s->winfo));
        s->nwinfo--;
    }
    struct gt__conv_window *w = &s->winfo[s->nwinfo++];
    memset(w, 0, sizeof(*w));
    return w;
}

/* ------------------------------------------------------------ records */

/*
 * The stream's part of the metadata records (records.c's table calls
 * these with the record's size already checked). Anomalies go to s->an,
 * what changed to s->note.
 */

void gt__cs_on_string(struct gt__cstream *s, const uint8_t *rec,
                      uint16_t size)
{
    uint32_t id;
    memcpy(&id, rec + 4, 4);
    gt__str_define(s, id, (const char *)rec + 8, size - 8u);
}

void gt__cs_on_process(struct gt__cstream *s, const uint8_t *rec,
                       uint16_t size)
{
    struct gt_r_process_info r;
    (void)size;
    memcpy(&r, rec, sizeof(r));
    if (s->have_hello && r.pid != s->pid) {
        s->an.pid_mismatch++;
        return;
    }
    s->pid = r.pid;
    s->ppid = r.ppid;
    if (r.rank != s->rank)
        s->note |= GT__NOTE_CHANGED; /* the process is named by rank */
    s->rank = r.rank;
    s->local_rank = r.local_rank;
    s->world_size = r.world_size;
    if (!s->start_mono && r.start_mono_ns) {
        s->start_mono = r.start_mono_ns;
        s->start_real = r.start_real_ns;
    }
}

void gt__cs_on_thread_info(struct gt__cstream *s, const uint8_t *rec,
                           uint16_t size)
{
    struct gt_r_thread_info r;
    (void)size;
    memcpy(&r, rec, sizeof(r));
    if (gt__cstream_tname_set(s, r.tid, r.name))
        s->note |= GT__NOTE_CHANGED;
}

void gt__cs_on_thread(struct gt__cstream *s, const uint8_t *rec,
                      uint16_t size)
{
    struct gt_r_thread r;
    (void)size;
    memcpy(&r, rec, sizeof(r));
    s->cur_tid = r.tid;
    s->have_cur = 1;
}

void gt__cs_on_clock(struct gt__cstream *s, const uint8_t *rec,
                     uint16_t size)
{
    struct gt_r_clock_sync r;
    uint32_t i;
    (void)size;
    memcpy(&r, rec, sizeof(r));
    if (r.device < 0) {
        if (s->host_pairs++ == 0) {
            s->host_first_mono = r.mono_ns;
            s->host_first_real = r.real_ns;
        }
        s->host_last_mono = r.mono_ns;
        s->host_last_real = r.real_ns;
        return;
    }
    for (i = 0; i < s->ndevclk; i++)
        if (s->devclk[i].device == r.device)
            break;
    if (i == s->ndevclk) {
        if (s->ndevclk == GT__MAX_DEVICES)
            return;
        s->ndevclk++;
        s->devclk[i].device = r.device;
    }
    struct gt__dev_clock *d = &s->devclk[i];
    d->count++;
    d->mono_ns = r.mono_ns;
    d->device_ts = r.device_ts;
    d->uncertainty_ns = r.uncertainty_ns;
}

void gt__cs_on_lost(struct gt__cstream *s, const uint8_t *rec, uint16_t size)
{
    struct gt_r_lost r;
    uint32_t i;
    (void)size;
    memcpy(&r, rec, sizeof(r));
    if (r.what < GT_LOST_EVENTS || r.what > GT_LOST_UNDELIVERED) {
        s->an.bad_records++;
        return;
    }
    for (i = 0; i < s->nlost; i++)
        if (s->lost[i].tid == r.tid && s->lost[i].what == r.what)
            break;
    if (i == s->nlost) {
        if (s->nlost == GT__MAX_LOST) {
            s->an.threads_dropped++;
            return;
        }
        s->lost[s->nlost++] = (struct gt__lost){r.tid, r.what, 0};
    }
    uint64_t old = s->lost[i].count;
    if (r.count == old)
        return;
    /* Cumulative counts: the newest record replaces the older one. */
    s->lost_sum[r.what] = s->lost_sum[r.what] - old + r.count;
    s->lost[i].count = r.count;
    s->note |= GT__NOTE_CHANGED;
}

void gt__cs_on_goodbye(struct gt__cstream *s, const uint8_t *rec,
                       uint16_t size)
{
    (void)rec;
    (void)size;
    s->goodbye = 1;
}

void gt__cs_on_job_route(struct gt__cstream *s, const uint8_t *rec,
                         uint16_t size)
{
    struct gt_r_job_route r;
    (void)size;
    memcpy(&r, rec, sizeof(r));
    s->job_route = r.up != 0;
}

void gt__cs_on_warning(struct gt__cstream *s, const uint8_t *rec,
                       uint16_t size)
{
    struct gt_r_warning r;
    (void)size;
    memcpy(&r, rec, sizeof(r));
    if (s->nwarnings == GT__MAX_WARNINGS) {
        s->an.warnings_dropped++;
        return;
    }
    s->warnings[s->nwarnings++] =
        (struct gt__warning){.code = r.code, .text = r.text, .ts = r.ts};
    s->note |= GT__NOTE_ADDED;
}

/* Kept even outside capture windows: every file's metadata lists the
 * newest ones, so that windows of several ranks can be aligned. */
static void add_coll(struct gt__cstream *s, struct gt__coll k)
{
    s->colls[s->ncoll_total % GT__MAX_COLLECTIVES] = k;
    s->ncoll_total++;
}

void gt__cs_on_collective(struct gt__cstream *s, const uint8_t *rec,
                          uint16_t size)
{
    struct gt_r_collective r;
    (void)size;
    memcpy(&r, rec, sizeof(r));
    add_coll(s, (struct gt__coll){.op = r.op, .group = r.group, .ranks = r.ranks,
                                  .seq = r.seq, .begin_ns = r.begin_ns,
                                  .end_ns = r.end_ns});
}

/*
 * On GPUs, torch.distributed's NCCL calls return once enqueued, so their
 * host times bracket nothing (the Python package does not record them);
 * the NCCL kernel itself does: it cannot end before every rank's kernel
 * has started. So each kernel whose name starts with "nccl" (ncclKernel_*,
 * ncclDevKernel_*; times already on the host clock) is a collective of
 * group 2^31 | its name's hash, numbered per name: ranks that run the
 * same collectives on one communicator launch the same kernels in the
 * same order.
 */
void gt__cs_on_kernel(struct gt__cstream *s, const uint8_t *rec, uint16_t size)
{
    struct gt_r_gpu_kernel r;
    const struct gt__str *name;
    uint32_t group, i;
    (void)size;
    memcpy(&r, rec, sizeof(r));
    if (r.name == 0 || r.name >= s->nstrs || !s->strs[r.name].ver ||
        strncmp(s->strs[r.name].raw, "nccl", 4) != 0 || r.end < r.start)
        return;
    name = &s->strs[r.name];
    group = 0x80000000u | (gt__fnv1a32(name->raw, name->raw_len) & 0x7fffffffu);
    for (i = 0; i < s->nnccl && s->nccl[i].group != group; i++)
        ;
    if (i == s->nnccl) {
        if (s->nnccl == GT__MAX_NCCL_NAMES)
            return;
        s->nccl[s->nnccl++].group = group;
    }
    add_coll(s, (struct gt__coll){.op = r.name, .group = group,
                                  .seq = s->nccl[i].count++,
                                  .begin_ns = r.start, .end_ns = r.end});
}
