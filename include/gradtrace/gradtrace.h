/*
 * gradtrace public C API: annotations for custom autograd runtimes, custom
 * training loops and the gradtrace Python module (which calls these through
 * ctypes).
 *
 * The functions are exported by libgradtrace.so, normally loaded with
 * LD_PRELOAD. A program that links against libgradtrace.so directly gets
 * them as ordinary functions; a program that wants to run with or without
 * the agent includes gradtrace/gradtrace_shim.h instead and calls the
 * gt_shim_* wrappers, which become no-ops when the agent is not loaded.
 *
 * Contract shared by every function here:
 *   - safe from any thread, at any time (before or after the agent started
 *     streaming, during exit);
 *   - never blocks, never allocates on the recording path, never prints;
 *   - while capture is off, a call costs a load and a branch (the module
 *     scope functions also keep the per-thread layer stack, see below);
 *   - records go to the calling thread's buffer; when it is full the record
 *     is dropped and counted (the count reaches the trace as GT_R_LOST).
 * Recording functions take no lock (a thread's first call maps its
 * buffers), so they cannot deadlock in a signal handler; but a handler that
 * records while it interrupted a recording call on the same thread may
 * overwrite that one record. gt_intern takes a lock: not from handlers.
 *
 * String ids come from gt_intern() and are valid for the whole process (and
 * its forked children); pass 0 where a string is optional.
 */
#ifndef GRADTRACE_GRADTRACE_H
#define GRADTRACE_GRADTRACE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Version of this API: GT_API_VERSION is major * 1000 + minor. The major
 * number is the library's soname (libgradtrace.so.<major>) and its symbol
 * version node (GRADTRACE_<major>); it changes only when an existing
 * function changes meaning or signature. The minor number grows when
 * functions are added. A program built against minor m runs with any agent
 * of the same major whose minor is >= m.
 */
#define GT_API_VERSION_MAJOR 1
#define GT_API_VERSION_MINOR 6
#define GT_API_VERSION (GT_API_VERSION_MAJOR * 1000 + GT_API_VERSION_MINOR)
/* The major number alone, as earlier headers defined it. */
#define GRADTRACE_API_VERSION GT_API_VERSION_MAJOR

#if defined(__GNUC__)
#define GT_API __attribute__((visibility("default")))
#else
#define GT_API
#endif

/*
 * Interns s (a NUL-terminated UTF-8 string, copied; the caller keeps
 * ownership). Strings longer than 4096 bytes are cut to 4096.
 * Cold path: takes a lock and may allocate; cache the id (once per call
 * site or per name), do not call it per event.
 * @return the id (> 0), the same for the same string for the life of the
 *         process; 0 when s is NULL or memory is exhausted.
 */
GT_API uint32_t gt_intern(const char *s);

/* Opens a user scope (GT_SCOPE_USER) named by name_id on this thread. */
GT_API void gt_scope_begin(uint32_t name_id);

/*
 * Closes the innermost user scope of this thread opened while capturing.
 * An end without a recorded begin (capture was off at the begin, or turned
 * on in between) records nothing.
 */
GT_API void gt_scope_end(void);

/*
 * nn.Module forward entry: records a GT_SCOPE_MODULE scope (path_id = the
 * module's qualified name such as "layers.17.mlp", class_id = its class
 * name) and pushes path_id on this thread's layer stack. The stack is kept
 * even while capture is off, so that nodes created after a capture starts
 * inside an already-running forward still get their layer. Called while a
 * backward node runs on this thread (a forward recomputed by activation
 * checkpointing), the scope carries GT_SCOPE_F_RECOMPUTE, on its end too.
 * Does nothing when GRADTRACE_LAYERS leaves the C API out (e.g.
 * GRADTRACE_LAYERS=nvtx); gt_module_end likewise.
 */
GT_API void gt_module_begin(uint32_t path_id, uint32_t class_id);

/* nn.Module forward exit: pops the layer stack, closes the module scope. */
GT_API void gt_module_end(void);

/*
 * An autograd node was created in the forward: seq is its sequence number,
 * fwd_tid torch's id of the creating thread. The record's layer is the
 * innermost module on this thread's layer stack (0 when none).
 */
GT_API void gt_node_created(uint64_t seq, uint64_t fwd_tid);

/*
 * A backward node starts/ends running on this thread. (fwd_tid, seq) join
 * it to its gt_node_created; seq = UINT64_MAX when unknown. name_id names
 * the node (e.g. "MmBackward0").
 */
GT_API void gt_bwd_node_begin(uint32_t name_id, uint64_t seq, uint64_t fwd_tid);
GT_API void gt_bwd_node_end(uint64_t seq, uint64_t fwd_tid);

/*
 * A backward pass starts/ends. The records carry the iteration it belongs
 * to (schema/control.md, "Iterations": the step, or without steps the
 * number of passes before it, from 0); the end carries the same number as
 * its begin.
 */
GT_API void gt_bwd_pass_begin(void);
GT_API void gt_bwd_pass_end(void);

/*
 * Ends the current training step (after the optimizer step). From the
 * first call on, iterations (trigger iteration=N, ProfilerStep#N) are
 * steps, numbered by the agent from 0; `step` is ignored (kept for
 * programs written against earlier versions).
 */
GT_API void gt_step(uint64_t step);

/*
 * Says that this program will mark its training steps with gt_step, so
 * that iterations are steps from the start even when a step holds several
 * backward passes (gradient accumulation). Call before the first backward
 * pass (the Python package does when an optimizer is created). Any thread.
 */
GT_API void gt_step_expect(void);

/* An instant event named by name_id. */
GT_API void gt_instant(uint32_t name_id);

/*
 * Starts/stops capture for the whole process (every thread). The daemon
 * can do the same from outside. Starting resets the backward-pass counter.
 */
GT_API void gt_capture_start(void);
GT_API void gt_capture_stop(void);

/* @return 1 while capturing, else 0. */
GT_API int gt_capture_active(void);

/*
 * @return 1 while capturing or while a trigger is armed (the trigger
 * engine then follows module scopes to open its windows), else 0: when
 * gt_module_begin/gt_module_end do anything. The Python package installs
 * its module hooks only then, at an optimizer-step boundary. Any thread;
 * one relaxed load. Since API minor 2. Also 1 while a capture the daemon
 * asked for waits for the next iteration boundary (schema/torch.md).
 */
GT_API int gt_hooks_wanted(void);

/*
 * Ends the stream now, as the agent does at exit: everything committed
 * is sent, then the stream's goodbye, which tells the daemon the trace is
 * whole; records made after this are not sent. For a runtime that ends
 * its process without running C exit handlers: CPython, after the main
 * code raised KeyboardInterrupt, finalizes and then kills itself with
 * SIGINT (the Python package calls this from its exit handler then).
 * Idempotent; the program's threads only, not from signal handlers;
 * blocks until the streamer has finished (3 s at most). Since API minor 3.
 */
GT_API void gt_finish(void);

/*
 * Lets a program check at run time which agent it got (the header it was
 * built with says GT_API_VERSION): for example
 *     gt_api_version() / 1000 == GT_API_VERSION_MAJOR &&
 *     gt_api_version() % 1000 >= GT_API_VERSION_MINOR
 * @return the GT_API_VERSION the agent was built with (major * 1000 +
 *         minor). Through the shim: 0 when no agent is loaded.
 */
GT_API unsigned gt_api_version(void);

/*
 * Registers a PyTorch parameter so that the AccumulateGrad node of its
 * gradient is attributed (GT_R_BWD_NODE_LAYER): tensor_impl is the
 * parameter's c10::TensorImpl* (Python: `param._cdata`), module the string
 * id of the path of the module that owns it, name the string id of its
 * name in that module ("weight"). module = 0 forgets tensor_impl (call it
 * when the parameter dies, so a later tensor at that address is not taken
 * for it). Registering an address again replaces what it maps to.
 * Cold path: takes a lock; not from signal handlers. Any thread. The
 * table holds 8192 parameters; beyond that, registration is ignored and
 * one warning goes into the trace. Nothing is owned or retained: only the
 * address is stored, never dereferenced.
 */
GT_API void gt_torch_param(uint64_t tensor_impl, uint32_t module,
                           uint32_t name);

/*
 * Sets the process's distributed rank and world size when the environment
 * did not give them (no RANK: torch.multiprocessing.spawn, a launcher of
 * its own); the Python package calls it once torch.distributed's default
 * process group exists. rank < 0 is ignored; world_size < 0 keeps the
 * known one. The new values reach the daemon in the next process-info
 * record: the trace's process name and metadata take them. The output
 * file stem and the daemon's choice of the triggers it sends (ranks=),
 * both made when the agent connected, keep the environment's values.
 * Since API minor 1. Cold path; any thread; not from signal handlers.
 */
GT_API void gt_set_rank(int32_t rank, int32_t world_size);

/*
 * The agent's clock: CLOCK_MONOTONIC nanoseconds, as every record's time.
 * Since API minor 2. Any thread; async-signal-safe.
 */
GT_API uint64_t gt_now_ns(void);

/*
 * A collective call that has returned (torch.distributed all_reduce,
 * barrier, ...): op_id names it (gt_intern), group is a process-group
 * number (0: the default group), ranks its size, seq the call's number
 * among the group's collectives (every rank of the group counts the same
 * calls from 0), begin_ns / end_ns gt_now_ns() before the call and after
 * it returned. Recorded whether or not capture is on (a few per training
 * step): `gradtrace merge` aligns the clocks of ranks by them. Since API
 * minor 2. Any thread; not from signal handlers.
 */
GT_API void gt_collective(uint32_t op_id, uint32_t group, uint32_t ranks,
                          uint64_t seq, uint64_t begin_ns, uint64_t end_ns);

/*
 * Job-wide triggers (`gradtrace trigger --job`): the daemon hands one
 * agent of its host the spec; the job's Python side takes it here,
 * carries it through the job's torch.distributed store to every rank with
 * a common iteration, and each rank arms it with gt_trigger_arm.
 * gt_job_trigger_take copies the pending spec NUL-terminated into buf:
 * @return its length, 0 when none is pending, -ENOSPC when cap is too
 * small. gt_trigger_arm arms a trigger spec (schema/control.md's syntax)
 * in this process as a daemon's trigger would be: @return 0, 1 when its
 * pids=/ranks= exclude this process, or a negative errno (bad spec, too
 * many triggers). gt_iteration: the iteration triggers count (their
 * `iteration=`) that this process is in now. Since API minor 2. Any
 * thread; cold paths; not from signal handlers.
 */
GT_API int gt_job_trigger_take(char *buf, size_t cap);
GT_API int gt_trigger_arm(const char *spec);
GT_API uint64_t gt_iteration(void);

/*
 * Says whether this process can carry job-wide triggers to every rank of
 * its job (up 1: it watches the job's torch.distributed store and takes
 * them with gt_job_trigger_take; 0: no longer). The daemon hands a
 * `gradtrace trigger --job` only to agents that said 1, and refuses it
 * when none did. Since API minor 3. Any thread; cold path.
 */
GT_API void gt_job_route(int up);

/*
 * torch.compile'd graphs (schema/torch.md, "Compiled models"; the Python
 * package calls these). Since API minor 4.
 *
 * gt_compiled_graph begins a compiled graph's map: code, compile_id are
 * string ids (the wrapper's code key, dynamo's compile id or 0),
 * graph_id inductor's graph id (UINT32_MAX unknown), phase 1 forward, 2
 * backward, 3 inference, flags GT_COMPILED_F_CACHED, calls the number of
 * gt_compiled_call that follow. @return the map's number (0: refused).
 * gt_compiled_call describes its call `index` (string ids: kernel, scope,
 * owner, fused; phase 1 forward, 2 backward, 3 recompute; flags
 * GT_CCALL_*). Both recorded with or without capture; cold paths, called
 * at compile time.
 *
 * gt_compiled_begin / gt_compiled_end bracket one run of the map's
 * generated wrapper on the calling thread (the end also when it raised).
 * While capturing, the thread's libtorch RecordFunctions between them
 * (the generated kernels' profiling scopes, extern calls) are recorded as
 * operators. Idle: one relaxed load each. Any thread.
 *
 * gt_compile_span: dynamo compiled a frame from begin_ns to end_ns
 * (gt_now_ns) on the calling thread; name a string id. Recorded with or
 * without capture.
 */
GT_API uint32_t gt_compiled_graph(uint32_t code, uint32_t compile_id,
                                  uint32_t graph_id, uint32_t phase,
                                  uint32_t flags, uint32_t calls);
GT_API void gt_compiled_call(uint32_t graph, uint32_t index, uint32_t kernel,
                             uint32_t scope, uint32_t owner, uint32_t fused,
                             uint32_t phase, uint32_t flags);
GT_API void gt_compiled_begin(uint32_t graph);
GT_API void gt_compiled_end(uint32_t graph);
GT_API void gt_compile_span(uint32_t name, uint64_t begin_ns, uint64_t end_ns);

/*
 * gt_layer_info: the Python package named a module layer (a string id),
 * of class cls (a string id, 0 unknown); flags GT_LAYER_F_BARE_ROOT on
 * the root whose modules have bare named_modules() paths ("blocks.0";
 * every other module's are "<its name>.<path>"), so that a compiled
 * region running in it, whose map's paths are relative, and whose layers
 * open no scopes, is named and classed as the eager model would be;
 * GT_LAYER_F_ROOT_CHILD on that root's direct children (their rows nest
 * under it also when they run no forward: parameter-only modules).
 * Recorded with or without capture. Since API minor 5. Any thread; cold
 * path.
 */
GT_API void gt_layer_info(uint32_t layer, uint32_t cls, uint32_t flags);

/*
 * Communication on this thread: gt_comm_begin before a collective call
 * (or the code that prepares and launches one: DDP's reducer), with
 * name_id (gt_intern) saying which; gt_comm_end with the same id after it
 * returned. While capturing they record a scope of kind GT_SCOPE_COMM,
 * which the converter counts as the enclosing backward node's (and so its
 * layer's) communication, not its compute (schema/trace-output.md,
 * "Communication"). Pairs nest; an end whose begin was not recorded
 * (capture off then, or a capture begun since) records nothing. Since API
 * minor 6. Any thread; not from signal handlers.
 */
GT_API void gt_comm_begin(uint32_t name_id);
GT_API void gt_comm_end(uint32_t name_id);

#ifdef __cplusplus
}
#endif
#endif /* GRADTRACE_GRADTRACE_H */
