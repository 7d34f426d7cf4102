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
 *   in agent/nvtx_rules.c says which, and its path)
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
 * This file is the injection: NVTX's calls decoded (attribute blocks,
 * wide strings, handles) and handed to the per-thread ranges of
 * agent/nvtx_ranges.c, which record them and open the layers.
 *
 * The NVTX ABI pieces are written out here (no nvtx3 headers in the
 * agent build); tests/unit/test_cupti.c checks the layouts against them.
 */
#include <stddef.h>
#include <stdint.h>
#include <wchar.h>

#include "agent/nvtx.h"

#include "agent/capture.h"
#include "agent/internal.h"

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

/* ------------------------------------------------------------ names */

/* Handles (domains, registered strings) carry the interned id. */
static uint32_t handle_id(const void *h)
{
    return (uint32_t)(uintptr_t)h;
}

static void *id_handle(uint32_t id)
{
    return (void *)(uintptr_t)id;
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
        return gt__nvtx_intern(a->message.ascii);
    case GT__NVTX_MESSAGE_UNICODE:
        return gt__nvtx_intern_wide(a->message.unicode);
    case GT__NVTX_MESSAGE_REGISTERED:
        return handle_id(a->message.registered);
    default:
        return 0;
    }
}

/* A range's text for the layer rules (buf: room for a wide one's UTF-8),
 * NULL when NVTX layers are off or the message has no text here
 * (registered strings are not layer candidates). */
static const char *layer_text(const struct gt__nvtx_attr *a, char *buf,
                              size_t cap)
{
    size_t n;

    if (!gt__nvtx_layers_on() || !a ||
        a->size < offsetof(struct gt__nvtx_attr, message) + sizeof(void *))
        return NULL;
    if (a->message_type == GT__NVTX_MESSAGE_ASCII)
        return a->message.ascii;
    if (a->message_type != GT__NVTX_MESSAGE_UNICODE)
        return NULL;
    n = gt__nvtx_utf8(a->message.unicode, buf, cap - 1);
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
    char buf[GT__NVTX_PATH_MAX];
    uint32_t name = gt__capture_on() ? attr_name(a, &text) : 0;
    if (!name)
        text = NULL;
    if (gt__nvtx_layers_on())
        text = layer_text(a, buf, sizeof(buf));
    return gt__nvtx_push(domain, name, text);
}

/* ------------------------------------------------------------ core module */

static void nvtx_mark_ex(const struct gt__nvtx_attr *a)
{
    const char *text;
    if (gt__capture_on())
        gt__nvtx_mark(attr_name(a, &text));
}

static void nvtx_mark_a(const char *m)
{
    if (gt__capture_on())
        gt__nvtx_mark(gt__nvtx_intern(m));
}

static void nvtx_mark_w(const wchar_t *m)
{
    if (gt__capture_on())
        gt__nvtx_mark(gt__nvtx_intern_wide(m));
}

static uint64_t nvtx_range_start_ex(const struct gt__nvtx_attr *a)
{
    const char *text;
    char buf[GT__NVTX_PATH_MAX];
    uint32_t name = gt__capture_on() ? attr_name(a, &text) : 0;
    return gt__nvtx_start(0, name, layer_text(a, buf, sizeof(buf)));
}

static uint64_t nvtx_range_start_a(const char *m)
{
    return gt__nvtx_start(0, gt__capture_on() ? gt__nvtx_intern(m) : 0,
                       gt__nvtx_layers_on() ? m : NULL);
}

static uint64_t nvtx_range_start_w(const wchar_t *m)
{
    char buf[GT__NVTX_PATH_MAX];
    return gt__nvtx_start(0, gt__capture_on() ? gt__nvtx_intern_wide(m) : 0,
                       layer_text_w(m, buf, sizeof(buf)));
}

static void nvtx_range_end(uint64_t id)
{
    gt__nvtx_end(id);
}

static int nvtx_range_push_ex(const struct gt__nvtx_attr *a)
{
    return push_attr(0, a);
}

static int nvtx_range_push_a(const char *m)
{
    int on = gt__capture_on();
    return gt__nvtx_push(0, on ? gt__nvtx_intern(m) : 0, on || gt__nvtx_layers_on() ? m : NULL);
}

static int nvtx_range_push_w(const wchar_t *m)
{
    char buf[GT__NVTX_PATH_MAX];
    return gt__nvtx_push(0, gt__capture_on() ? gt__nvtx_intern_wide(m) : 0,
                      layer_text_w(m, buf, sizeof(buf)));
}

static int nvtx_range_pop(void)
{
    return gt__nvtx_pop(0);
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
    char buf[GT__NVTX_PATH_MAX];
    return gt__nvtx_start(handle_id(domain),
                       gt__capture_on() ? attr_name(a, &text) : 0,
                       layer_text(a, buf, sizeof(buf)));
}

static void nvtx_domain_range_end(void *domain, uint64_t id)
{
    (void)domain;
    gt__nvtx_end(id);
}

static int nvtx_domain_range_push_ex(void *domain,
                                     const struct gt__nvtx_attr *a)
{
    return push_attr(handle_id(domain), a);
}

static int nvtx_domain_range_pop(void *domain)
{
    return gt__nvtx_pop(handle_id(domain));
}

static void *nvtx_domain_register_string_a(void *domain, const char *s)
{
    (void)domain;
    return id_handle(gt__nvtx_intern(s));
}

static void *nvtx_domain_register_string_w(void *domain, const wchar_t *s)
{
    (void)domain;
    return id_handle(gt__nvtx_intern_wide(s));
}

static void *nvtx_domain_create_a(const char *name)
{
    return id_handle(gt__nvtx_intern(name));
}

static void *nvtx_domain_create_w(const wchar_t *name)
{
    return id_handle(gt__nvtx_intern_wide(name));
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
