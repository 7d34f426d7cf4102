/*
 * The optional hooks' start-up, for the constructor (agent/ctor.c), which
 * calls each init after the core started when its file is linked in
 * (weak: the library links without them). Defined by agent/torch.c,
 * agent/recordfn.c, agent/ops.c and agent/cupti.c. A hook that holds
 * records outside the agent's buffers registers its flush with
 * gt__capture_set_flush (agent/capture.h). Constructor only.
 */
#ifndef GRADTRACE_AGENT_HOOKS_H
#define GRADTRACE_AGENT_HOOKS_H

/* PyTorch autograd hooks: GRADTRACE_TORCH; resolution stays lazy. */
extern void gt__torch_init(void) __attribute__((weak));

/* RecordFunction layers: registers libtorch callbacks when
 * GRADTRACE_LAYERS asks for them. */
extern void gt__recordfn_init(void) __attribute__((weak));

/* Operators as cpu_op events: reads GRADTRACE_OPS and registers
 * libtorch's callback when libtorch is already in the global scope (a
 * C++ program). */
extern void gt__ops_init(void) __attribute__((weak));

/* CUDA: the injection variables, and CUPTI at once when CUDA is already
 * in the process. */
extern void gt__cuda_init(void) __attribute__((weak));

#endif /* GRADTRACE_AGENT_HOOKS_H */
