/*
 * The public C API (include/gradtrace/gradtrace.h): forwards into the
 * event core (agent/events.c), the capture state, the trigger engine and
 * the life cycle, plus the one rule that is the C API's own: whether
 * gt_module_begin/end are a layer source (GRADTRACE_LAYERS). The hooks
 * inside the agent (torch.c, nvtx.c) call the core directly, never these.
 */
#include <errno.h>

#include "agent/capture.h"
#include "agent/control.h"
#include "agent/core.h"
#include "agent/events.h"
#include "agent/stream.h"
#include "agent/torch.h"
#include "agent/trigger.h"

GT_API uint32_t gt_intern(const char *s)
{
    return s ? gt__intern(s, strlen(s)) : 0;
}

GT_API void gt_scope_begin(uint32_t name_id)
{
    gt__scope_begin(name_id);
}

GT_API void gt_scope_end(void)
{
    gt__scope_end();
}

GT_API void gt_comm_begin(uint32_t name_id)
{
    gt__comm_begin(name_id);
}

GT_API void gt_comm_end(uint32_t name_id)
{
    gt__comm_end(name_id);
}

/* GRADTRACE_LAYERS: the C API is a layer source unless the list leaves
 * it out (0: no configuration, as in tests that start no agent). */
static int capi_layers(void)
{
    unsigned s = gt__agent_config()->layers.sources;
    return s == 0 || (s & GT__LAYERS_CAPI);
}

GT_API void gt_module_begin(uint32_t path_id, uint32_t class_id)
{
    if (!capi_layers())
        return;
    /* Before the module's first operator: so the capture's first
     * operators are recorded, not only those after its first node. */
    if (GT__UNLIKELY(gt__capture_hooks()))
        gt__torch_ops_offer();
    gt__layer_begin(path_id, class_id);
}

GT_API void gt_module_end(void)
{
    if (capi_layers())
        gt__layer_end();
}

GT_API void gt_node_created(uint64_t seq, uint64_t fwd_tid)
{
    gt__node_created(seq, fwd_tid);
}

GT_API void gt_bwd_node_begin(uint32_t name_id, uint64_t seq, uint64_t fwd_tid)
{
    gt__bwd_node_begin(name_id, seq, fwd_tid, 0);
}

GT_API void gt_bwd_node_end(uint64_t seq, uint64_t fwd_tid)
{
    gt__bwd_node_end(seq, fwd_tid, 0);
}

GT_API void gt_bwd_pass_begin(void)
{
    gt__bwd_pass_begin(0);
}

GT_API void gt_bwd_pass_end(void)
{
    gt__bwd_pass_end();
}

GT_API void gt_step_expect(void)
{
    gt__trig_step_expect();
}

GT_API void gt_step(uint64_t step)
{
    (void)step; /* the agent numbers steps itself, as triggers count them */
    gt__step_end();
}

GT_API void gt_instant(uint32_t name_id)
{
    gt__instant(name_id);
}

GT_API void gt_collective(uint32_t op_id, uint32_t group, uint32_t ranks,
                          uint64_t seq, uint64_t begin_ns, uint64_t end_ns)
{
    gt__collective(op_id, group, ranks, seq, begin_ns, end_ns);
}

GT_API void gt_capture_start(void)
{
    gt__capture_set(1, 0);
    gt__capture_started();
}

GT_API void gt_capture_stop(void)
{
    gt__capture_request_cancel();
    gt__capture_set(0, 1);
}

GT_API int gt_capture_active(void)
{
    return gt__capture_on();
}

GT_API uint64_t gt_now_ns(void)
{
    return gt__now();
}

GT_API int gt_job_trigger_take(char *buf, size_t cap)
{
    return buf ? gt__jobtrig_take(buf, cap) : -EINVAL;
}

GT_API void gt_job_route(int up)
{
    __atomic_store_n(&gt__st.job_route, up != 0, __ATOMIC_RELAXED);
    /* With the process info, at the next pass and in every later stream. */
    __atomic_store_n(&gt__st.meta_due, 1, __ATOMIC_RELEASE);
}

GT_API int gt_trigger_arm(const char *spec)
{
    return spec ? gt__trig_arm(spec, strlen(spec)) : -EINVAL;
}

GT_API uint64_t gt_iteration(void)
{
    return gt__trig_iteration();
}

GT_API int gt_hooks_wanted(void)
{
    /* Also while a requested capture waits for its boundary: the hooks
     * are then in by the first forward it records. */
    return gt__capture_hooks_ask() || gt__capture_hooks();
}

GT_API void gt_finish(void)
{
    /* The exit path itself, run early: idempotent, so the destructor
     * that may still run later does nothing. */
    gt__agent_stop();
}

GT_API unsigned gt_api_version(void)
{
    return GT_API_VERSION;
}

/* ------------------------------------------------ compiled graphs */

GT_API uint32_t gt_compiled_graph(uint32_t code, uint32_t compile_id,
                                  uint32_t graph_id, uint32_t phase,
                                  uint32_t flags, uint32_t calls)
{
    if (phase < GT_COMPILED_FORWARD || phase > GT_COMPILED_INFERENCE)
        return 0;
    return gt__compiled_graph(code, compile_id, graph_id, (uint16_t)phase,
                              (uint16_t)(flags & GT_COMPILED_F_CACHED), calls);
}

GT_API void gt_compiled_call(uint32_t graph, uint32_t index, uint32_t kernel,
                             uint32_t scope, uint32_t owner, uint32_t fused,
                             uint32_t phase, uint32_t flags)
{
    if (phase < GT_COMPILED_FORWARD || phase > GT_COMPILED_RECOMPUTE)
        return;
    gt__compiled_call(graph, index, kernel, scope, owner, fused,
                      (uint16_t)phase, (uint16_t)(flags & 0xfu));
}

GT_API void gt_compiled_begin(uint32_t graph)
{
    gt__compiled_begin(graph);
}

GT_API void gt_compiled_end(uint32_t graph)
{
    gt__compiled_end(graph);
}

GT_API void gt_compile_span(uint32_t name, uint64_t begin_ns, uint64_t end_ns)
{
    if (end_ns >= begin_ns)
        gt__compile_span(name, begin_ns, end_ns);
}

GT_API void gt_layer_info(uint32_t layer, uint32_t cls, uint32_t flags)
{
    if (layer != 0)
        gt__layer_info(layer, cls,
                       flags & (GT_LAYER_F_BARE_ROOT | GT_LAYER_F_ROOT_CHILD));
}
