/*
 * libtorch RecordFunction user scopes as layers
 * (GRADTRACE_LAYERS=recordfunction[:GLOB]).
 *
 * A C++ program marks a layer with RECORD_USER_SCOPE("blocks.3"): an
 * at::RecordFunction of scope USER_SCOPE, which runs the callbacks
 * registered for that scope (and costs nothing while there are none). At
 * start the agent registers one global callback pair for USER_SCOPE only,
 * through at::addGlobalCallback found in the process's global scope (a
 * program linked with libtorch_cpu); each scope's start and end become a
 * push and pop on the NVTX layer stack (gt__nvtx_scope_push/pop), so
 * nesting, joining, phases and backward scopes follow the NVTX rules
 * (schema/torch.md, "Layer sources").
 *
 * The C++ ABI pieces, the same in Debian's 1.13 and PyPI's 2.x headers
 * (ATen/record_function.h):
 *   - RecordFunctionCallback is trivially copyable: start_, end_ (plain
 *     function pointers), double sampling_prob_, std::array<bool,
 *     NUM_SCOPES = 10> scopes_, bool needs_inputs_, needs_outputs_,
 *     needs_ids_ (40 bytes); passed by value it is copied to the stack,
 *     as the C struct below is.
 *   - The start callback returns std::unique_ptr<ObserverContext> by
 *     value: not trivially destructible, so through a hidden pointer,
 *     which on x86-64 is the first argument register and is returned in
 *     rax; the C function below takes and returns it. On aarch64 that
 *     pointer travels in x8, out of C's reach: this source is x86-64 only.
 *   - RecordFunction::name() is an exported out-of-line member.
 * Python loads libtorch later and locally, so Python programs are not
 * covered (their layers come from the Python package).
 */
#include <dlfcn.h>
#include <stdint.h>

#include "agent/hooks.h"
#include "agent/internal.h"
#include "agent/nvtx.h"
#include "agent/torch.h"

static const char *(*rf_name)(const void *rf);

/* The start callback: *ctx_out is the (null) ObserverContext. */
static void **rf_start(void **ctx_out, const void *rf)
{
    *ctx_out = NULL;
    gt__nvtx_scope_push(rf_name(rf));
    return ctx_out;
}

static void rf_end(const void *rf, void *ctx)
{
    (void)rf;
    (void)ctx;
    gt__nvtx_scope_pop();
}

void gt__recordfn_init(void)
{
    uint64_t (*add)(struct gt__rf_callback), handle;
    struct gt__rf_callback cb = {
        .start = rf_start, .end = rf_end, .sampling_prob = 1.0,
    };

    if (!(gt__agent_config()->layers.sources & GT__LAYERS_RECORDFN))
        return;
#if defined(__x86_64__)
    *(void **)&add = dlsym(RTLD_DEFAULT,
                           "_ZN2at17addGlobalCallbackENS_22RecordFunctionCallbackE");
    *(void **)&rf_name = dlsym(RTLD_DEFAULT, "_ZNK2at14RecordFunction4nameEv");
    if (!add || !rf_name) {
        gt__warn_once(GT__TORCH_WARN_RECORDFN, "GRADTRACE_LAYERS=recordfunction: libtorch's "
                      "RecordFunction not in the program (no libtorch_cpu "
                      "linked): no RecordFunction layers");
        return;
    }
    cb.scopes[GT__RF_USER_SCOPE] = 1;
    handle = add(cb);
    GT__DIAG("recordfunction: user-scope callback %llu registered",
             (unsigned long long)handle);
#else
    (void)add;
    (void)cb;
    (void)handle;
    gt__warn_once(GT__TORCH_WARN_RECORDFN, "GRADTRACE_LAYERS=recordfunction: supported on "
                  "x86-64 only (schema/torch.md)");
#endif
}
