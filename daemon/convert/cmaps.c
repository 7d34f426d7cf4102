/*
 * The stream part of torch.compile'd graphs (schema/torch.md, "Compiled
 * models"): each graph's map, the bare root and module classes by layer
 * name, as GT_R_COMPILED_GRAPH/CALL and GT_R_LAYER_INFO said them; stream
 * metadata, so that a capture window opened later finds them. The writer
 * part is compiled.c.
 */
#include <errno.h>
#include <stdlib.h>

#include "common/alloc.h"
#include "common/util.h"
#include "daemon/convert/internal.h"

const struct gt__cgraph *gt__cs_cgraph(const struct gt__cstream *s,
                                       uint32_t graph)
{
    if (graph == 0 || graph > s->ncg || !s->cg[graph - 1].phase)
        return NULL;
    return &s->cg[graph - 1];
}

const struct gt__ccall *gt__cs_ccall(const struct gt__cstream *s,
                                     uint32_t graph, uint32_t idx)
{
    const struct gt__cgraph *g = gt__cs_cgraph(s, graph);
    if (!g || idx >= g->ncalls || !g->calls[idx].phase)
        return NULL;
    return &g->calls[idx];
}

void gt__cs_on_cgraph(struct gt__cstream *s, const uint8_t *rec, uint16_t size)
{
    struct gt_r_compiled_graph r;
    (void)size;
    memcpy(&r, rec, sizeof(r));
    if (r.graph == 0 || r.graph > GT__MAX_CGRAPHS ||
        r.phase < GT_COMPILED_FORWARD || r.phase > GT_COMPILED_INFERENCE) {
        s->an.compiled_dropped++;
        return;
    }
    if (r.graph > s->cg_cap) {
        uint32_t cap = s->cg_cap ? s->cg_cap : 16;
        while (cap < r.graph)
            cap *= 2;
        struct gt__cgraph *n = gt__realloc(s->cg, cap * sizeof(*n));
        if (!n) {
            s->an.compiled_dropped++;
            return;
        }
        memset(n + s->cg_cap, 0, (cap - s->cg_cap) * sizeof(*n));
        s->cg = n;
        s->cg_cap = cap;
    }
    if (r.graph > s->ncg)
        s->ncg = r.graph;
    struct gt__cgraph *g = &s->cg[r.graph - 1];
    /* The same number again (only a damaged stream): the newer holds. */
    s->ccalls -= g->ncalls;
    gt__free(g->calls);
    uint32_t n = r.calls;
    if (n > GT__MAX_CCALLS - s->ccalls) {
        n = (uint32_t)(GT__MAX_CCALLS - s->ccalls);
        s->an.compiled_dropped++;
    }
    *g = (struct gt__cgraph){.graph_id = r.graph_id, .compile_id = r.compile_id,
                             .code = r.code, .phase = r.phase,
                             .flags = r.flags};
    if (n && !(g->calls = gt__calloc(n, sizeof(*g->calls)))) {
        s->an.compiled_dropped++;
        n = 0;
    }
    g->ncalls = n;
    s->ccalls += n;
}

void gt__cs_on_ccall(struct gt__cstream *s, const uint8_t *rec, uint16_t size)
{
    struct gt_r_compiled_call r;
    (void)size;
    memcpy(&r, rec, sizeof(r));
    const struct gt__cgraph *cg = gt__cs_cgraph(s, r.graph);
    if (!cg || r.index >= cg->ncalls || r.phase < GT_COMPILED_FORWARD ||
        r.phase > GT_COMPILED_RECOMPUTE) {
        s->an.compiled_dropped++;
        return;
    }
    if (r.flags & GT_CCALL_GPU)
        s->cg[r.graph - 1].gpu_calls++;
    s->cg[r.graph - 1].calls[r.index] = (struct gt__ccall){
        .kernel = r.kernel, .scope = r.scope, .owner = r.owner,
        .fused = r.fused, .phase = r.phase, .flags = r.flags};
}

const char *gt__cs_text(const struct gt__cstream *s, uint32_t id,
                        uint32_t *len)
{
    if (id == 0 || id >= s->nstrs || !s->strs[id].ver)
        return NULL;
    *len = s->strs[id].raw_len;
    return s->strs[id].raw;
}

struct lcls_key {
    const struct gt__cstream *s;
    const char *path;
    size_t len;
};

static int lcls_is(const void *ctx, uint32_t e)
{
    const struct lcls_key *k = ctx;
    uint32_t len;
    const char *t = gt__cs_text(k->s, k->s->lcls[e].layer, &len);
    return t && len == k->len && memcmp(t, k->path, len) == 0;
}

/* The LAYER_INFO entry of layer name path, or NULL. */
static const struct gt__lclass *lclass_of(const struct gt__cstream *s,
                                          const char *path, size_t len)
{
    if (!gt__index_ready(&s->lcls_ix))
        return NULL;
    const struct lcls_key k = {s, path, len};
    uint32_t e = gt__index_find(&s->lcls_ix, gt__fnv1a32(path, len), lcls_is,
                                &k, NULL);
    return e == GT__INDEX_NONE ? NULL : &s->lcls[e];
}

uint32_t gt__cs_layer_class(const struct gt__cstream *s, const char *path,
                            size_t len)
{
    const struct gt__lclass *e = lclass_of(s, path, len);
    return e ? e->cls : 0;
}

uint32_t gt__cs_layer_flags(const struct gt__cstream *s, const char *path,
                            size_t len)
{
    const struct gt__lclass *e = lclass_of(s, path, len);
    return e ? e->flags : 0;
}

void gt__cs_on_layer_info(struct gt__cstream *s, const uint8_t *rec,
                          uint16_t size)
{
    struct gt_r_layer_info r;
    uint32_t len, slot;
    (void)size;
    memcpy(&r, rec, sizeof(r));
    const char *t = gt__cs_text(s, r.layer, &len);
    if (!t) {
        s->an.unknown_strings++;
        return;
    }
    if (r.flags & GT_LAYER_F_BARE_ROOT)
        s->bare_root = r.layer;
    if (!r.cls)
        return;
    if (!gt__index_ready(&s->lcls_ix) &&
        gt__index_init(&s->lcls_ix, 2 * GT__MAX_LAYERS))
        return;
    const struct lcls_key k = {s, t, len};
    uint32_t e = gt__index_find(&s->lcls_ix, gt__fnv1a32(t, len), lcls_is, &k,
                                &slot);
    if (e != GT__INDEX_NONE) {
        s->lcls[e].cls = r.cls; /* the latest class of that name */
        s->lcls[e].flags = r.flags;
        return;
    }
    if (s->nlcls >= GT__MAX_LAYERS) {
        s->an.layers_dropped++;
        return;
    }
    if (s->nlcls == s->lcls_cap) {
        uint32_t cap = s->lcls_cap ? s->lcls_cap * 2 : 64;
        struct gt__lclass *n = gt__realloc(s->lcls, cap * sizeof(*n));
        if (!n)
            return;
        s->lcls = n;
        s->lcls_cap = cap;
    }
    s->lcls[s->nlcls] = (struct gt__lclass){r.layer, r.cls, r.flags};
    gt__index_set(&s->lcls_ix, slot, s->nlcls++);
}

void gt__cs_compiled_free(struct gt__cstream *s)
{
    for (uint32_t i = 0; i < s->ncg; i++)
        gt__free(s->cg[i].calls);
    gt__free(s->cg);
    gt__free(s->lcls);
    gt__index_free(&s->lcls_ix);
}

