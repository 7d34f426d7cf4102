/*
 * NVTX ranges per thread (agent/nvtx.h): what the injection handlers
 * (agent/nvtx.c) and RecordFunction scopes (agent/recordfn.c) open and
 * close. A range is recorded as a scope while capturing, pushes its
 * "seq = N" to CUPTI, and, when GRADTRACE_LAYERS says so, opens a layer
 * in the event core (agent/events.c) by the rules of agent/nvtx_rules.c.
 *
 * Per-thread push/pop stack (fixed depth, no allocation after a thread's
 * first range): an entry holds the recorded name (0 when capture was off
 * at the push, so the pop records nothing), the domain, whether a
 * correlation id was pushed, and what the pop undoes in the layer stack.
 */
#include <stdatomic.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "agent/nvtx.h"

#include "agent/capture.h"
#include "agent/cuda.h"
#include "agent/events.h"
#include "agent/internal.h"
#include "agent/rec_out.h"
#include "agent/trigger.h"
#include "common/util.h"

/* ------------------------------------------------------------ names */

uint32_t gt__nvtx_intern_wide(const wchar_t *w)
{
    char buf[1024];
    size_t n = gt__nvtx_utf8(w, buf, sizeof(buf));
    return gt__rec_out->intern(buf, n);
}

/*
 * Range names repeat (the same few per layer, per op), and interning takes
 * the string table's lock: a per-thread direct-mapped cache keyed by the
 * text's 64-bit FNV-1a hash and length answers repeats without it. Two
 * different names would have to collide in all 64 bits and the length to
 * be confused. Ids live as long as the process, so entries never go stale.
 */
#define NAME_CACHE 256u

struct name_slot {
    uint64_t hash;
    uint32_t len;
    uint32_t id;
};

#define NVTX_DEPTH 128

/* What a range opened, so its end undoes it (2 bits: start/end ids). */
enum { LAYER_NONE, LAYER_OPENED, LAYER_BWD_OPENED, LAYER_PASS };

struct nvtx_entry {
    uint32_t name;    /* 0: not recorded */
    uint32_t domain;
    uint8_t ext;      /* a GT_EXT_NVTX_SEQ id was pushed */
    uint8_t layer;    /* LAYER_*: what the pop undoes */
    uint8_t phase;    /* GT__NVTX_PHASE_* in force inside this range */
    uint16_t path_len; /* layer path open inside it: path[0, path_len) */
};

/*
 * Per-thread state, allocated on a thread's first NVTX call and freed at
 * its exit. Only a pointer lives in TLS: several KiB of __thread arrays
 * would be static TLS in a library with an initial-exec variable, and a
 * dlopen of the agent (ctypes.CDLL without LD_PRELOAD) would then fail
 * with "cannot allocate memory in static TLS block".
 */
struct nvtx_thread {
    struct name_slot names[NAME_CACHE];
    struct nvtx_entry e[NVTX_DEPTH];
    int depth;        /* entries in e */
    int overflow;     /* pushes beyond NVTX_DEPTH, not recorded */
    /* The innermost NVTX layer's path; each entry's path is a prefix of
     * it, since a nested path always extends the one around it. */
    char path[GT__NVTX_PATH_MAX];
};

static __thread struct nvtx_thread *t_nvtx;
static pthread_key_t nvtx_key;
static pthread_once_t nvtx_once = PTHREAD_ONCE_INIT;
static int nvtx_key_ok;

static void nvtx_thread_free(void *p)
{
    free(p);
}

static void nvtx_key_init(void)
{
    nvtx_key_ok = pthread_key_create(&nvtx_key, nvtx_thread_free) == 0;
}

/* @return this thread's state, NULL when it cannot be allocated (the
 * event is then not recorded). Cold on a thread's first call only. */
static struct nvtx_thread *nvtx_self(void)
{
    struct nvtx_thread *t = t_nvtx;

    if (GT__LIKELY(t != NULL))
        return t;
    pthread_once(&nvtx_once, nvtx_key_init);
    t = calloc(1, sizeof(*t));
    if (t && nvtx_key_ok)
        (void)pthread_setspecific(nvtx_key, t);
    t_nvtx = t;
    return t;
}

uint32_t gt__nvtx_intern(const char *s)
{
    if (!s)
        return 0;
    size_t len = strlen(s);
    uint64_t h = gt__fnv1a64(GT__FNV64_INIT, s, len);
    struct nvtx_thread *t = nvtx_self();
    if (!t)
        return gt__rec_out->intern(s, len);
    struct name_slot *e = &t->names[(h ^ (h >> 29)) & (NAME_CACHE - 1)];
    if (e->id && e->hash == h && e->len == len)
        return e->id;
    uint32_t id = gt__rec_out->intern(s, len);
    if (id && len <= UINT32_MAX)
        *e = (struct name_slot){h, (uint32_t)len, id};
    return id;
}

/* ------------------------------------------------------------ layers */

static const struct gt__layer_config *layers_cfg;

/*
 * RecordFunction user scopes (agent/recordfn.c) share the push/pop stack
 * and its layer rules as ranges of a domain no string id can be (ids are
 * small), and record no NVTX scope.
 */
#define RF_DOMAIN UINT32_MAX

void gt__nvtx_set_layers(const struct gt__layer_config *l)
{
    layers_cfg = l;
}

static const struct gt__layer_config *layers(void)
{
    return layers_cfg ? layers_cfg : &gt__agent_config()->layers;
}

/* Whether ranges of domain may be layers (GRADTRACE_LAYERS's DOMAIN). */
static int layer_domain(const struct gt__layer_config *l, uint32_t domain)
{
    static _Atomic uint32_t want;
    uint32_t w;

    if (!l->nvtx_domain[0])
        return 1;
    if (!strcmp(l->nvtx_domain, "-"))
        return domain == 0;
    w = atomic_load_explicit(&want, memory_order_relaxed);
    if (!w) {
        w = gt__rec_out->intern(l->nvtx_domain, strlen(l->nvtx_domain));
        atomic_store_explicit(&want, w, memory_order_relaxed);
    }
    return w && domain == w;
}

/*
 * What a range opened now on thread t is: its kind (enum gt__nvtx_kind:
 * GT__NVTX_PHASE_* for a phase range, which is no layer) and, for a
 * layer, its path id in *id with its path in out (*len bytes). The phase
 * in force is *phase, updated for a phase range.
 */
static int layer_classify(struct nvtx_thread *t, uint32_t domain,
                          const char *text, int *phase, uint32_t *id,
                          char *out, size_t *len)
{
    const struct gt__layer_config *l = layers();
    size_t plen = t->depth ? t->e[t->depth - 1].path_len : 0;
    int rf = domain == RF_DOMAIN, kind;

    *id = 0;
    if (!(l->sources & (rf ? GT__LAYERS_RECORDFN : GT__LAYERS_NVTX)) || !text ||
        (!rf && !layer_domain(l, domain)))
        return GT__NVTX_NONE;
    kind = gt__nvtx_layer_path(rf ? l->rf_glob : l->nvtx_glob, text, *phase,
                               t->path, plen, out, GT__NVTX_PATH_MAX, len);
    if (kind >= GT__NVTX_PHASE_FORWARD) {
        *phase = kind;
        return kind;
    }
    if (kind != GT__NVTX_NONE)
        *id = gt__nvtx_intern(out);
    return *id ? kind : GT__NVTX_NONE;
}

/*
 * Opens what a range of kind opens. @return its LAYER_* value. A
 * `backward` phase range is one backward pass for the iteration count
 * (schema/control.md, "Iterations"), as Engine::execute is for autograd:
 * nested passes count once, so one around loss.backward() adds nothing.
 */
static uint8_t layer_open(int kind, uint32_t id)
{
    switch (kind) {
    case GT__NVTX_FWD:
        gt__layer_begin(id, 0);
        return LAYER_OPENED;
    case GT__NVTX_BWD:
        gt__layer_bwd_begin(id);
        return LAYER_BWD_OPENED;
    case GT__NVTX_PHASE_BACKWARD:
        gt__trig_pass_begin(0);
        return LAYER_PASS;
    default:
        return LAYER_NONE;
    }
}

static void layer_close(uint8_t layer)
{
    if (layer == LAYER_OPENED)
        gt__layer_end();
    else if (layer == LAYER_BWD_OPENED)
        gt__layer_bwd_end();
    else if (layer == LAYER_PASS) {
        gt__trig_pass_end();
        gt__capture_boundary(gt__trig_iteration());
    }
}

/* A pushed range taken as a layer: entry e (pushed now on t) records it. */
static void layer_push(struct nvtx_thread *t, struct nvtx_entry *e,
                       uint32_t domain, const char *text)
{
    const struct nvtx_entry *up = t->depth ? &t->e[t->depth - 1] : NULL;
    int phase = up ? up->phase : GT__NVTX_PHASE_FORWARD;
    char out[GT__NVTX_PATH_MAX];
    size_t len = 0;
    uint32_t id;
    int kind = layer_classify(t, domain, text, &phase, &id, out, &len);

    e->phase = (uint8_t)phase;
    e->path_len = up ? up->path_len : 0;
    if (kind >= GT__NVTX_PHASE_FORWARD) {
        e->layer = layer_open(kind, 0);
        return;
    }
    if (kind == GT__NVTX_NONE)
        return;
    memcpy(t->path, out, len);
    e->path_len = (uint16_t)len;
    e->layer = layer_open(kind, id);
}

/* ------------------------------------------------------------ recording */

static void emit_begin(uint32_t name, uint32_t domain)
{
    struct gt_r_scope_begin r = {
        .h = {GT_R_SCOPE_BEGIN, sizeof(r)},
        .kind = GT_SCOPE_NVTX,
        .name = name,
        .cls = domain,
        .ts = gt__rec_out->now(),
    };
    (void)gt__rec_out->emit(&r, sizeof(r));
}

static void emit_end(uint32_t name)
{
    struct gt_r_scope_end r = {
        .h = {GT_R_SCOPE_END, sizeof(r)},
        .kind = GT_SCOPE_NVTX,
        .name = name,
        .ts = gt__rec_out->now(),
    };
    (void)gt__rec_out->emit(&r, sizeof(r));
}

int gt__nvtx_push(uint32_t domain, uint32_t name, const char *text)
{
    struct nvtx_thread *t_st = nvtx_self();

    if (!t_st)
        return 0;
    if (t_st->depth >= NVTX_DEPTH)
        return NVTX_DEPTH + t_st->overflow++;
    struct nvtx_entry *e = &t_st->e[t_st->depth];
    *e = (struct nvtx_entry){.name = name, .domain = domain};
    uint64_t seq;
    if (name && text && gt__cuda_ext_push && gt__nvtx_parse_seq(text, &seq)) {
        gt__cuda_ext_push(GT_EXT_NVTX_SEQ, seq);
        e->ext = 1;
    }
    if (name)
        emit_begin(name, domain);
    /* After the range's own begin, so its layer scope nests inside it. */
    layer_push(t_st, e, domain, text);
    return t_st->depth++;
}

int gt__nvtx_pop(uint32_t domain)
{
    struct nvtx_thread *t_st = t_nvtx;

    if (!t_st)
        return -1;
    if (t_st->overflow > 0)
        return NVTX_DEPTH + --t_st->overflow;
    for (int i = t_st->depth - 1; i >= 0; i--) {
        if (t_st->e[i].domain != domain)
            continue;
        struct nvtx_entry e = t_st->e[i];
        memmove(&t_st->e[i], &t_st->e[i + 1],
                (size_t)(t_st->depth - 1 - i) * sizeof(e));
        t_st->depth--;
        if (e.ext && gt__cuda_ext_pop)
            gt__cuda_ext_pop(GT_EXT_NVTX_SEQ);
        layer_close(e.layer);
        /* A begin recorded in an earlier capture still gets its end. */
        if (e.name && gt__capture_on())
            emit_end(e.name);
        return i;
    }
    return -1;
}

int gt__nvtx_layers_on(void)
{
    return (layers()->sources & GT__LAYERS_NVTX) != 0;
}

/*
 * A start/end range's id: a 30-bit counter, the LAYER_* its start opened
 * (bits 62-63) and its name id (low 32 bits). As a layer it opens on the
 * starting thread's layer stack and closes on the ending thread's, so it
 * is right when both are one thread and it nests with the other layers
 * there; it is never the parent of a pushed range's path.
 */
#define START_COUNT_MASK 0x3fffffffu

static uint8_t start_layer(uint32_t domain, const char *text)
{
    struct nvtx_thread *t = text ? nvtx_self() : NULL;
    char out[GT__NVTX_PATH_MAX];
    size_t len;
    uint32_t id;
    int phase, kind;

    if (!t)
        return LAYER_NONE;
    phase = t->depth ? t->e[t->depth - 1].phase : GT__NVTX_PHASE_FORWARD;
    kind = layer_classify(t, domain, text, &phase, &id, out, &len);
    return layer_open(kind, id);
}

uint64_t gt__nvtx_start(uint32_t domain, uint32_t name, const char *text)
{
    static _Atomic uint32_t counter;
    if (name)
        emit_begin(name, domain);
    uint64_t layer = start_layer(domain, text);
    uint64_t n = (atomic_fetch_add_explicit(&counter, 1, memory_order_relaxed) + 1) &
                 START_COUNT_MASK;
    return (layer << 62) | (n << 32) | name;
}

void gt__nvtx_end(uint64_t id)
{
    uint32_t name = (uint32_t)id;
    layer_close((uint8_t)(id >> 62));
    if (name && gt__capture_on())
        emit_end(name);
}

void gt__nvtx_mark(uint32_t name)
{
    if (!name)
        return;
    struct gt_r_instant r = {
        .h = {GT_R_INSTANT, sizeof(r)},
        .name = name,
        .ts = gt__rec_out->now(),
    };
    (void)gt__rec_out->emit(&r, sizeof(r));
}

void gt__nvtx_scope_push(const char *text)
{
    (void)gt__nvtx_push(RF_DOMAIN, 0, text);
}

void gt__nvtx_scope_pop(void)
{
    (void)gt__nvtx_pop(RF_DOMAIN);
}
