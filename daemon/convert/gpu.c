/*
 * GPU activity (kernels, memcpy, memset) and CUDA API calls.
 *
 * These records come from CUPTI activity buffers: late, in batches, with
 * start and end already known, and in no order the converter can rely on
 * relative to the host records around them. So they never share a track
 * with stack-matched spans: GPU work goes on its device's stream tracks,
 * API calls on a per-thread "CUDA API" track, and both are placed with
 * gt__place, which moves anything that would break nesting to an overlap
 * track. The ac2g arrow (launch -> kernel) is written when the second of
 * the pair arrives, whichever it is, from bounded maps keyed by the CUDA
 * correlation id.
 */
#include <stdio.h>

#include "common/alloc.h"
#include "daemon/convert/internal.h"

/* ------------------------------------------------------------ GPU */

static uint32_t stream_track(struct gt__writer *c, uint32_t device,
                             uint32_t stream)
{
    const uint32_t mask = 2 * GT__MAX_STREAMS - 1;
    uint32_t i = (stream * 2654435761u ^ device * 40503u) & mask;
    for (;;) {
        struct gt__stream_slot *sl = &c->streams[i];
        if (!sl->used)
            break;
        if (sl->device == device && sl->stream == stream)
            return sl->track;
        i = (i + 1) & mask;
    }
    uint32_t proc = gt__gpu_proc(c, device);
    if (proc == UINT32_MAX || c->nstreams >= GT__MAX_STREAMS) {
        c->an.threads_dropped++;
        return 0;
    }
    char name[32];
    snprintf(name, sizeof(name), "stream %u", stream);
    uint32_t t = gt__track_new(c, proc,
                               stream >= GT__SYNTH_TID_BASE ? UINT32_MAX
                                                            : stream,
                               stream < 1000000 ? stream : 1000000, name);
    if (!t)
        return 0;
    c->streams[i] = (struct gt__stream_slot){device, stream, t, 1};
    c->nstreams++;
    return t;
}

/*
 * Kineto's "External id" (the operator that launched it, from a GT_EXT_OP
 * correlation; 0 without one, as Kineto writes a launch no operator
 * encloses, so that it never names another operator), then "layer",
 * "phase" and "seq" from the other GT_R_EXT_CORR kinds.
 */
static void ext_args(struct gt__writer *c, struct gt__ev *ev, uint32_t corr,
                     int joined)
{
    const struct gt__bmap_val *v = gt__bmap_get(&c->ext, GT__EXT_OP_KEY, corr);
    gt__ev_u64(ev, "External id", v ? v->x : 0);
    if (corr == 0 || !(v = gt__bmap_get(&c->ext, 0, corr)))
        return;
    if (v->p && !joined) {
        uint32_t l = gt__str_known(c, (uint32_t)v->x);
        /* A layer whose JSON text is over 2 * GT_STRING_MAX bytes has
         * always been written empty: traces keep that. */
        if (l && c->s->strs[l].esc_len > 2 * GT_STRING_MAX)
            gt__ev_lit(ev, "layer", "");
        else
            gt__ev_sid(ev, "layer", l);
        const char *ph = v->p == GT_EXT_LAYER_BWD ? "backward" : "forward";
        gt__ev_lit(ev, "phase", ph);
    }
    if (v->q)
        gt__ev_u64(ev, "seq", v->y);
}

void gt__on_ext_corr(struct gt__writer *c, const uint8_t *rec, uint16_t size)
{
    struct gt_r_ext_corr rr;
    const struct gt_r_ext_corr *r = &rr;
    (void)size;
    memcpy(&rr, rec, sizeof(rr));
    if (r->kind == GT_EXT_OP) {
        /* Its own entry (key GT__EXT_OP_KEY, corr): the operator id. */
        struct gt__bmap_val o = {.x = r->ext};
        (void)gt__bmap_put(&c->ext, GT__EXT_OP_KEY, r->corr, &o);
        return;
    }
    /* One entry per correlation id: layer (x, kind in p) and NVTX seq
     * (y, present when q), so a GPU record needs one lookup. */
    const struct gt__bmap_val *old = gt__bmap_get(&c->ext, 0, r->corr);
    struct gt__bmap_val v = old ? *old : (struct gt__bmap_val){0};
    if (r->kind == GT_EXT_LAYER_FWD || r->kind == GT_EXT_LAYER_BWD) {
        v.x = r->ext;
        v.p = r->kind;
    } else if (r->kind == GT_EXT_NVTX_SEQ) {
        v.y = r->ext;
        v.q = 1;
    } else {
        return;
    }
    (void)gt__bmap_put(&c->ext, 0, r->corr, &v);
}

/* Links the GPU activity on track t at start with its launch, or waits. */
static void gpu_link(struct gt__writer *c, uint32_t corr, uint32_t t,
                     uint64_t start)
{
    if (corr == 0)
        return;
    const struct gt__bmap_val *api = gt__bmap_get(&c->api, 0, corr);
    if (api) {
        gt__emit_flow(c->out, GT__CAT_AC2G, api->p, api->x, t, start);
        return;
    }
    struct gt__bmap_val v = {.x = start, .p = t};
    if (gt__bmap_put(&c->kpend, 0, corr, &v))
        c->an.ac2g_unmatched++;
}

/*
 * The track of GPU activity on (device, stream) over [start, *end] (a
 * negative duration made zero), placed where it nests; 0 when none can
 * take it.
 */
static uint32_t gpu_place(struct gt__writer *c, uint32_t device,
                          uint32_t stream, uint64_t start, uint64_t *end)
{
    uint32_t st = stream_track(c, device, stream);
    if (*end < start) {
        c->an.negative_durations++;
        *end = start;
    }
    gt__see_ts(c, *end);
    return st ? gt__place(c, st, start, *end) : 0;
}

/* The args every GPU activity starts with. */
static void gpu_args(struct gt__ev *ev, uint32_t device, uint32_t stream,
                     uint32_t corr)
{
    gt__ev_u64(ev, "device", device);
    gt__ev_u64(ev, "stream", stream);
    gt__ev_u64(ev, "correlation", corr);
}

void gt__on_kernel(struct gt__writer *c, const uint8_t *rec, uint16_t size)
{
    struct gt_r_gpu_kernel r;
    struct gt__ev ev;
    (void)size;
    memcpy(&r, rec, sizeof(r));
    /* Looked up (an unknown one counted) even when it cannot be placed. */
    uint32_t name = gt__str_known(c, r.name);
    uint64_t end = r.end;
    uint32_t t = gpu_place(c, r.device, r.stream, r.start, &end);
    if (!t)
        return;
    gt__ev_init(&ev, GT__CAT_KERNEL, t, r.start, end);
    gt__ev_name_sid(&ev, name);
    gpu_args(&ev, r.device, r.stream, r.corr);
    gt__ev_u32x3(&ev, "grid", r.grid[0], r.grid[1], r.grid[2]);
    gt__ev_u32x3(&ev, "block", r.block[0], r.block[1], r.block[2]);
    gt__ev_u64(&ev, "shared memory", r.shared_mem);
    gt__ev_u64(&ev, "registers per thread", r.registers);
    /* A compiled GPU graph's kernel: its call's layer and phase. */
    if (c->ncring && !c->cjoin)
        c->cjoin = gt__malloc(sizeof(*c->cjoin)); /* once per writer */
    struct gt__cjoin *j = c->ncring ? c->cjoin : NULL;
    int joined = j && gt__region_kernel(c, &ev, r.corr, r.name, j);
    ext_args(c, &ev, r.corr, joined);
    gt__emit_slice(c->out, &ev);
    gpu_link(c, r.corr, t, r.start);
}

static const char *copy_kind_name(unsigned k)
{
    static const char *const names[] = {
        "Memcpy", "Memcpy HtoD", "Memcpy DtoH", "Memcpy HtoA",
        "Memcpy AtoH", "Memcpy AtoA", "Memcpy AtoD", "Memcpy DtoA",
        "Memcpy DtoD", "Memcpy HtoH", "Memcpy PtoP"};
    return k < sizeof(names) / sizeof(names[0]) ? names[k] : names[0];
}

void gt__on_memcpy(struct gt__writer *c, const uint8_t *rec, uint16_t size)
{
    struct gt_r_gpu_memcpy r;
    struct gt__ev ev;
    (void)size;
    memcpy(&r, rec, sizeof(r));
    uint64_t end = r.end;
    uint32_t t = gpu_place(c, r.device, r.stream, r.start, &end);
    if (!t)
        return;
    gt__ev_init(&ev, GT__CAT_MEMCPY, t, r.start, end);
    gt__ev_name(&ev, copy_kind_name(r.copy_kind));
    gpu_args(&ev, r.device, r.stream, r.corr);
    gt__ev_u64(&ev, "bytes", r.bytes);
    gt__ev_u64(&ev, "copy_kind", r.copy_kind);
    gt__ev_u64(&ev, "src_kind", r.src_kind);
    gt__ev_u64(&ev, "dst_kind", r.dst_kind);
    ext_args(c, &ev, r.corr, 0);
    gt__emit_slice(c->out, &ev);
    gpu_link(c, r.corr, t, r.start);
}

void gt__on_memset(struct gt__writer *c, const uint8_t *rec, uint16_t size)
{
    struct gt_r_gpu_memset r;
    struct gt__ev ev;
    (void)size;
    memcpy(&r, rec, sizeof(r));
    uint64_t end = r.end;
    uint32_t t = gpu_place(c, r.device, r.stream, r.start, &end);
    if (!t)
        return;
    gt__ev_init(&ev, GT__CAT_MEMSET, t, r.start, end);
    gt__ev_name(&ev, "Memset");
    gpu_args(&ev, r.device, r.stream, r.corr);
    gt__ev_u64(&ev, "bytes", r.bytes);
    gt__ev_u64(&ev, "value", r.value);
    ext_args(c, &ev, r.corr, 0);
    gt__emit_slice(c->out, &ev);
    gpu_link(c, r.corr, t, r.start);
}

void gt__on_cuda_api(struct gt__writer *c, const uint8_t *rec, uint16_t size)
{
    struct gt_r_cuda_api rr;
    const struct gt_r_cuda_api *r = &rr;
    (void)size;
    memcpy(&rr, rec, sizeof(rr));
    struct gt__wthread *th = gt__thread_get(c, r->tid);
    struct gt__ev ev;
    uint64_t start = r->start, end = r->end;
    if (!th)
        return;
    if (end < start) {
        c->an.negative_durations++;
        end = start;
    }
    gt__see_ts(c, start);
    gt__see_ts(c, end);
    gt__region_launch(c, th->os_tid, start, r->corr);
    uint32_t at = gt__thread_track(c, th, 3);
    uint32_t t = at ? gt__place(c, at, start, end) : 0;
    if (!t)
        return;
    gt__ev_init(&ev, GT__CAT_CUDA_RUNTIME, t, start, end);
    gt__ev_name_sid(&ev, gt__str_known(c, r->name));
    gt__ev_u64(&ev, "correlation", r->corr);
    gt__ev_u64(&ev, "cbid", r->cbid);
    ext_args(c, &ev, r->corr, 0);
    gt__emit_slice(c->out, &ev);
    if (r->corr == 0)
        return;
    struct gt__bmap_val v = {.x = start, .p = t};
    (void)gt__bmap_put(&c->api, 0, r->corr, &v);
    struct gt__bmap_val k;
    if (gt__bmap_take(&c->kpend, 0, r->corr, &k))
        gt__emit_flow(c->out, GT__CAT_AC2G, t, start, k.p, k.x);
}

