/*
 * DDP's reducer as communication (schema/torch.md, "Communication").
 *
 * DistributedDataParallel's gradient work runs in C++, inside the
 * backward: a post-hook of each parameter's AccumulateGrad node calls
 * c10d::Reducer::autograd_hook(index), which copies the gradient into its
 * bucket and, once a bucket is full, launches its all-reduce (or the
 * user's comm hook); at the end of the pass the engine runs
 * Reducer::finalize_backward(), which waits for those all-reduces and
 * writes the averaged gradients back. Without this file that time is the
 * AccumulateGrad node's own, and the report blames parameter gradients.
 *
 * Both are member functions libtorch_cpu calls through its own PLT (torch
 * 1.13 and 2.x, checked up to 2.15: R_X86_64_JUMP_SLOT relocations in
 * libtorch_cpu.so), so exporting their mangled names from the preloaded
 * agent interposes them, as agent/torch.c does for the engine. Each call
 * becomes a GT_SCOPE_COMM scope while capturing (gt__comm_begin/end): one
 * capture test and a tail call otherwise. The real functions are resolved
 * in libtorch_cpu on first use (agent/torch.c) and cached.
 *
 * autograd_hook throws (c10::Error: "Expected to mark a variable ready
 * only once", unused parameters) into DDP's Python caller: the exception
 * unwinds through this C frame (built with -fexceptions, Makefile), and
 * the cleanup handler closes the scope on the way out.
 */
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/capture.h"
#include "agent/events.h"
#include "agent/internal.h"
#include "agent/torch.h"

#define SYM_HOOK "_ZN4c10d7Reducer13autograd_hookEm"
#define SYM_FINAL "_ZN4c10d7Reducer17finalize_backwardEv"

typedef void (*hook_fn)(void *self, size_t index);
typedef void (*final_fn)(void *self);

/* The real functions, as resolved (cast to their types at the call). */
static _Atomic(void *) real_hook, real_final;
static _Atomic uint32_t name_hook, name_final;

/* The real function behind our definition self, cached in *slot. */
static void *real_of(_Atomic(void *) *slot, const char *sym, const void *self,
                     const void *caller)
{
    void *f = atomic_load_explicit(slot, memory_order_acquire);
    if (GT__UNLIKELY(!f)) {
        f = gt__torch_resolve(sym, self, caller);
        if (!f)
            gt__torch_unresolved(sym);
        atomic_store_explicit(slot, f, memory_order_release);
    }
    return f;
}

/* The interned span name, cached in *slot (0 while interning fails). */
static uint32_t name_of(_Atomic uint32_t *slot, const char *text, size_t len)
{
    uint32_t id = atomic_load_explicit(slot, memory_order_relaxed);
    if (GT__UNLIKELY(!id)) {
        id = gt__intern(text, len);
        atomic_store_explicit(slot, id, memory_order_relaxed);
    }
    return id;
}

static void comm_guard_end(const uint32_t *name)
{
    if (*name)
        gt__comm_end(*name);
}

/* Opens the scope when capturing: @return its name, 0 when none opened. */
static uint32_t comm_open(_Atomic uint32_t *slot, const char *text, size_t len)
{
    if (GT__LIKELY(!gt__capture_on()) || gt__torch_off())
        return 0;
    uint32_t id = name_of(slot, text, len);
    if (id)
        gt__comm_begin(id);
    return id;
}

#define TEXT(s) s, sizeof(s) - 1

void _ZN4c10d7Reducer13autograd_hookEm(void *self, size_t index)
{
    hook_fn real = (hook_fn)real_of(&real_hook, SYM_HOOK,
                                    (const void *)_ZN4c10d7Reducer13autograd_hookEm,
                                    __builtin_return_address(0));
    uint32_t g __attribute__((cleanup(comm_guard_end))) =
        comm_open(&name_hook, TEXT("DDP reducer"));
    real(self, index);
}

void _ZN4c10d7Reducer17finalize_backwardEv(void *self)
{
    final_fn real = (final_fn)real_of(&real_final, SYM_FINAL,
                                      (const void *)_ZN4c10d7Reducer17finalize_backwardEv,
                                      __builtin_return_address(0));
    uint32_t g __attribute__((cleanup(comm_guard_end))) =
        comm_open(&name_final, TEXT("DDP all-reduce wait"));
    real(self);
}
