/*
 * Capture windows: one trace file (set) per window.
 *
 * The agent writes a window as one or more segments WINDOW_BEGIN(id) ..
 * WINDOW_END(id), then WINDOW_DONE(id), and records only inside segments
 * (plus metadata). Each window gets its own converter (struct gt__conv
 * with root set), created at its first WINDOW_BEGIN and finished, closed
 * and freed at WINDOW_DONE, so a window file is built by exactly the code
 * that builds any trace: its own tracks, layer spans, flows, rotation and
 * metadata. The stream's converter ("main") only routes:
 *
 *   - metadata records (strings, process and thread info, thread context,
 *     clock pairs, lost counts, warnings) go to main and to every window
 *     converter alive, and a new window converter starts from a copy of
 *     main's metadata, so each file names its threads and strings alone;
 *   - records between WINDOW_BEGIN(id) and WINDOW_END(id), in stream order,
 *     go to window id (the agent keeps each thread's order and drains all
 *     threads every 20 ms); everything else goes to main, whose file is
 *     created only with its first event (convert.c);
 *   - CUDA API records (CUPTI delivers them late, in batches) go to the
 *     window whose segment contains their start time, and GPU activity and
 *     external correlations follow their launch's correlation id to its
 *     window until that window's WINDOW_DONE; after it, they go to main
 *     (the window file is complete and closed by then).
 *
 * Memory: at most GT__MAX_WIN_OPEN window converters at once (the agent
 * has one open at a time; a stream that opens more cuts the oldest, which
 * is counted as windows_unmatched), a fixed correlation map, and the last
 * GT__MAX_WINDOWS windows' descriptions for status.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/alloc.h"
#include "daemon/convert/internal.h"
#include "daemon/convert/names.h"

/* ------------------------------------------------------------ lookups */

static int wout_index(const struct gt__conv *c, uint32_t id)
{
    for (uint32_t i = 0; i < c->nwout; i++)
        if (c->wout[i].id == id)
            return (int)i;
    return -1;
}

static struct gt__conv_window *winfo_find(struct gt__conv *c, uint32_t id)
{
    for (uint32_t i = c->nwinfo; i > 0; i--)
        if (c->winfo[i - 1].id == id)
            return &c->winfo[i - 1];
    return NULL;
}

static void winfo_release(struct gt__conv_window *w)
{
    gt__free((char *)w->spec);
    gt__free((char *)w->layer);
    gt__free((char *)w->file);
}

/* Appends a description, dropping the oldest beyond GT__MAX_WINDOWS. */
static struct gt__conv_window *winfo_add(struct gt__conv *c)
{
    if (!c->winfo) {
        c->winfo = gt__calloc(GT__MAX_WINDOWS, sizeof(*c->winfo));
        if (!c->winfo)
            return NULL;
    }
    if (c->nwinfo == GT__MAX_WINDOWS) {
        winfo_release(&c->winfo[0]);
        memmove(c->winfo, c->winfo + 1, (GT__MAX_WINDOWS - 1) * sizeof(*c->winfo));
        c->nwinfo--;
    }
    struct gt__conv_window *w = &c->winfo[c->nwinfo++];
    memset(w, 0, sizeof(*w));
    return w;
}

size_t gt__conv_windows(const struct gt__conv *c,
                       const struct gt__conv_window **out)
{
    *out = c->winfo;
    return c->nwinfo;
}

/* ------------------------------------------------------------ spec text */

/*
 * Copies the value of key= from a trigger spec ("layer=a.b,phase=both,...")
 * into out. @return its length, 0 when absent.
 */
static size_t spec_field(const char *spec, size_t len, const char *key,
                         char *out, size_t cap)
{
    size_t kl = strlen(key), i = 0;
    while (i < len) {
        size_t j = i;
        while (j < len && spec[j] != ',')
            j++;
        if (j - i > kl && memcmp(spec + i, key, kl) == 0 && spec[i + kl] == '=') {
            size_t n = j - i - kl - 1;
            if (n >= cap)
                n = cap - 1;
            memcpy(out, spec + i + kl + 1, n);
            out[n] = '\0';
            return n;
        }
        i = j + 1;
    }
    out[0] = '\0';
    return 0;
}

static const char *phase_name(const char *v)
{
    static const char *const names[] = {"forward", "backward", "both"};
    if (!*v)
        return "backward"; /* the spec's default */
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(v, names[i]) == 0)
            return names[i];
    return "unknown";
}

/* ------------------------------------------------------------ create */

/* A new converter for window r, starting from main's metadata. */
static struct gt__conv *win_create(struct gt__conv *c, const struct gt_r_window *r,
                                  struct gt__conv_window *info)
{
    char layer[GT_STRING_MAX + 1], phase[16], part[GT__NAME_PART_MAX + 1];
    char *stem = NULL, *out_path = NULL;
    struct gt__conv *w = NULL;
    uint32_t sl = 0;
    const char *spec = "";

    if (r->spec && r->spec < c->nstrs && c->strs[r->spec].raw) {
        spec = c->strs[r->spec].raw;
        sl = c->strs[r->spec].raw_len;
    }
    spec_field(spec, sl, "phase", phase, sizeof(phase));
    if (!spec_field(spec, sl, "layer", layer, sizeof(layer))) {
        /* No spec (or another agent's spelling): the opening layer. */
        if (r->layer && r->layer < c->nstrs && c->strs[r->layer].raw)
            snprintf(layer, sizeof(layer), "%s", c->strs[r->layer].raw);
        else
            snprintf(layer, sizeof(layer), "window");
    }
    info->id = r->id;
    info->iteration = r->iteration;
    info->phase = phase_name(phase);
    info->spec = gt__strdup(spec);
    info->layer = gt__strdup(layer);
    if (!info->spec || !info->layer)
        return NULL;

    gt__sanitize_part(layer, strlen(layer), part, sizeof(part));
    struct gt__conv_opts o = {
        .out_dir = c->out_dir,
        .max_file_bytes = c->max_bytes,
        .max_file_events = c->max_events,
        .max_pending_nodes = c->node_map_cap,
    };
    /* Agents number windows 1, 2, 3...; an id that does not increase
     * (hostile or broken input) would reuse an earlier window's file name
     * and overwrite it, so it gets a suffix unique within the stream. */
    char dup[32] = "";
    if (r->id <= c->win_max_id)
        snprintf(dup, sizeof(dup), "-dup%llu", (unsigned long long)c->win_created);
    else
        c->win_max_id = r->id;
    c->win_created++;
    int n;
    if (c->out_path) {
        size_t pl = strlen(c->out_path);
        if (pl > 5 && strcmp(c->out_path + pl - 5, ".json") == 0)
            pl -= 5;
        n = asprintf(&out_path, "%.*s-w%u-%s-%s-it%llu%s.json", (int)pl,
                     c->out_path, r->id, part, info->phase,
                     (unsigned long long)r->iteration, dup);
        o.out_path = out_path;
    } else {
        n = asprintf(&stem, "%s-w%u-%s-%s-it%llu%s", c->stem, r->id, part,
                     info->phase, (unsigned long long)r->iteration, dup);
        o.stem = stem;
    }
    if (n < 0)
        return NULL;
    w = gt__conv_create(&o);
    free(stem);
    free(out_path);
    if (!w)
        return NULL;

    w->root = c;
    w->win_id = r->id;
    w->win_iter = r->iteration;
    w->win_phase = info->phase;
    w->win_spec = gt__strdup(info->spec);
    w->win_layer = gt__strdup(info->layer);
    /* The stream's identity and time base: the same clock as main. */
    w->have_hello = c->have_hello;
    w->pid = c->pid;
    w->ppid = c->ppid;
    w->rank = c->rank;
    w->local_rank = c->local_rank;
    w->world_size = c->world_size;
    w->start_mono = c->start_mono;
    w->start_real = c->start_real;
    w->base_ns = c->base_ns;
    w->have_base = c->have_base;
    w->hostname = c->hostname ? gt__strdup(c->hostname) : NULL;
    w->cmdline = c->cmdline ? gt__strdup(c->cmdline) : NULL;
    if (!w->win_spec || !w->win_layer || (c->hostname && !w->hostname) ||
        (c->cmdline && !w->cmdline))
        goto out_free;
    for (uint32_t id = 1; id < c->nstrs; id++)
        if (c->strs[id].raw)
            gt__str_define(w, id, c->strs[id].raw, c->strs[id].raw_len);
    for (uint32_t i = 0; i < c->nthreads; i++)
        if (c->threads[i].name)
            gt__thread_named(w, c->threads[i].os_tid, c->threads[i].name);
    if (c->cur) {
        /* Mid-chunk: the current thread context carries over. */
        struct gt__thread *th = gt__thread_get(w, c->threads[c->cur - 1].os_tid);
        w->cur = th ? (uint32_t)(th - w->threads) + 1 : 0;
    }
    w->host_pairs = c->host_pairs;
    w->host_first_mono = c->host_first_mono;
    w->host_first_real = c->host_first_real;
    w->host_last_mono = c->host_last_mono;
    w->host_last_real = c->host_last_real;
    memcpy(w->devclk, c->devclk, sizeof(w->devclk));
    w->ndevclk = c->ndevclk;
    memcpy(w->lost, c->lost, sizeof(w->lost));
    w->nlost = c->nlost;
    memcpy(w->lost_sum, c->lost_sum, sizeof(w->lost_sum));
    memcpy(w->warnings, c->warnings, sizeof(w->warnings));
    w->nwarnings = c->nwarnings;
    w->chunks = 1; /* inside the chunk being read */
    return w;

out_free:
    gt__conv_free(w);
    return NULL;
}

/* ------------------------------------------------------------ close */

static uint64_t anomaly_sum(const struct gt__conv *c)
{
    uint64_t n = 0;
#define GT__ANOM_ADD(f) n += c->an.f;
    GT__ANOMALIES(GT__ANOM_ADD)
#undef GT__ANOM_ADD
    return n;
}

/* Finishes window converter i: its last file is closed and complete. */
static void win_close(struct gt__conv *c, uint32_t i, int state)
{
    struct gt__conv *w = c->wout[i].sub;
    struct gt__conv_window *info = winfo_find(c, c->wout[i].id);
    int rc;

    w->win_state = state;
    w->truncated = state == GT__CONV_WIN_CUT && c->truncated;
    rc = gt__conv_close(w);
    if (rc && !c->err)
        c->err = rc;
    if (info)
        info->state = state;
    c->win_events += w->total_events;
    c->win_bytes += w->total_bytes;
    c->win_files += w->nfiles;
    c->win_anomalies += anomaly_sum(w);
    gt__conv_free(w);
    memmove(&c->wout[i], &c->wout[i + 1], (c->nwout - i - 1) * sizeof(c->wout[0]));
    c->nwout--;
    if (c->route == i + 1)
        c->route = 0;
    else if (c->route > i + 1)
        c->route--;
}

int gt__win_finish_all(struct gt__conv *c)
{
    while (c->nwout > 0) {
        c->an.windows_unmatched++;
        win_close(c, 0, GT__CONV_WIN_CUT);
    }
    return c->err;
}

void gt__win_free(struct gt__conv *c)
{
    for (uint32_t i = 0; i < c->nwout; i++)
        gt__conv_free(c->wout[i].sub);
    c->nwout = 0;
    for (uint32_t i = 0; i < c->nwinfo; i++)
        winfo_release(&c->winfo[i]);
    gt__free(c->winfo);
    for (size_t i = 0; i < c->nall; i++)
        gt__free(c->all_paths[i]);
    gt__free(c->all_paths);
    if (c->win_corr.e)
        gt__bmap_free(&c->win_corr);
    gt__free(c->win_spec);
    gt__free(c->win_layer);
}

/* ------------------------------------------------------------ routing */

static void on_window(struct gt__conv *c, uint16_t type, uint16_t size,
                      const uint8_t *rec)
{
    struct gt_r_window r;
    int i;

    if (size != sizeof(r)) {
        c->an.bad_records++;
        return;
    }
    memcpy(&r, rec, sizeof(r));
    gt__see_ts(c, r.ts);
    i = wout_index(c, r.id);
    if (type == GT_R_WINDOW_BEGIN && i < 0) {
        if (c->nwout == GT__MAX_WIN_OPEN) {
            /* The agent never has this many open: bound memory anyway. */
            c->an.windows_unmatched++;
            win_close(c, 0, GT__CONV_WIN_CUT);
        }
        if (!c->win_corr.e && gt__bmap_init(&c->win_corr, GT__WIN_CORR_CAP)) {
            c->win_corr.e = NULL;
            c->an.windows_unmatched++;
            return;
        }
        struct gt__conv_window *info = winfo_add(c);
        struct gt__conv *w = info ? win_create(c, &r, info) : NULL;
        if (!w) {
            /* Out of memory: the window's records go to main. */
            if (info) {
                winfo_release(info);
                c->nwinfo--;
            }
            c->an.windows_unmatched++;
            return;
        }
        i = (int)c->nwout++;
        c->wout[i] = (struct gt__win_out){.sub = w, .id = r.id};
    }
    if (i < 0) {
        /* END or DONE of a window never begun (or cut at the cap). */
        c->an.windows_unmatched++;
        return;
    }
    struct gt__win_out *o = &c->wout[i];
    struct gt__conv_window *info = winfo_find(c, r.id);
    switch (type) {
    case GT_R_WINDOW_BEGIN:
        if (c->route && c->route != (uint32_t)i + 1) {
            /* Another window's segment never ended: it ends here. */
            c->an.windows_unmatched++;
            c->wout[c->route - 1].seg_open = 0;
            c->wout[c->route - 1].seg_end = r.ts;
        }
        c->route = (uint32_t)i + 1;
        o->seg_open = 1;
        o->seg_begin = r.ts;
        o->seg_end = UINT64_MAX;
        o->sub->win_segments++;
        if (info)
            info->segments++;
        gt__conv_record(o->sub, type, size, rec);
        break;
    case GT_R_WINDOW_END:
        gt__conv_record(o->sub, type, size, rec);
        o->seg_open = 0;
        o->seg_end = r.ts;
        if (c->route == (uint32_t)i + 1)
            c->route = 0;
        break;
    default: /* GT_R_WINDOW_DONE */
        win_close(c, (uint32_t)i, GT__CONV_WIN_DONE);
        break;
    }
}

/* Window converter for a CUDA API call starting at ts, or NULL. */
static struct gt__win_out *win_at(struct gt__conv *c, uint64_t ts)
{
    for (uint32_t i = c->nwout; i > 0; i--) {
        struct gt__win_out *o = &c->wout[i - 1];
        if (ts >= o->seg_begin && ts <= o->seg_end)
            return o;
    }
    return NULL;
}

static uint32_t rec_u32(const uint8_t *rec, size_t off)
{
    uint32_t v;
    memcpy(&v, rec + off, 4);
    return v;
}

void gt__win_record(struct gt__conv *c, uint16_t type, uint16_t size,
                    const uint8_t *rec)
{
    struct gt__win_out *o = c->route ? &c->wout[c->route - 1] : NULL;
    size_t corr_off = 0;

    switch (type) {
    case GT_R_STRING:
    case GT_R_PROCESS_INFO:
    case GT_R_THREAD_INFO:
    case GT_R_THREAD:
    case GT_R_CLOCK_SYNC:
    case GT_R_LOST:
    case GT_R_WARNING:
        gt__conv_record(c, type, size, rec);
        for (uint32_t i = 0; i < c->nwout; i++)
            gt__conv_record(c->wout[i].sub, type, size, rec);
        return;
    case GT_R_WINDOW_BEGIN:
    case GT_R_WINDOW_END:
    case GT_R_WINDOW_DONE:
        on_window(c, type, size, rec);
        return;
    case GT_R_CUDA_API:
        if (size == sizeof(struct gt_r_cuda_api) && c->nwout) {
            struct gt_r_cuda_api r;
            memcpy(&r, rec, sizeof(r));
            if (!o)
                o = win_at(c, r.start);
            if (o) {
                struct gt__bmap_val v = {.x = o->id};
                (void)gt__bmap_put(&c->win_corr, 0, r.corr, &v);
            }
        }
        break;
    case GT_R_GPU_KERNEL:
        corr_off = offsetof(struct gt_r_gpu_kernel, corr);
        break;
    case GT_R_GPU_MEMCPY:
        corr_off = offsetof(struct gt_r_gpu_memcpy, corr);
        break;
    case GT_R_GPU_MEMSET:
        corr_off = offsetof(struct gt_r_gpu_memset, corr);
        break;
    case GT_R_EXT_CORR:
        corr_off = offsetof(struct gt_r_ext_corr, corr);
        break;
    default:
        break;
    }
    if (corr_off && c->nwout && size >= corr_off + 4) {
        const struct gt__bmap_val *v =
            gt__bmap_get(&c->win_corr, 0, rec_u32(rec, corr_off));
        int i = v ? wout_index(c, (uint32_t)v->x) : -1;
        if (i >= 0)
            o = &c->wout[i];
    }
    gt__conv_record(o ? o->sub : c, type, size, rec);
}

void gt__win_chunk_begin(struct gt__conv *c, const struct gt_chunk_header *h)
{
    for (uint32_t i = 0; i < c->nwout; i++)
        gt__conv_chunk_begin(c->wout[i].sub, h);
}

void gt__win_chunk_end(struct gt__conv *c)
{
    for (uint32_t i = 0; i < c->nwout; i++) {
        gt__conv_chunk_end(c->wout[i].sub);
        if (c->wout[i].sub->err && !c->err)
            c->err = c->wout[i].sub->err;
    }
}

/* ------------------------------------------------------------ files */

void gt__win_file_opened(struct gt__conv *c, const char *path)
{
    struct gt__conv *root = c->root ? c->root : c;
    char *dup = gt__strdup(path);
    char **np = gt__realloc(root->all_paths, (root->nall + 2) * sizeof(*np));

    if (np)
        root->all_paths = np;
    if (!dup || !np) {
        gt__free(dup);
        return; /* the file exists; only the listing misses it */
    }
    root->all_paths[root->nall++] = dup;
    root->all_paths[root->nall] = NULL;
    if (c->root) {
        struct gt__conv_window *info = winfo_find(root, c->win_id);
        if (info && !info->file)
            info->file = gt__strdup(path);
    }
}

static const char *const states[] = {"open", "done", "cut"};

static const char *state_name(int s)
{
    return states[s >= 0 && s <= 2 ? s : 0];
}

void gt__win_write_meta(struct gt__conv *c)
{
    struct gt__jw *w = &c->w;

    if (!c->root) {
        /* The main file: where the stream's windows went. */
        gt__jw_puts(w, ",\n\"window_files\":[");
        for (uint32_t i = 0; i < c->nwinfo; i++) {
            const struct gt__conv_window *x = &c->winfo[i];
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
        return;
    }

    gt__jw_puts(w, ",\n\"window\":{\"id\":");
    gt__jw_u64(w, c->win_id);
    gt__jw_puts(w, ",\"spec\":");
    gt__jw_str(w, c->win_spec, strlen(c->win_spec));
    gt__jw_puts(w, ",\"layer\":");
    gt__jw_str(w, c->win_layer, strlen(c->win_layer));
    gt__jw_puts(w, ",\"phase\":\"");
    gt__jw_puts(w, c->win_phase);
    gt__jw_puts(w, "\",\"iteration\":");
    gt__jw_u64(w, c->win_iter);
    gt__jw_puts(w, ",\"segments\":");
    gt__jw_u64(w, c->win_segments);
    gt__jw_puts(w, ",\"state\":\"");
    gt__jw_puts(w, state_name(c->win_state));
    gt__jw_puts(w, "\"}");
}
