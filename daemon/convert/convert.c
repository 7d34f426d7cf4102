/*
 * The converter: wire records -> Chrome Trace Event JSON (convert.h is the
 * contract, schema/trace-output.md the normative output format).
 *
 * This file dispatches records. Begin/end pairs (scopes, backward nodes)
 * are matched on per-thread stacks and written as one complete ('X') event
 * when they end; a thread's timestamps are clamped to never go backwards,
 * which together with the stack discipline makes every thread track nest
 * by construction, whatever an untrusted agent sends. Records that already
 * carry start and end (GPU activity, CUDA API calls) go through gt__place
 * (chrome.c) instead, because they arrive late and in no guaranteed order.
 *
 * Flows: a flow's start and finish are always written together, at the
 * moment the second of their two records is seen. That is what keeps
 * arrows from dangling across rotated files: both halves land in the same
 * file by construction. The cost is that the records waiting for their
 * partner are held in bounded maps (conv_map.c), evicting the oldest.
 */
#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "common/alloc.h"
#include "daemon/convert/internal.h"

/* ------------------------------------------------------------ lifecycle */

struct gt__conv *gt__conv_create(const struct gt__conv_opts *opts)
{
    struct gt__conv *c = NULL;
    int rc = -EINVAL;
    if (!opts || (!opts->out_path && (!opts->out_dir || !opts->stem)))
        goto out_err;
    rc = -ENOMEM;
    c = gt__calloc(1, sizeof(*c));
    if (!c)
        goto out_err;
    c->fd = -1;
    c->rank = c->local_rank = c->world_size = -1;
    c->max_bytes = opts->max_file_bytes ? opts->max_file_bytes
                                        : GT__CONV_DEFAULT_MAX_BYTES;
    if (c->max_bytes < GT__CONV_MIN_MAX_BYTES)
        c->max_bytes = GT__CONV_MIN_MAX_BYTES;
    c->max_events = opts->max_file_events ? opts->max_file_events
                                          : GT__CONV_DEFAULT_MAX_EVENTS;
    c->node_map_cap = opts->max_pending_nodes ? opts->max_pending_nodes
                                              : GT__NODE_MAP_DEFAULT;
    c->keep_empty_main = opts->keep_empty_main;
    if (opts->out_path && !(c->out_path = gt__strdup(opts->out_path)))
        goto out_free;
    if (opts->out_dir && !(c->out_dir = gt__strdup(opts->out_dir)))
        goto out_free;
    if (opts->stem && !(c->stem = gt__strdup(opts->stem)))
        goto out_free;
    if (gt__jw_init(&c->w, 4u << 20))
        goto out_free;
    c->thread_mask = 2 * GT__MAX_THREADS - 1;
    c->thread_slots = gt__calloc(2 * GT__MAX_THREADS, sizeof(uint32_t));
    if (!c->thread_slots)
        goto out_free;
    if (gt__bmap_init(&c->nodes, c->node_map_cap) ||
        gt__bmap_init(&c->ext, GT__CORR_MAP_CAP) ||
        gt__bmap_init(&c->api, GT__CORR_MAP_CAP) ||
        gt__bmap_init(&c->kpend, GT__CORR_MAP_CAP) ||
        gt__bmap_init(&c->wait_idx, GT__WAIT_CAP))
        goto out_free;
    c->wait = gt__calloc(GT__WAIT_CAP, sizeof(*c->wait));
    c->streams = gt__calloc(2 * GT__MAX_STREAMS, sizeof(*c->streams));
    if (!c->wait || !c->streams)
        goto out_free;
    return c;

out_free:
    gt__conv_free(c);
out_err:
    errno = -rc;
    return NULL;
}

void gt__conv_free(struct gt__conv *c)
{
    if (!c)
        return;
    gt__win_free(c);
    if (c->fd >= 0)
        close(c->fd);
    gt__jw_close(&c->w);
    for (uint32_t i = 0; i < c->nstrs; i++) {
        gt__free(c->strs[i].raw);
        gt__free(c->strs[i].esc);
    }
    gt__free(c->strs);
    for (uint32_t i = 0; i < c->nthreads; i++) {
        gt__free(c->threads[i].scopes.e);
        gt__free(c->threads[i].held);
        gt__free(c->threads[i].nodes.e);
    }
    gt__free(c->threads);
    gt__free(c->thread_slots);
    for (uint32_t i = 1; i < c->ntracks; i++)
        gt__free(c->tracks[i].name);
    gt__free(c->tracks);
    for (uint32_t i = 0; i < c->nprocs; i++)
        gt__free(c->procs[i].name);
    gt__free(c->procs);
    gt__bmap_free(&c->nodes);
    gt__bmap_free(&c->ext);
    gt__bmap_free(&c->api);
    gt__bmap_free(&c->kpend);
    gt__free(c->streams);
    gt__bmap_free(&c->wait_idx);
    gt__free(c->wait);
    gt__layers_free(c);
    for (size_t i = 0; i < c->nfiles; i++)
        gt__free(c->files[i].path);
    gt__free(c->files);
    gt__free(c->paths);
    gt__free(c->hostname);
    gt__free(c->cmdline);
    gt__free(c->out_dir);
    gt__free(c->stem);
    gt__free(c->out_path);
    gt__free(c);
}

size_t gt__conv_files(const struct gt__conv *c, const char *const **paths)
{
    static const char *const none[1] = {NULL};
    *paths = c->all_paths ? (const char *const *)c->all_paths : none;
    return c->nall;
}

uint64_t gt__conv_events(const struct gt__conv *c)
{
    uint64_t n = c->total_events + c->win_events;
    for (uint32_t i = 0; i < c->nwout; i++)
        n += c->wout[i].sub->total_events;
    return n;
}

void gt__conv_summary(const struct gt__conv *c, struct gt__conv_summary *out)
{
    memset(out, 0, sizeof(*out));
    out->events = gt__conv_events(c);
    out->files = c->nall;
    out->bytes = c->total_bytes + (c->file_open ? c->w.bytes : 0) + c->win_bytes;
    for (uint32_t i = 0; i < c->nwout; i++) {
        const struct gt__conv *w = c->wout[i].sub;
        out->bytes += w->total_bytes + (w->file_open ? w->w.bytes : 0);
    }
    out->anomalies = c->win_anomalies;
    out->chunks = c->chunks;
    out->records = c->records;
    out->lost_events = c->lost_sum[GT_LOST_EVENTS];
    out->lost_cupti = c->lost_sum[GT_LOST_CUPTI];
    out->lost_chunks = c->lost_sum[GT_LOST_CHUNKS];
#define GT__ANOM_SUM(n) out->anomalies += c->an.n;
    GT__ANOMALIES(GT__ANOM_SUM)
#undef GT__ANOM_SUM
}

/* Opens the first file now (gt__ev_begin opens it at the first event). */
static int ensure_file(struct gt__conv *c)
{
    int rc;
    if (c->file_open || c->err)
        return c->err;
    rc = gt__file_open(c);
    if (rc)
        c->err = rc;
    return rc;
}

int gt__conv_hello(struct gt__conv *c, const struct gt__hello_info *hello)
{
    c->have_hello = 1;
    c->pid = hello->h.pid;
    c->ppid = hello->h.ppid;
    c->rank = hello->h.rank;
    c->local_rank = hello->h.local_rank;
    c->world_size = hello->h.world_size;
    c->start_mono = hello->h.start_mono_ns;
    c->start_real = hello->h.start_real_ns;
    gt__free(c->hostname);
    gt__free(c->cmdline);
    c->hostname = gt__strdup(hello->hostname);
    c->cmdline = gt__strdup(hello->cmdline);
    if (!c->hostname || !c->cmdline)
        return -ENOMEM;
    /* Time 0 of the trace: the agent's start, which precedes every event
     * it records, rounded down to a millisecond. */
    if (!c->have_base) {
        c->base_ns = c->start_mono - c->start_mono % 1000000u;
        c->have_base = 1;
    }
    /* The file is created with its first event: a stream that records
     * only inside capture windows leaves no empty main trace. */
    return 0;
}

/* The current thread (from the last GT_R_THREAD), or NULL (counted). */
static struct gt__thread *cur_thread(struct gt__conv *c)
{
    if (c->cur)
        return &c->threads[c->cur - 1];
    c->an.no_thread++;
    return NULL;
}

void gt__see_ts(struct gt__conv *c, uint64_t ts)
{
    if (!c->have_ts) {
        c->min_ts = c->max_ts = ts;
        c->have_ts = 1;
    } else if (ts > c->max_ts) {
        c->max_ts = ts;
    } else if (ts < c->min_ts) {
        c->min_ts = ts;
    }
}

/* A thread's time never goes back: clamping keeps its stacks nested. */
static uint64_t thread_ts(struct gt__conv *c, struct gt__thread *th,
                          uint64_t ts)
{
    if (ts < th->last_ts) {
        c->an.time_backwards++;
        ts = th->last_ts;
    }
    th->last_ts = ts;
    gt__see_ts(c, ts);
    return ts;
}

static struct gt__open *stack_push(struct gt__conv *c, struct gt__stack *s)
{
    if (s->depth >= GT__STACK_MAX) {
        c->an.depth_dropped++;
        s->dropped++;
        return NULL;
    }
    if (s->depth == s->cap) {
        uint32_t cap = s->cap ? s->cap * 2 : 16;
        struct gt__open *ne = gt__realloc(s->e, cap * sizeof(*ne));
        if (!ne) {
            c->an.depth_dropped++;
            s->dropped++;
            return NULL;
        }
        s->e = ne;
        s->cap = cap;
    }
    struct gt__open *o = &s->e[s->depth++];
    memset(o, 0, sizeof(*o));
    return o;
}

/* ------------------------------------------------------------ emitters */

static void emit_scope(struct gt__conv *c, struct gt__thread *th,
                       const struct gt__open *o, uint64_t end, int unclosed)
{
    static const char *const cats[] = {"user", "module", "nvtx"};
    uint32_t nl, cl = 0;
    const char *name = gt__str_esc(c, o->name, &nl);
    const char *cls = o->cls ? gt__str_esc(c, o->cls, &cl) : "";
    const char *cat = o->kind < GT_SCOPE_KIND_COUNT ? cats[o->kind] : "scope";
    int module = o->kind == GT_SCOPE_MODULE;
    uint32_t tracks[2] = {th->track, module ? gt__thread_track(c, th, 2) : 0};
    for (int i = 0; i < 2 && tracks[i]; i++) {
        char *p = gt__x_open(c, tracks[i], i ? "layer_forward" : cat, o->ts,
                             end, nl + cl + 64);
        p = put_esc(p, name, nl);
        if (module) {
            /* "<path> (<Class>) forward" */
            if (cl) {
                p = GT__LIT(p, " (");
                p = put_esc(p, cls, cl);
                *p++ = ')';
            }
            p = GT__LIT(p, " forward");
        }
        *p++ = '"';
        int domain = !module && cl;
        if (domain || unclosed) {
            p = GT__LIT(p, ",\"args\":{");
            if (domain) {
                p = GT__LIT(p, "\"domain\":\"");
                p = put_esc(p, cls, cl);
                *p++ = '"';
            }
            if (unclosed)
                p = domain ? GT__LIT(p, ",\"unclosed\":true")
                           : GT__LIT(p, "\"unclosed\":true");
            *p++ = '}';
        }
        *p++ = '}';
        gt__ev_end(c, p);
    }
}

/*
 * Writes a closed scope, parents before same-start children. Viewers nest
 * two X events that start at the same time by their order in the file
 * (chrome://tracing; Perfetto, google/perfetto#878), and a stack writes a
 * child when it ends, before its parent. So a scope that starts exactly
 * when its parent does is held (at most GT__STACK_MAX per thread) until
 * the parent is written, then released outermost first. Called right
 * after o was popped: the parent is the new top of the stack.
 */
static void scope_closed(struct gt__conv *c, struct gt__thread *th,
                         const struct gt__open *o, uint64_t end, int unclosed)
{
    struct gt__stack *s = &th->scopes;
    if (s->depth > 0 && s->e[s->depth - 1].ts == o->ts) {
        if (th->nheld == th->held_cap && th->held_cap < GT__STACK_MAX) {
            uint32_t cap = th->held_cap ? th->held_cap * 2 : 8;
            struct gt__held *nh = gt__realloc(th->held, cap * sizeof(*nh));
            if (nh) {
                th->held = nh;
                th->held_cap = cap;
            }
        }
        if (th->nheld < th->held_cap) {
            th->held[th->nheld++] = (struct gt__held){*o, end, unclosed};
            return;
        }
    }
    emit_scope(c, th, o, end, unclosed);
    /* Held scopes with this start can only be its descendants (a thread's
     * times never go back along its stack); they were held innermost
     * first, so releasing from the end writes outer before inner. */
    while (th->nheld > 0 && th->held[th->nheld - 1].o.ts == o->ts) {
        struct gt__held h = th->held[--th->nheld];
        emit_scope(c, th, &h.o, h.end, h.unclosed);
    }
}

/*
 * Ends the entry that match() accepts on stack s at ts: entries above it
 * were left open by their thread (a lost end, or improper nesting) and are
 * closed at the same time, which keeps the track nested.
 */
typedef int (*match_fn)(const struct gt__open *o, const void *key);
typedef void (*emit_fn)(struct gt__conv *c, struct gt__thread *th,
                        const struct gt__open *o, uint64_t end, int unclosed);

static void stack_end(struct gt__conv *c, struct gt__thread *th,
                      struct gt__stack *s, match_fn match, const void *key,
                      emit_fn emit, uint64_t ts)
{
    /* Emitting never creates a thread, so th and s stay valid. */
    if (s->depth > 0 && match(&s->e[s->depth - 1], key)) {
        struct gt__open o = s->e[--s->depth];
        emit(c, th, &o, ts, 0);
        return;
    }
    if (s->dropped > 0) {
        /* Most likely the end of a begin dropped beyond the depth cap. */
        s->dropped--;
        return;
    }
    uint32_t i = s->depth;
    while (i > 0 && !match(&s->e[i - 1], key))
        i--;
    if (i == 0) {
        c->an.end_without_begin++;
        return;
    }
    while (s->depth >= i) {
        struct gt__open o = s->e[--s->depth];
        if (s->depth >= i)
            c->an.closed_implicitly++;
        emit(c, th, &o, ts, 0);
        if (s->depth == 0)
            break;
    }
}

struct scope_key {
    uint16_t kind;
    uint32_t name;
};

static int scope_match(const struct gt__open *o, const void *key)
{
    const struct scope_key *k = key;
    return o->kind == k->kind && o->name == k->name;
}

struct node_key {
    uint64_t seq, fwd_tid;
};

static int node_match(const struct gt__open *o, const void *key)
{
    const struct node_key *k = key;
    return o->seq == k->seq && o->fwd_tid == k->fwd_tid;
}

/* ------------------------------------------------------------ dispatch */

/* Copies a fixed-size record after checking its size. */
#define GET(rec, size, var)                                                \
    do {                                                                   \
        if ((size) != sizeof(var)) {                                       \
            c->an.bad_records++;                                           \
            return;                                                        \
        }                                                                  \
        memcpy(&(var), (rec), sizeof(var));                                \
    } while (0)

static void on_record(struct gt__conv *c, uint16_t type, uint16_t size,
                      const uint8_t *rec)
{
    struct gt__thread *th;
    switch (type) {
    case GT_R_STRING: {
        if (size < sizeof(struct gt_r_string)) {
            c->an.bad_records++;
            return;
        }
        uint32_t id;
        memcpy(&id, rec + 4, 4);
        gt__str_define(c, id, (const char *)rec + 8, size - 8u);
        return;
    }
    case GT_R_PROCESS_INFO: {
        struct gt_r_process_info r;
        if (size < sizeof(r)) {
            c->an.bad_records++;
            return;
        }
        memcpy(&r, rec, sizeof(r));
        gt__on_process(c, &r);
        return;
    }
    case GT_R_THREAD_INFO: {
        struct gt_r_thread_info r;
        GET(rec, size, r);
        gt__thread_named(c, r.tid, r.name);
        return;
    }
    case GT_R_THREAD: {
        struct gt_r_thread r;
        GET(rec, size, r);
        th = gt__thread_get(c, r.tid);
        c->cur = th ? (uint32_t)(th - c->threads) + 1 : 0;
        return;
    }
    case GT_R_SCOPE_BEGIN: {
        struct gt_r_scope_begin r;
        GET(rec, size, r);
        if (!(th = cur_thread(c)))
            return;
        uint64_t ts = thread_ts(c, th, r.ts);
        if (r.kind == GT_SCOPE_MODULE) {
            gt__layer_set_class(c, r.name, r.cls);
            for (uint32_t i = th->scopes.depth; i > 0; i--) {
                const struct gt__open *e = &th->scopes.e[i - 1];
                if (e->kind == GT_SCOPE_MODULE) {
                    if (e->name != r.name)
                        gt__layer_nest(c, r.name, e->name);
                    break;
                }
            }
        }
        struct gt__open *o = stack_push(c, &th->scopes);
        if (!o)
            return;
        o->ts = ts;
        o->kind = r.kind;
        o->name = r.name;
        o->cls = r.cls;
        return;
    }
    case GT_R_SCOPE_END: {
        struct gt_r_scope_end r;
        GET(rec, size, r);
        if (!(th = cur_thread(c)))
            return;
        struct scope_key k = {r.kind, r.name};
        stack_end(c, th, &th->scopes, scope_match, &k, scope_closed,
                  thread_ts(c, th, r.ts));
        return;
    }
    case GT_R_NODE_CREATED: {
        struct gt_r_node_created r;
        GET(rec, size, r);
        if (!(th = cur_thread(c)))
            return;
        /* A creation after backward nodes ran outside any pass: the next
         * forward has begun, so that backward's layer spans are complete.
         * Unless it is older than the thread's last event: then it is a
         * capture window's replay (the agent's per-thread time never goes
         * back otherwise), which keeps its forward time (it ends no span,
         * so needs no clamping) and does not end the backward group. */
        uint64_t ts = r.ts;
        if (ts >= th->last_ts)
            ts = thread_ts(c, th, ts);
        else
            gt__see_ts(c, ts);
        gt__layers_outside_pass(c, ts);
        if (gt__node_created_late(c, r.fwd_tid, r.seq, ts, th->os_tid,
                                  r.layer))
            return;
        struct gt__bmap_val v = {.x = ts, .p = th->os_tid, .q = r.layer};
        if (gt__bmap_put(&c->nodes, r.fwd_tid, r.seq, &v))
            c->an.node_map_evicted++;
        return;
    }
    case GT_R_BWD_NODE_BEGIN: {
        struct gt_r_bwd_node_begin r;
        GET(rec, size, r);
        if (!(th = cur_thread(c)))
            return;
        uint64_t ts = thread_ts(c, th, r.ts);
        struct gt__open *o = stack_push(c, &th->nodes);
        if (!o)
            return;
        o->ts = ts;
        o->name = r.name;
        o->seq = r.seq;
        o->fwd_tid = r.fwd_tid;
        struct gt__bmap_val v;
        if (r.seq != UINT64_MAX &&
            gt__bmap_take(&c->nodes, r.fwd_tid, r.seq, &v)) {
            o->has_creation = 1;
            o->created_ts = v.x;
            o->created_tid = v.p;
            o->layer = v.q;
        }
        return;
    }
    case GT_R_BWD_NODE_END: {
        struct gt_r_bwd_node_end r;
        GET(rec, size, r);
        if (!(th = cur_thread(c)))
            return;
        struct node_key k = {r.seq, r.fwd_tid};
        stack_end(c, th, &th->nodes, node_match, &k, gt__node_ended,
                  thread_ts(c, th, r.ts));
        return;
    }
    case GT_R_BWD_PASS_BEGIN:
    case GT_R_BWD_PASS_END: {
        struct gt_r_mark r;
        GET(rec, size, r);
        if (!(th = cur_thread(c)))
            return;
        uint64_t ts = thread_ts(c, th, r.ts);
        if (type == GT_R_BWD_PASS_BEGIN)
            gt__pass_begin(c, th, ts, r.value);
        else
            gt__pass_end(c, th, ts, r.value);
        return;
    }
    case GT_R_STEP: {
        struct gt_r_mark r;
        GET(rec, size, r);
        th = c->cur ? &c->threads[c->cur - 1] : NULL;
        uint64_t ts = th ? thread_ts(c, th, r.ts) : r.ts;
        gt__see_ts(c, ts);
        gt__step(c, ts, r.value);
        return;
    }
    case GT_R_INSTANT: {
        struct gt_r_instant r;
        uint32_t nl;
        GET(rec, size, r);
        if (!(th = cur_thread(c)))
            return;
        uint64_t ts = thread_ts(c, th, r.ts);
        const char *name = gt__str_esc(c, r.name, &nl);
        char *p = gt__ev_begin(c, th->track, nl + 64);
        p = GT__LIT(p, "{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"instant\","
                       "\"name\":\"");
        p = put_esc(p, name, nl);
        p = GT__LIT(p, "\",");
        p = gt__put_pt(c, p, th->track);
        p = GT__LIT(p, ",\"ts\":");
        p = gt__fmt_us(p, gt__rel(c, ts));
        *p++ = '}';
        gt__ev_end(c, p);
        return;
    }
    case GT_R_GPU_KERNEL: {
        struct gt_r_gpu_kernel r;
        GET(rec, size, r);
        gt__on_kernel(c, &r);
        return;
    }
    case GT_R_GPU_MEMCPY: {
        struct gt_r_gpu_memcpy r;
        GET(rec, size, r);
        gt__on_memcpy(c, &r);
        return;
    }
    case GT_R_GPU_MEMSET: {
        struct gt_r_gpu_memset r;
        GET(rec, size, r);
        gt__on_memset(c, &r);
        return;
    }
    case GT_R_CUDA_API: {
        struct gt_r_cuda_api r;
        GET(rec, size, r);
        gt__on_cuda_api(c, &r);
        return;
    }
    case GT_R_EXT_CORR: {
        struct gt_r_ext_corr r;
        GET(rec, size, r);
        gt__on_ext_corr(c, &r);
        return;
    }
    case GT_R_CLOCK_SYNC: {
        struct gt_r_clock_sync r;
        GET(rec, size, r);
        gt__on_clock(c, &r);
        return;
    }
    case GT_R_LOST: {
        struct gt_r_lost r;
        GET(rec, size, r);
        gt__on_lost(c, &r);
        return;
    }
    case GT_R_WINDOW_BEGIN:
    case GT_R_WINDOW_END:
    case GT_R_WINDOW_DONE: {
        struct gt_r_window r;
        GET(rec, size, r);
        gt__on_window(c, type, &r);
        return;
    }
    case GT_R_WARNING: {
        struct gt_r_warning r;
        GET(rec, size, r);
        gt__on_warning(c, &r);
        return;
    }
    default:
        c->an.unknown_records++;
        return;
    }
}

void gt__conv_chunk_begin(struct gt__conv *c, const struct gt_chunk_header *h)
{
    if (!c->have_base) {
        /* No hello: the chunk's earliest time, with a margin for records
         * of other threads that arrive later. */
        uint64_t f = h && h->first_ns > 10000000000ull
                         ? h->first_ns - 10000000000ull
                         : 0;
        c->base_ns = f - f % 1000000u;
        c->have_base = 1;
    }
    c->chunks++;
    c->records += h && !c->root ? h->record_count : 0;
    c->cur = 0; /* each chunk names its threads again */
}

void gt__conv_record(struct gt__conv *c, uint16_t type, uint16_t size,
                     const uint8_t *rec)
{
    if (c->err)
        return;
    if (c->root)
        c->records++;
    on_record(c, type, size, rec);
    if ((c->w.bytes >= c->max_bytes || c->file_events >= c->max_events) &&
        gt__maybe_rotate(c) && !c->err)
        c->err = -EIO;
}

void gt__conv_chunk_end(struct gt__conv *c)
{
    gt__nodes_chunk_end(c, 0);
    gt__layers_chunk_end(c);
    if (c->w.err && !c->err)
        c->err = c->w.err;
}

int gt__conv_chunk(struct gt__conv *c, const struct gt_chunk_header *h,
                  const uint8_t *records, size_t raw_size)
{
    struct gt__rec_iter it;
    uint16_t type, size;
    const uint8_t *rec;
    int rc;
    if (c->err)
        return c->err;
    gt__conv_chunk_begin(c, h);
    gt__win_chunk_begin(c, h);
    gt__rec_iter_init(&it, records, raw_size);
    while ((rc = gt__rec_next(&it, &type, &size, &rec)) == 1 && !c->err)
        gt__win_record(c, type, size, rec);
    if (rc < 0)
        c->an.bad_records++; /* the rest of the chunk is unreadable */
    gt__conv_chunk_end(c);
    gt__win_chunk_end(c);
    return c->err;
}

/* Closes everything still open at the last time seen, innermost first. */
static void close_open(struct gt__conv *c)
{
    uint64_t end = c->max_ts;
    for (uint32_t i = 0; i < c->nthreads; i++) {
        struct gt__stack *s = &c->threads[i].nodes;
        while (s->depth > 0) {
            struct gt__open o = s->e[--s->depth];
            c->an.closed_at_finish++;
            gt__emit_node(c, &c->threads[i], &o, end < o.ts ? o.ts : end, 1);
        }
        s = &c->threads[i].scopes;
        while (s->depth > 0) {
            struct gt__open o = s->e[--s->depth];
            c->an.closed_at_finish++;
            scope_closed(c, &c->threads[i], &o, end < o.ts ? o.ts : end, 1);
        }
    }
    while (c->nopen_win > 0) {
        struct gt__window w = c->open_win[--c->nopen_win];
        c->an.windows_unmatched++;
        w.end = end < w.begin ? w.begin : end;
        gt__window_done(c, &w);
    }
}

int gt__conv_close(struct gt__conv *c)
{
    int rc;
    close_open(c);
    gt__nodes_chunk_end(c, 1);
    gt__layers_finish(c);
    c->finished = 1;
    rc = gt__file_close(c, 1);
    gt__files_patch_count(c);
    if (rc && !c->err)
        c->err = rc;
    return c->err;
}

int gt__conv_finish(struct gt__conv *c, const struct gt__framer_stats *stats,
                   int truncated)
{
    int rc;
    if (c->finished)
        return c->err;
    if (!c->have_base)
        c->have_base = 1; /* nothing seen: base 0 */
    c->truncated = truncated != 0;
    if (stats) {
        c->stats = *stats;
        c->have_stats = 1;
    }
    /* Windows first: their files are complete whatever happens to main. */
    rc = gt__win_finish_all(c);
    if (rc && !c->err)
        c->err = rc;
    /* Closing spans still open may write the first events; a stream with
     * none keeps no main file unless the caller named it (and no window
     * file stands in for it). */
    close_open(c);
    if (!c->file_open && !c->err && c->keep_empty_main && c->nall == 0 &&
        (rc = ensure_file(c)))
        return rc;
    return gt__conv_close(c);
}
