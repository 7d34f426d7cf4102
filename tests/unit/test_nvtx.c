/*
 * NVTX injection (agent/nvtx.c) driven by the real nvtx3 headers: this
 * binary is an NVTX client whose static-injection hook
 * (InitializeInjectionNvtx2_fnptr, nvtxInit.h) points at the agent's
 * installer, so every nvtx* call below goes through nvtx3's own lazy
 * initialisation and export table into the agent's handlers, exactly as
 * with NVTX_INJECTION64_PATH (which tests/e2e/t_cuda_nvtx.sh covers with
 * the preloaded library). Records are caught by a test record output.
 *
 * Without the toolkit's nvtx3 headers the tests are skipped.
 */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <string.h>

#include "agent/capture.h"
#include "agent/cuda.h"
#include "agent/cupti_internal.h"
#include "agent/events.h"
#include "agent/internal.h"
#include "agent/nvtx.h"
#include "agent/rec_out.h"
#include "agent/trigger.h"
#include "common/codec.h"
#include "tests/unit/rec_out_fixture.h"

#if __has_include(<nvtx3/nvToolsExt.h>)
#define NVTX_STATIC_INJECTION_IMPL 1
/* nvtxInit.h uses it; with the define above the program must declare it. */
extern int (*InitializeInjectionNvtx2_fnptr)(const void *(*)(uint32_t));
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
#pragma GCC diagnostic ignored "-Wstrict-prototypes"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wcast-align"
#pragma GCC diagnostic ignored "-Wshadow"
#include <nvtx3/nvToolsExt.h>
#pragma GCC diagnostic pop
#define HAVE_NVTX 1

/* The static-injection hook nvtx3 checks when no library path is set. */
NvtxInitializeInjectionNvtxFunc_t InitializeInjectionNvtx2_fnptr =
    gt__nvtx_install;
#else
#define HAVE_NVTX 0
#endif



static uint64_t g_clock;

static uint64_t test_now(void)
{
    return ++g_clock;
}

static void test_warn(uint32_t code, const char *msg)
{
    (void)code;
    cr_assert_fail("unexpected warning: %s", msg);
}

static const struct gt__rec_out test_out = {
    .emit = test_emit, .intern = test_intern, .now = test_now, .warn = test_warn,
};

/* One decoded record of the output, in order. */
struct rec {
    uint16_t type;
    uint16_t kind;
    uint32_t name;
    uint32_t cls;
    uint64_t ts;
};

static int records(struct rec *out, int max)
{
    struct gt__rec_iter it;
    gt__rec_iter_init(&it, g_out.data, g_out.len);
    uint16_t type, size;
    const uint8_t *p;
    int n = 0;
    while (gt__rec_next(&it, &type, &size, &p) == 1 && n < max) {
        struct rec r = {.type = type};
        if (type == GT_R_SCOPE_BEGIN) {
            struct gt_r_scope_begin b;
            memcpy(&b, p, sizeof(b));
            r.kind = b.kind, r.name = b.name, r.cls = b.cls, r.ts = b.ts;
        } else if (type == GT_R_SCOPE_END) {
            struct gt_r_scope_end e;
            memcpy(&e, p, sizeof(e));
            r.kind = e.kind, r.name = e.name, r.ts = e.ts;
        } else if (type == GT_R_INSTANT) {
            struct gt_r_instant i;
            memcpy(&i, p, sizeof(i));
            r.name = i.name, r.ts = i.ts;
        }
        out[n++] = r;
    }
    return n;
}

static void setup(void)
{
    memset(&g_out, 0, sizeof(g_out));
    g_nstrings = 0;
    gt__rec_out_set(&test_out);
    gt__capture_set(1, 0);
}

static void teardown(void)
{
    gt__recbuf_free(&g_out);
    gt__rec_out_set(NULL);
    gt__cupti_test_set_running(0);
    gt__capture_set(0, 0);
}

Test(nvtx, parses_pytorch_seq)
{
    uint64_t s = 0;
    cr_assert(gt__nvtx_parse_seq("aten::addmm, seq = 12, sizes = [[4, 8]]", &s));
    cr_assert_eq(s, 12);
    cr_assert(gt__nvtx_parse_seq("AddmmBackward0, stashed seq = 4071", &s));
    cr_assert_eq(s, 4071);
    cr_assert(gt__nvtx_parse_seq("seq = 0", &s));
    cr_assert_eq(s, 0);
    cr_assert_not(gt__nvtx_parse_seq("aten::mm", &s));
    cr_assert_not(gt__nvtx_parse_seq("subseq = 5", &s), "whole word only");
    cr_assert_not(gt__nvtx_parse_seq("x, seq = ", &s));
    cr_assert_not(gt__nvtx_parse_seq("x, seq = 99999999999999999999999", &s),
                  "overflow refused");
    cr_assert_not(gt__nvtx_parse_seq(NULL, &s));
}

Test(nvtx, refuses_unusable_export_table)
{
    cr_assert_eq(gt__nvtx_install(NULL), 0);
}

/* gt__nvtx_layer_path with an open path (or none) and a phase. */
static int lpath(const char *glob, const char *text, int phase,
                 const char *parent, char *out)
{
    size_t len;
    int k = gt__nvtx_layer_path(glob, text, phase, parent,
                                parent ? strlen(parent) : 0, out, 64, &len);
    cr_assert_eq(len, k == GT__NVTX_FWD || k == GT__NVTX_BWD ? strlen(out) : 0);
    return k;
}

Test(nvtx, layer_paths_join_nested_names)
{
    char o[64];
    const int F = GT__NVTX_PHASE_FORWARD;

    cr_assert_eq(lpath(NULL, "blocks.3", F, NULL, o), GT__NVTX_FWD);
    cr_assert_str_eq(o, "blocks.3");
    cr_assert_eq(lpath(NULL, "fc1", F, "blocks.3", o), GT__NVTX_FWD);
    cr_assert_str_eq(o, "blocks.3.fc1");
    cr_assert_eq(lpath(NULL, "blocks.3.fc1", F, "blocks.3", o), GT__NVTX_FWD,
                 "already a full path below the open one");
    cr_assert_str_eq(o, "blocks.3.fc1");
    cr_assert_eq(lpath(NULL, "blocks.30", F, "blocks.3", o), GT__NVTX_FWD);
    cr_assert_str_eq(o, "blocks.3.blocks.30", "a prefix without the dot is a segment");
    cr_assert_eq(lpath("blocks.*", "iter 0", F, NULL, o), GT__NVTX_NONE);
    cr_assert_eq(lpath("blocks.*", "blocks.1", F, NULL, o), GT__NVTX_FWD);
    cr_assert_eq(lpath("blocks.*", "fc1", F, "blocks.1", o), GT__NVTX_FWD,
                 "the glob sees the joined path");
    cr_assert_str_eq(o, "blocks.1.fc1");
}

Test(nvtx, layer_paths_phases_and_torch_ranges)
{
    char o[64];
    const int F = GT__NVTX_PHASE_FORWARD;

    cr_assert_eq(lpath(NULL, "aten::addmm, seq = 12", F, NULL, o), GT__NVTX_NONE);
    cr_assert_eq(lpath(NULL, "AddmmBackward0, stashed seq = 12", F, NULL, o),
                 GT__NVTX_NONE);
    cr_assert_eq(lpath(NULL, "aten::empty", F, NULL, o), GT__NVTX_NONE);
    cr_assert_eq(lpath(NULL, "torch::autograd::AccumulateGrad", F, NULL, o),
                 GT__NVTX_NONE);
    cr_assert_eq(lpath(NULL, "forward", F, NULL, o), GT__NVTX_PHASE_FORWARD);
    cr_assert_eq(lpath(NULL, "backward", F, NULL, o), GT__NVTX_PHASE_BACKWARD);
    cr_assert_eq(lpath(NULL, "optimizer", F, NULL, o), GT__NVTX_PHASE_OPTIMIZER);
    cr_assert_eq(lpath(NULL, "blocks.2 backward", F, NULL, o), GT__NVTX_BWD);
    cr_assert_str_eq(o, "blocks.2");
    cr_assert_eq(lpath(NULL, "block.2", GT__NVTX_PHASE_BACKWARD, NULL, o),
                 GT__NVTX_BWD, "a layer range inside \"backward\"");
    cr_assert_str_eq(o, "block.2");
    cr_assert_eq(lpath(NULL, "block.2", GT__NVTX_PHASE_OPTIMIZER, NULL, o),
                 GT__NVTX_NONE);
    cr_assert_eq(lpath(NULL, "", F, NULL, o), GT__NVTX_NONE);
    cr_assert_eq(lpath(NULL, NULL, F, NULL, o), GT__NVTX_NONE);
    char longname[80];
    memset(longname, 'x', sizeof(longname) - 1);
    longname[79] = '\0';
    cr_assert_eq(lpath(NULL, longname, F, NULL, o), GT__NVTX_NONE, "too long");
}

#if HAVE_NVTX

Test(nvtx, attribute_layout_matches_header)
{
    cr_assert_eq(sizeof(struct gt__nvtx_attr), sizeof(nvtxEventAttributes_t));
    cr_assert_eq(offsetof(struct gt__nvtx_attr, size),
                 offsetof(nvtxEventAttributes_t, size));
    cr_assert_eq(offsetof(struct gt__nvtx_attr, message_type),
                 offsetof(nvtxEventAttributes_t, messageType));
    cr_assert_eq(offsetof(struct gt__nvtx_attr, message),
                 offsetof(nvtxEventAttributes_t, message));
    cr_assert_eq(GT__NVTX_MESSAGE_ASCII, NVTX_MESSAGE_TYPE_ASCII);
    cr_assert_eq(GT__NVTX_MESSAGE_REGISTERED, NVTX_MESSAGE_TYPE_REGISTERED);
}

Test(nvtx, push_pop_ranges_become_scopes, .init = setup, .fini = teardown)
{
    cr_assert_eq(nvtxRangePushA("block.0"), 0);
    cr_assert_eq(nvtxRangePushA("forward"), 1);
    nvtxMarkA("checkpoint");
    cr_assert_eq(nvtxRangePop(), 1);
    cr_assert_eq(nvtxRangePop(), 0);

    struct rec r[8];
    cr_assert_eq(records(r, 8), 5);
    cr_assert_eq(r[0].type, GT_R_SCOPE_BEGIN);
    cr_assert_eq(r[0].kind, GT_SCOPE_NVTX);
    cr_assert_str_eq(str_of(r[0].name), "block.0");
    cr_assert_eq(r[0].cls, 0, "default domain");
    cr_assert_eq(r[1].type, GT_R_SCOPE_BEGIN);
    cr_assert_str_eq(str_of(r[1].name), "forward");
    cr_assert_eq(r[2].type, GT_R_INSTANT);
    cr_assert_str_eq(str_of(r[2].name), "checkpoint");
    cr_assert_eq(r[3].type, GT_R_SCOPE_END);
    cr_assert_eq(r[3].kind, GT_SCOPE_NVTX);
    cr_assert_str_eq(str_of(r[3].name), "forward");
    cr_assert_eq(r[4].type, GT_R_SCOPE_END);
    cr_assert_str_eq(str_of(r[4].name), "block.0");
    for (int i = 1; i < 5; i++)
        cr_assert(r[i].ts > r[i - 1].ts);
}

Test(nvtx, domains_and_registered_strings, .init = setup, .fini = teardown)
{
    nvtxDomainHandle_t d = nvtxDomainCreateA("kernels");
    cr_assert_not_null(d);
    nvtxStringHandle_t s = nvtxDomainRegisterStringA(d, "gemm phase");
    nvtxEventAttributes_t a;
    memset(&a, 0, sizeof(a));
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = s;
    nvtxRangePushA("outer"); /* default domain */
    cr_assert_geq(nvtxDomainRangePushEx(d, &a), 0);
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = "start-end";
    nvtxRangeId_t id = nvtxDomainRangeStartEx(d, &a);
    /* Popping the default domain closes "outer", not the domain range. */
    nvtxRangePop();
    nvtxDomainRangeEnd(d, id);
    nvtxDomainRangePop(d);

    struct rec r[8];
    cr_assert_eq(records(r, 8), 6);
    cr_assert_str_eq(str_of(r[1].name), "gemm phase");
    cr_assert_str_eq(str_of(r[1].cls), "kernels");
    cr_assert_eq(r[2].type, GT_R_SCOPE_BEGIN);
    cr_assert_str_eq(str_of(r[2].name), "start-end");
    cr_assert_str_eq(str_of(r[2].cls), "kernels");
    cr_assert_eq(r[3].type, GT_R_SCOPE_END);
    cr_assert_str_eq(str_of(r[3].name), "outer");
    cr_assert_eq(r[4].type, GT_R_SCOPE_END);
    cr_assert_str_eq(str_of(r[4].name), "start-end");
    cr_assert_eq(r[5].type, GT_R_SCOPE_END);
    cr_assert_str_eq(str_of(r[5].name), "gemm phase");
}

Test(nvtx, wide_strings_as_utf8, .init = setup, .fini = teardown)
{
    nvtxRangePushW(L"caf\u00e9 \u2192 GPU");
    nvtxRangePop();
    struct rec r[2];
    cr_assert_eq(records(r, 2), 2);
    cr_assert_str_eq(str_of(r[0].name), "caf\xc3\xa9 \xe2\x86\x92 GPU");
}

Test(nvtx, nothing_recorded_while_capture_off, .init = setup, .fini = teardown)
{
    gt__capture_set(0, 0);
    nvtxRangePushA("before capture");
    nvtxRangeId_t id = nvtxRangeStartA("started before");
    gt__capture_set(1, 0);
    nvtxRangePushA("during");
    nvtxRangePop();
    nvtxRangePop();      /* its push was not recorded: no end either */
    nvtxRangeEnd(id);    /* same for the start/end range */
    struct rec r[4];
    cr_assert_eq(records(r, 4), 2);
    cr_assert_str_eq(str_of(r[0].name), "during");
    cr_assert_str_eq(str_of(r[1].name), "during");
}

static uint64_t g_pushed[8];
static int g_npush, g_npop;

static int fake_push(uint32_t kind, uint64_t id)
{
    cr_assert_eq(kind, GT__CU_EXT_CUSTOM2, "seq ids use their own kind");
    g_pushed[g_npush++ & 7] = id;
    return 0;
}

static int fake_pop(uint32_t kind, uint64_t *id)
{
    cr_assert_eq(kind, GT__CU_EXT_CUSTOM2);
    *id = 0;
    g_npop++;
    return 0;
}

Test(nvtx, pytorch_seq_becomes_correlation_id, .init = setup, .fini = teardown)
{
    gt__cupti.ActivityPushExternalCorrelationId = fake_push;
    gt__cupti.ActivityPopExternalCorrelationId = fake_pop;
    gt__cupti_test_set_running(1);
    nvtxRangePushA("aten::linear, seq = 41");
    nvtxRangePushA("aten::addmm, seq = 42, sizes = [[4, 8], [8, 8]]");
    nvtxRangePop();
    nvtxRangePushA("no sequence here");
    nvtxRangePop();
    nvtxRangePop();
    cr_assert_eq(g_npush, 2);
    cr_assert_eq(g_pushed[0], 41);
    cr_assert_eq(g_pushed[1], 42);
    cr_assert_eq(g_npop, 2, "every push popped with its range");
}

/* ------------------------------------------------------------ layers */

static struct gt__layer_config g_layers;

static void setup_layers(const char *value)
{
    const char *why;
    setup();
    cr_assert_eq(gt__config_layers(&g_layers, value, &why), 0);
    gt__nvtx_set_layers(&g_layers);
}

static void setup_nvtx_layers(void)
{
    setup_layers("nvtx");
}

static void setup_blocks_glob(void)
{
    setup_layers("nvtx::block*");
}

static void setup_train_domain(void)
{
    setup_layers("nvtx:train");
}

static uint32_t id_of(const char *s)
{
    return test_intern(s, strlen(s));
}

Test(nvtx, ranges_open_the_layer_stack, .init = setup_nvtx_layers,
     .fini = teardown)
{
    cr_assert_eq(gt__current_layer(), 0);
    nvtxRangePushA("blocks.1");
    cr_assert_eq(gt__current_layer(), id_of("blocks.1"));
    nvtxRangePushA("fc1");
    cr_assert_eq(gt__current_layer(), id_of("blocks.1.fc1"));
    nvtxRangePushA("aten::addmm, seq = 7");
    cr_assert_eq(gt__current_layer(), id_of("blocks.1.fc1"), "torch's op range");
    nvtxRangePop();
    nvtxRangePop();
    nvtxRangePushW(L"blocks.1.fc2");
    cr_assert_eq(gt__current_layer(), id_of("blocks.1.fc2"), "full path, wide");
    nvtxRangePop();
    cr_assert_eq(gt__current_layer(), id_of("blocks.1"));
    nvtxRangePop();
    cr_assert_eq(gt__current_layer(), 0);
}

Test(nvtx, layer_stack_kept_while_capture_off, .init = setup_nvtx_layers,
     .fini = teardown)
{
    gt__capture_set(0, 0);
    nvtxRangePushA("blocks.0");
    gt__capture_set(1, 0);
    nvtxRangePushA("fc1");
    cr_assert_eq(gt__current_layer(), id_of("blocks.0.fc1"));
    nvtxRangePop();
    nvtxRangePop();
    cr_assert_eq(gt__current_layer(), 0);
}

Test(nvtx, glob_selects_layers, .init = setup_blocks_glob, .fini = teardown)
{
    nvtxRangePushA("iter 0");
    nvtxRangePushA("forward");
    cr_assert_eq(gt__current_layer(), 0);
    nvtxRangePushA("block.0");
    cr_assert_eq(gt__current_layer(), id_of("block.0"), "not joined to non-layers");
    nvtxRangePop();
    nvtxRangePop();
    nvtxRangePushA("optimizer");
    nvtxRangePushA("block.0");
    cr_assert_eq(gt__current_layer(), 0, "optimizer ranges are no layer calls");
    nvtxRangePop();
    nvtxRangePop();
    nvtxRangeId_t r = nvtxRangeStartA("block.1");
    cr_assert_eq(gt__current_layer(), id_of("block.1"), "start/end range");
    nvtxRangeEnd(r);
    cr_assert_eq(gt__current_layer(), 0);
    nvtxRangePop();
}

Test(nvtx, domain_selects_layers, .init = setup_train_domain, .fini = teardown)
{
    nvtxDomainHandle_t d = nvtxDomainCreateA("train");
    nvtxEventAttributes_t a;
    memset(&a, 0, sizeof(a));
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = "blocks.2";
    nvtxRangePushA("blocks.9");
    cr_assert_eq(gt__current_layer(), 0, "default domain is not train");
    nvtxDomainRangePushEx(d, &a);
    cr_assert_eq(gt__current_layer(), id_of("blocks.2"));
    nvtxDomainRangePop(d);
    nvtxRangePop();
    cr_assert_eq(gt__current_layer(), 0);
}

static uint32_t g_kind[8];
static uint64_t g_ext[8];
static int g_nk, g_npk;

static int kind_push(uint32_t kind, uint64_t id)
{
    g_kind[g_nk & 7] = kind;
    g_ext[g_nk++ & 7] = id;
    return 0;
}

static int kind_pop(uint32_t kind, uint64_t *id)
{
    (void)kind;
    *id = 0;
    g_npk++;
    return 0;
}

Test(nvtx, backward_ranges_tag_kernels, .init = setup_nvtx_layers,
     .fini = teardown)
{
    gt__cupti.ActivityPushExternalCorrelationId = kind_push;
    gt__cupti.ActivityPopExternalCorrelationId = kind_pop;
    gt__cupti_test_set_running(1);
    nvtxRangePushA("blocks.3 backward");
    cr_assert_eq(gt__current_layer(), 0, "a backward opens no forward layer");
    nvtxRangePop();
    nvtxRangePushA("backward");
    nvtxRangePushA("blocks.2");
    nvtxRangePop();
    nvtxRangePop();
    nvtxRangePushA("blocks.1");
    nvtxRangePop();
    cr_assert_eq(g_nk, 3);
    cr_assert_eq(g_kind[0], GT__CU_EXT_CUSTOM1);
    cr_assert_eq(g_ext[0], id_of("blocks.3"));
    cr_assert_eq(g_kind[1], GT__CU_EXT_CUSTOM1);
    cr_assert_eq(g_ext[1], id_of("blocks.2"));
    cr_assert_eq(g_kind[2], GT__CU_EXT_CUSTOM0, "forward layer");
    cr_assert_eq(g_ext[2], id_of("blocks.1"));
    cr_assert_eq(g_npk, 3);
}

/* Iterations of a binary without autograd (schema/control.md). */
Test(nvtx, backward_phase_range_counts_one_pass, .init = setup_nvtx_layers,
     .fini = teardown)
{
    uint64_t it = gt__trig_iteration();

    nvtxRangePushA("backward");
    cr_assert(gt__trig_in_backward());
    nvtxRangePop();
    cr_assert_not(gt__trig_in_backward());
    cr_assert_eq(gt__trig_iteration(), it + 1);
    gt_bwd_pass_begin();
    nvtxRangePushA("backward");
    nvtxRangePop();
    gt_bwd_pass_end();
    cr_assert_eq(gt__trig_iteration(), it + 2, "inside an autograd pass: one");
    nvtxRangePushA("blocks.1 backward");
    nvtxRangePop();
    cr_assert_eq(gt__trig_iteration(), it + 2, "a layer's backward is no pass");
}

Test(nvtx, backward_phase_range_is_no_pass_without_nvtx_layers, .init = setup,
     .fini = teardown)
{
    uint64_t it = gt__trig_iteration();

    nvtxRangePushA("backward");
    nvtxRangePop();
    cr_assert_eq(gt__trig_iteration(), it);
}

static void setup_rf(void)
{
    setup_layers("recordfunction:blocks.*");
}

Test(nvtx, recordfunction_scopes_use_the_layer_rules, .init = setup_rf,
     .fini = teardown)
{
    gt__nvtx_scope_push("iteration");
    cr_assert_eq(gt__current_layer(), 0, "the glob rejects it");
    gt__nvtx_scope_push("blocks.1");
    cr_assert_eq(gt__current_layer(), id_of("blocks.1"));
    nvtxRangePushA("blocks.9");
    cr_assert_eq(gt__current_layer(), id_of("blocks.1"), "NVTX is no source here");
    gt__nvtx_scope_push("fc1");
    cr_assert_eq(gt__current_layer(), id_of("blocks.1.fc1"));
    nvtxRangePop();   /* pops the NVTX range, not the scope */
    cr_assert_eq(gt__current_layer(), id_of("blocks.1.fc1"));
    gt__nvtx_scope_pop();
    gt__nvtx_scope_pop();
    gt__nvtx_scope_pop();
    cr_assert_eq(gt__current_layer(), 0);
    struct rec r[4];
    cr_assert_eq(records(r, 4), 2, "only the NVTX range's own scope is recorded");
    cr_assert_str_eq(str_of(r[0].name), "blocks.9");
}

#endif
