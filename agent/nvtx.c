/*
 * NVTX: the agent as NVTX injection library.
 *
 * NVTX (the nvtx3 headers compiled into an application, PyTorch, or the
 * kernels/ workloads) looks for a tool at its first call: the library
 * named by NVTX_INJECTION64_PATH, whose InitializeInjectionNvtx2 receives
 * NVTX's export table and fills in the function pointers NVTX calls from
 * then on. gt__cuda_init sets NVTX_INJECTION64_PATH to this library when
 * unset (gt__config_inject_self); NVTX then dlopens the copy already
 * preloaded.
 *
 * What becomes what:
 *   push/pop ranges (nvtxRangePush*, nvtxDomainRangePushEx/Pop) and
 *   start/end ranges (nvtxRangeStart*, nvtxDomainRangeStartEx/End)
 *       -> GT_R_SCOPE_BEGIN/END, kind GT_SCOPE_NVTX, cls = domain name id
 *   marks -> GT_R_INSTANT
 *   a pushed range named with PyTorch's "seq = N" (emit_nvtx: "aten::mm,
 *   seq = 12, ..." in the forward, "..., stashed seq = 12" in backward)
 *       -> external correlation GT_EXT_NVTX_SEQ = N pushed to CUPTI for
 *          the range's duration, so its kernels carry the sequence number.
 *   with GRADTRACE_LAYERS=nvtx, a range that is a layer (gt__nvtx_layer_path
 *   in agent/nvtx.h says which, and its path)
 *       -> a layer call through gt__layer_begin/end (agent/events.c): the
 *          layer stack nodes read, a module scope, forward triggers and
 *          GT_EXT_LAYER_FWD; a layer's backward range, through
 *          gt__layer_bwd_begin/end, a module scope flagged
 *          GT_SCOPE_F_BACKWARD, backward triggers and GT_EXT_LAYER_BWD;
 *          a `backward` phase range counts one backward pass (the
 *          iteration triggers name). RecordFunction user scopes
 *          (agent/recordfn.c) come through the same stack.
 * Domains and registered strings are handles that encode the interned
 * string id, so nothing is looked up per call. A start/end range keeps
 * its name id in the returned range id (low 32 bits), so ending it needs
 * no table. Start/end ranges may end on another thread: each end is
 * recorded on the thread that ends it (the converter tolerates it).
 *
 * Per-thread push/pop stack (fixed depth, no allocation): an entry holds
 * the recorded name (0 when capture was off at the push, so the pop
 * records nothing), the domain and whether a correlation id was pushed.
 *
 * The NVTX ABI pieces are written out here (no nvtx3 headers in the
 * agent build); tests/unit/test_cupti.c checks the layouts against them.
 */
#include <fnmatch.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "agent/capture.h"
#include "agent/cuda.h"
#include "agent/events.h"
#include "agent/internal.h"
#include "agent/nvtx.h"
#include "agent/rec_out.h"
#include "agent/trigger.h"
#include "common/util.h"

/* ------------------------------------------------------------ the ABI */

typedef void (*nvtx_fn)(void);

struct nvtx_callbacks {  /* NvtxExportTableCallbacks */
    size_t struct_size;
    int (*get_module_function_table)(int module, nvtx_fn ***table,
                                     unsigned *size);
};

enum { NVTX_ETID_CALLBACKS = 1 };
enum { NVTX_CB_MODULE_CORE = 1, NVTX_CB_MODULE_CORE2 = 5 };

enum {  /* NVTX_CBID_CORE_* */
    CORE_MarkEx = 1, CORE_MarkA = 2, CORE_MarkW = 3,
    CORE_RangeStartEx = 4, CORE_RangeStartA = 5, CORE_RangeStartW = 6,
    CORE_RangeEnd = 7,
    CORE_RangePushEx = 8, CORE_RangePushA = 9, CORE_RangePushW = 10,
    CORE_RangePop = 11,
};

enum {  /* NVTX_CBID_CORE2_* */
    CORE2_DomainMarkEx = 1, CORE2_DomainRangeStartEx = 2,
    CORE2_DomainRangeEnd = 3, CORE2_DomainRangePushEx = 4,
    CORE2_DomainRangePop = 5,
    CORE2_DomainRegisterStringA = 10, CORE2_DomainRegisterStringW = 11,
    CORE2_DomainCreateA = 12, CORE2_DomainCreateW = 13,
    CORE2_DomainDestroy = 14,
};

/* ------------------------------------------------------------ strings */

/* A wide string as UTF-8 into out (cut to fit). @return the length. */
static size_t wide_to_utf8(const wchar_t *w, char *out, size_t cap)
{
    size_t n = 0;
    for (; w && *w; w++) {
        uint32_t c = (uint32_t)*w;
        char b[4];
        size_t k;
        if (c < 0x80) {
            b[0] = (char)c;
            k = 1;
        } else if (c < 0x800) {
            b[0] = (char)(0xc0 | (c >> 6));
            b[1] = (char)(0x80 | (c & 0x3f));
            k = 2;
        } else if (c < 0x10000) {
            if (c >= 0xd800 && c <= 0xdfff)
                c = 0xfffd;
            b[0] = (char)(0xe0 | (c >> 12));
            b[1] = (char)(0x80 | ((c >> 6) & 0x3f));
            b[2] = (char)(0x80 | (c & 0x3f));
            k = 3;
        } else if (c < 0x110000) {
            b[0] = (char)(0xf0 | (c >> 18));
            b[1] = (char)(0x80 | ((c >> 12) & 0x3f));
            b[2] = (char)(0x80 | ((c >> 6) & 0x3f));
            b[3] = (char)(0x80 | (c & 0x3f));
            k = 4;
        } else {
            continue;
        }
        if (n + k > cap)
            break;
        memcpy(out + n, b, k);
        n += k;
    }
    return n;
}

static uint32_t intern_wide(const wchar_t *w)
{
    char buf[1024];
    size_t n = wide_to_utf8(w, buf, sizeof(buf));
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

/* Longest layer path an NVTX range can give (longer: not a layer). */
#define NVTX_PATH_MAX 512

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
    char path[NVTX_PATH_MAX];
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

static uint32_t intern_c(const char *s)
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

/* Handles (domains, registered strings) carry the interned id. */
static uint32_t handle_id(const void *h)
{
    return (uint32_t)(uintptr_t)h;
}

static void *id_handle(uint32_t id)
{
    return (void *)(uintptr_t)id;
}

/* ------------------------------------------------------------ seq = N */

int gt__nvtx_parse_seq(const char *s, uint64_t *seq)
{
    if (!s)
        return 0;
    const char *p = s;
    while ((p = strstr(p, "seq = ")) != NULL) {
        /* A whole word: start of the string or after a space or comma. */
        if (p == s || p[-1] == ' ' || p[-1] == ',') {
            const char *d = p + 6;
            if (*d >= '0' && *d <= '9') {
                uint64_t v = 0;
                for (; *d >= '0' && *d <= '9'; d++) {
                    if (v > (UINT64_MAX - 9) / 10)
                        return 0;
                    v = v * 10 + (uint64_t)(*d - '0');
                }
                *seq = v;
                return 1;
            }
        }
        p += 6;
    }
    return 0;
}

/* ------------------------------------------------------------ layers */

static int phase_word(const char *text)
{
    static const char *const words[] = {"forward", "backward", "optimizer"};

    for (int i = 0; i < 3; i++)
        if (!strcmp(text, words[i]))
            return GT__NVTX_PHASE_FORWARD + i;
    return 0;
}

int gt__nvtx_layer_path(const char *glob, const char *text, int phase,
                        const char *parent, size_t plen, char *out,
                        size_t cap, size_t *len)
{
    static const char bwd[] = " backward";
    const size_t bl = sizeof(bwd) - 1;
    int kind = phase == GT__NVTX_PHASE_BACKWARD ? GT__NVTX_BWD : GT__NVTX_FWD;
    size_t n, k = 0;
    uint64_t seq;
    int word;

    *len = 0;
    /* PyTorch's own ranges: ops with a sequence number ("aten::mm, seq =
     * 12"), and ops and nodes without one ("aten::empty",
     * "torch::autograd::AccumulateGrad"): a module path has no "::". */
    if (!text || !*text || gt__nvtx_parse_seq(text, &seq) || strstr(text, "::"))
        return GT__NVTX_NONE;
    word = phase_word(text);
    if (word)
        return word;
    if (phase == GT__NVTX_PHASE_OPTIMIZER)
        return GT__NVTX_NONE;
    n = strlen(text);
    if (n > bl && !memcmp(text + n - bl, bwd, bl)) {
        n -= bl;
        kind = GT__NVTX_BWD;
    }
    /* Join unless the name is already a full path below the open one. */
    if (plen && !(n > plen && text[plen] == '.' && !memcmp(text, parent, plen))) {
        if (plen + 1 >= cap)
            return GT__NVTX_NONE;
        memcpy(out, parent, plen);
        out[plen] = '.';
        k = plen + 1;
    }
    if (k + n >= cap)
        return GT__NVTX_NONE;
    memcpy(out + k, text, n);
    k += n;
    out[k] = '\0';
    if (glob && *glob && fnmatch(glob, out, 0) != 0)
        return GT__NVTX_NONE;
    *len = k;
    return kind;
}

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
                               t->path, plen, out, NVTX_PATH_MAX, len);
    if (kind >= GT__NVTX_PHASE_FORWARD) {
        *phase = kind;
        return kind;
    }
    if (kind != GT__NVTX_NONE)
        *id = intern_c(out);
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
    char out[NVTX_PATH_MAX];
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


static int capturing(void)
{
    return gt__capture_on();
}

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

/*
 * The range name of an attribute block: its id and, for ASCII messages,
 * the text (for the seq parse).
 */
static uint32_t attr_name(const struct gt__nvtx_attr *a, const char **text)
{
    *text = NULL;
    if (!a || a->size < offsetof(struct gt__nvtx_attr, message) + sizeof(void *))
        return 0;
    switch (a->message_type) {
    case GT__NVTX_MESSAGE_ASCII:
        *text = a->message.ascii;
        return intern_c(a->message.ascii);
    case GT__NVTX_MESSAGE_UNICODE:
        return intern_wide(a->message.unicode);
    case GT__NVTX_MESSAGE_REGISTERED:
        return handle_id(a->message.registered);
    default:
        return 0;
    }
}

/* @return the level of the new range (0-based), as NVTX defines. */
static int push_range(uint32_t domain, uint32_t name, const char *text)
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

/* Pops the innermost range of domain. @return its level, or -1. */
static int pop_range(uint32_t domain)
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
        if (e.name && capturing())
            emit_end(e.name);
        return i;
    }
    return -1;
}

static int layers_nvtx(void)
{
    return (layers()->sources & GT__LAYERS_NVTX) != 0;
}

/* A range's text for the layer rules (buf: room for a wide one's UTF-8),
 * NULL when NVTX layers are off or the message has no text here
 * (registered strings are not layer candidates). */
static const char *layer_text(const struct gt__nvtx_attr *a, char *buf,
                              size_t cap)
{
    size_t n;

    if (!layers_nvtx() || !a ||
        a->size < offsetof(struct gt__nvtx_attr, message) + sizeof(void *))
        return NULL;
    if (a->message_type == GT__NVTX_MESSAGE_ASCII)
        return a->message.ascii;
    if (a->message_type != GT__NVTX_MESSAGE_UNICODE)
        return NULL;
    n = wide_to_utf8(a->message.unicode, buf, cap - 1);
    buf[n] = '\0';
    return buf;
}

static const char *layer_text_w(const wchar_t *m, char *buf, size_t cap)
{
    struct gt__nvtx_attr a = {
        .size = sizeof(a), .message_type = GT__NVTX_MESSAGE_UNICODE,
        .message.unicode = m,
    };
    return layer_text(&a, buf, cap);
}

static int push_attr(uint32_t domain, const struct gt__nvtx_attr *a)
{
    const char *text;
    char buf[NVTX_PATH_MAX];
    uint32_t name = capturing() ? attr_name(a, &text) : 0;
    if (!name)
        text = NULL;
    if (layers_nvtx())
        text = layer_text(a, buf, sizeof(buf));
    return push_range(domain, name, text);
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
    char out[NVTX_PATH_MAX];
    size_t len;
    uint32_t id;
    int phase, kind;

    if (!t)
        return LAYER_NONE;
    phase = t->depth ? t->e[t->depth - 1].phase : GT__NVTX_PHASE_FORWARD;
    kind = layer_classify(t, domain, text, &phase, &id, out, &len);
    return layer_open(kind, id);
}

static uint64_t start_range(uint32_t domain, uint32_t name, const char *text)
{
    static _Atomic uint32_t counter;
    if (name)
        emit_begin(name, domain);
    uint64_t layer = start_layer(domain, text);
    uint64_t n = (atomic_fetch_add_explicit(&counter, 1, memory_order_relaxed) + 1) &
                 START_COUNT_MASK;
    return (layer << 62) | (n << 32) | name;
}

static void end_range(uint64_t id)
{
    uint32_t name = (uint32_t)id;
    layer_close((uint8_t)(id >> 62));
    if (name && capturing())
        emit_end(name);
}

static void mark(uint32_t name)
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
    (void)push_range(RF_DOMAIN, 0, text);
}

void gt__nvtx_scope_pop(void)
{
    (void)pop_range(RF_DOMAIN);
}

/* ------------------------------------------------------------ core module */

static void nvtx_mark_ex(const struct gt__nvtx_attr *a)
{
    const char *text;
    if (capturing())
        mark(attr_name(a, &text));
}

static void nvtx_mark_a(const char *m)
{
    if (capturing())
        mark(intern_c(m));
}

static void nvtx_mark_w(const wchar_t *m)
{
    if (capturing())
        mark(intern_wide(m));
}

static uint64_t nvtx_range_start_ex(const struct gt__nvtx_attr *a)
{
    const char *text;
    char buf[NVTX_PATH_MAX];
    uint32_t name = capturing() ? attr_name(a, &text) : 0;
    return start_range(0, name, layer_text(a, buf, sizeof(buf)));
}

static uint64_t nvtx_range_start_a(const char *m)
{
    return start_range(0, capturing() ? intern_c(m) : 0,
                       layers_nvtx() ? m : NULL);
}

static uint64_t nvtx_range_start_w(const wchar_t *m)
{
    char buf[NVTX_PATH_MAX];
    return start_range(0, capturing() ? intern_wide(m) : 0,
                       layer_text_w(m, buf, sizeof(buf)));
}

static void nvtx_range_end(uint64_t id)
{
    end_range(id);
}

static int nvtx_range_push_ex(const struct gt__nvtx_attr *a)
{
    return push_attr(0, a);
}

static int nvtx_range_push_a(const char *m)
{
    int on = capturing();
    return push_range(0, on ? intern_c(m) : 0, on || layers_nvtx() ? m : NULL);
}

static int nvtx_range_push_w(const wchar_t *m)
{
    char buf[NVTX_PATH_MAX];
    return push_range(0, capturing() ? intern_wide(m) : 0,
                      layer_text_w(m, buf, sizeof(buf)));
}

static int nvtx_range_pop(void)
{
    return pop_range(0);
}

/* ------------------------------------------------------------ core2 module */

static void nvtx_domain_mark_ex(void *domain, const struct gt__nvtx_attr *a)
{
    (void)domain;
    nvtx_mark_ex(a);
}

static uint64_t nvtx_domain_range_start_ex(void *domain,
                                           const struct gt__nvtx_attr *a)
{
    const char *text;
    char buf[NVTX_PATH_MAX];
    return start_range(handle_id(domain),
                       capturing() ? attr_name(a, &text) : 0,
                       layer_text(a, buf, sizeof(buf)));
}

static void nvtx_domain_range_end(void *domain, uint64_t id)
{
    (void)domain;
    end_range(id);
}

static int nvtx_domain_range_push_ex(void *domain,
                                     const struct gt__nvtx_attr *a)
{
    return push_attr(handle_id(domain), a);
}

static int nvtx_domain_range_pop(void *domain)
{
    return pop_range(handle_id(domain));
}

static void *nvtx_domain_register_string_a(void *domain, const char *s)
{
    (void)domain;
    return id_handle(intern_c(s));
}

static void *nvtx_domain_register_string_w(void *domain, const wchar_t *s)
{
    (void)domain;
    return id_handle(intern_wide(s));
}

static void *nvtx_domain_create_a(const char *name)
{
    return id_handle(intern_c(name));
}

static void *nvtx_domain_create_w(const wchar_t *name)
{
    return id_handle(intern_wide(name));
}

static void nvtx_domain_destroy(void *domain)
{
    (void)domain; /* ids live as long as the process */
}

/* ------------------------------------------------------------ injection */

struct slot {
    unsigned cbid;
    nvtx_fn fn;
};

#define FN(f) ((nvtx_fn)(void (*)(void))(f))

static int install(const struct nvtx_callbacks *cb, int module,
                   const struct slot *slots, size_t n)
{
    nvtx_fn **table = NULL;
    unsigned size = 0;
    if (!cb->get_module_function_table(module, &table, &size) || !table)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (slots[i].cbid < size && table[slots[i].cbid])
            *table[slots[i].cbid] = slots[i].fn;
    return 1;
}

int gt__nvtx_install(const void *(*get_export_table)(uint32_t))
{
    const struct nvtx_callbacks *cb =
        get_export_table ? get_export_table(NVTX_ETID_CALLBACKS) : NULL;
    if (!cb || cb->struct_size < sizeof(*cb) || !cb->get_module_function_table)
        return 0;
    static const struct slot core[] = {
        {CORE_MarkEx, FN(nvtx_mark_ex)},
        {CORE_MarkA, FN(nvtx_mark_a)},
        {CORE_MarkW, FN(nvtx_mark_w)},
        {CORE_RangeStartEx, FN(nvtx_range_start_ex)},
        {CORE_RangeStartA, FN(nvtx_range_start_a)},
        {CORE_RangeStartW, FN(nvtx_range_start_w)},
        {CORE_RangeEnd, FN(nvtx_range_end)},
        {CORE_RangePushEx, FN(nvtx_range_push_ex)},
        {CORE_RangePushA, FN(nvtx_range_push_a)},
        {CORE_RangePushW, FN(nvtx_range_push_w)},
        {CORE_RangePop, FN(nvtx_range_pop)},
    };
    static const struct slot core2[] = {
        {CORE2_DomainMarkEx, FN(nvtx_domain_mark_ex)},
        {CORE2_DomainRangeStartEx, FN(nvtx_domain_range_start_ex)},
        {CORE2_DomainRangeEnd, FN(nvtx_domain_range_end)},
        {CORE2_DomainRangePushEx, FN(nvtx_domain_range_push_ex)},
        {CORE2_DomainRangePop, FN(nvtx_domain_range_pop)},
        {CORE2_DomainRegisterStringA, FN(nvtx_domain_register_string_a)},
        {CORE2_DomainRegisterStringW, FN(nvtx_domain_register_string_w)},
        {CORE2_DomainCreateA, FN(nvtx_domain_create_a)},
        {CORE2_DomainCreateW, FN(nvtx_domain_create_w)},
        {CORE2_DomainDestroy, FN(nvtx_domain_destroy)},
    };
    if (!install(cb, NVTX_CB_MODULE_CORE, core, sizeof(core) / sizeof(core[0])))
        return 0;
    /* CORE2 (domains) is optional: NVTX v1/v2 clients lack it. */
    (void)install(cb, NVTX_CB_MODULE_CORE2, core2,
                  sizeof(core2) / sizeof(core2[0]));
    GT__DIAG("nvtx: injection installed");
    return 1;
}

GT_API int InitializeInjectionNvtx2(const void *(*get_export_table)(uint32_t))
{
    if (!gt__agent_config()->nvtx)
        return 0;
    return gt__nvtx_install(get_export_table);
}
