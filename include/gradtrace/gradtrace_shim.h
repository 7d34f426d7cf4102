/*
 * Header-only shim over gradtrace.h for programs that must run with or
 * without the agent: include this instead of linking libgradtrace.so and
 * call gt_shim_<name>(...) for each gt_<name>(...) of the API. The first
 * call looks the API up with dlsym(RTLD_DEFAULT) (finding it when
 * libgradtrace.so is preloaded or loaded globally); without the agent every
 * wrapper is a no-op (gt_shim_intern returns 0, gt_shim_capture_active 0,
 * gt_shim_api_version 0).
 *
 * dlsym is used rather than weak undefined symbols because whether a weak
 * reference is bound at run time depends on how the program was linked
 * (non-PIE executables resolve it to 0 at link time); dlsym works for any
 * executable. Link with -ldl on glibc older than 2.34.
 *
 * The lookup runs once per translation unit; concurrent first calls are
 * harmless (each stores the same pointers). Each wrapper then costs one
 * indirect call.
 */
#ifndef GRADTRACE_GRADTRACE_SHIM_H
#define GRADTRACE_GRADTRACE_SHIM_H

#include <dlfcn.h>
#include <stdint.h>

#include "gradtrace/gradtrace.h"

#ifdef __cplusplus
extern "C" {
#endif

/* X(return type, name, parameters, arguments): functions returning a value. */
#define GT_SHIM_RET_FUNCS(X)                                                  \
    X(uint32_t, intern, (const char *s), (s))                                 \
    X(int, capture_active, (void), ())                                        \
    X(unsigned, api_version, (void), ())

/* V(name, parameters, arguments): functions returning void. */
#define GT_SHIM_VOID_FUNCS(V)                                                 \
    V(scope_begin, (uint32_t name_id), (name_id))                             \
    V(scope_end, (void), ())                                                  \
    V(module_begin, (uint32_t path_id, uint32_t class_id), (path_id, class_id)) \
    V(module_end, (void), ())                                                 \
    V(node_created, (uint64_t seq, uint64_t fwd_tid), (seq, fwd_tid))         \
    V(bwd_node_begin, (uint32_t name_id, uint64_t seq, uint64_t fwd_tid),     \
      (name_id, seq, fwd_tid))                                                \
    V(bwd_node_end, (uint64_t seq, uint64_t fwd_tid), (seq, fwd_tid))         \
    V(bwd_pass_begin, (void), ())                                             \
    V(bwd_pass_end, (void), ())                                               \
    V(step, (uint64_t step), (step))                                          \
    V(instant, (uint32_t name_id), (name_id))                                 \
    V(capture_start, (void), ())                                              \
    V(capture_stop, (void), ())                                               \
    V(torch_param, (uint64_t tensor_impl, uint32_t module, uint32_t name),    \
      (tensor_impl, module, name))                                            \
    V(set_rank, (int32_t rank, int32_t world_size), (rank, world_size))      \
    V(comm_begin, (uint32_t name_id), (name_id))                              \
    V(comm_end, (uint32_t name_id), (name_id))

struct gt_shim_table {
    int loaded;
#define GT_SHIM_RFIELD(ret, name, params, args) ret(*name) params;
#define GT_SHIM_VFIELD(name, params, args) void(*name) params;
    GT_SHIM_RET_FUNCS(GT_SHIM_RFIELD)
    GT_SHIM_VOID_FUNCS(GT_SHIM_VFIELD)
#undef GT_SHIM_RFIELD
#undef GT_SHIM_VFIELD
};

static struct gt_shim_table gt_shim__table;

static inline void gt_shim__load(void)
{
#define GT_SHIM_RLOOKUP(ret, name, params, args)                              \
    *(void **)&gt_shim__table.name = dlsym(RTLD_DEFAULT, "gt_" #name);
#define GT_SHIM_VLOOKUP(name, params, args)                                   \
    *(void **)&gt_shim__table.name = dlsym(RTLD_DEFAULT, "gt_" #name);
    GT_SHIM_RET_FUNCS(GT_SHIM_RLOOKUP)
    GT_SHIM_VOID_FUNCS(GT_SHIM_VLOOKUP)
#undef GT_SHIM_RLOOKUP
#undef GT_SHIM_VLOOKUP
    __atomic_store_n(&gt_shim__table.loaded, 1, __ATOMIC_RELEASE);
}

static inline void gt_shim__ensure(void)
{
    if (!__atomic_load_n(&gt_shim__table.loaded, __ATOMIC_ACQUIRE))
        gt_shim__load();
}

/* @return 1 when the agent's API was found, else 0. */
static inline int gt_shim_agent_present(void)
{
    gt_shim__ensure();
    return gt_shim__table.intern != 0;
}

/* Without the agent, value-returning wrappers return 0. */
#define GT_SHIM_RWRAP(ret, name, params, args)                                \
    static inline ret gt_shim_##name params                                  \
    {                                                                         \
        gt_shim__ensure();                                                    \
        return gt_shim__table.name ? gt_shim__table.name args : (ret)0;       \
    }
#define GT_SHIM_VWRAP(name, params, args)                                     \
    static inline void gt_shim_##name params                                 \
    {                                                                         \
        gt_shim__ensure();                                                    \
        if (gt_shim__table.name)                                              \
            gt_shim__table.name args;                                         \
    }
GT_SHIM_RET_FUNCS(GT_SHIM_RWRAP)
GT_SHIM_VOID_FUNCS(GT_SHIM_VWRAP)
#undef GT_SHIM_RWRAP
#undef GT_SHIM_VWRAP

#ifdef __cplusplus
}
#endif
#endif /* GRADTRACE_GRADTRACE_SHIM_H */
