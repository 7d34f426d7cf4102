/*
 * The capture state: one word that every hook reads before doing anything
 * else, so that an idle hook costs one relaxed load and a branch.
 *
 *   bit 0          GT__CAP_ON: capturing (records are written);
 *   bit 1          GT__CAP_TRIGGERS: a trigger is armed (the autograd and
 *                  module hooks then feed the trigger engine even with
 *                  capture off);
 *   bits 2..31     the capture epoch, incremented at every off->on
 *                  transition (never 0 once a capture has started), so
 *                  scope stacks can tell a begin recorded in an earlier
 *                  capture from one of the current capture.
 *
 * One writer: agent/capture.c (gt__capture_set, gt__capture_arm), every
 * change one atomic read-modify-write of the word, so a reader always
 * sees the on bit together with its epoch. Everything else only reads,
 * through the inline readers below (any thread, signal handlers included).
 */
#ifndef GRADTRACE_AGENT_CAPTURE_H
#define GRADTRACE_AGENT_CAPTURE_H

#include <stdatomic.h>
#include <stdint.h>

#define GT__CAP_ON 1u
#define GT__CAP_TRIGGERS 2u
#define GT__CAP_HOOKS (GT__CAP_ON | GT__CAP_TRIGGERS)
#define GT__CAP_EPOCH_SHIFT 2

/* Written only by agent/capture.c; read it through the functions below.
 * Hidden: the hooks then load it PC-relative, not through the GOT (a
 * load and a branch while idle, nothing more). */
extern _Atomic uint32_t gt__capture_word __attribute__((visibility("hidden")));

/* The whole word, for a hook that needs several of its fields at once
 * (one load gives a consistent view of all of them). */
static inline uint32_t gt__capture_state(void)
{
    return atomic_load_explicit(&gt__capture_word, memory_order_relaxed);
}

/* Nonzero while capturing. */
static inline int gt__capture_on(void)
{
    return (gt__capture_state() & GT__CAP_ON) != 0;
}

/* Nonzero while any trigger is armed. */
static inline int gt__capture_triggers(void)
{
    return (gt__capture_state() & GT__CAP_TRIGGERS) != 0;
}

/* Nonzero while capturing or a trigger is armed: what the autograd hooks
 * test first. */
static inline int gt__capture_hooks(void)
{
    return (gt__capture_state() & GT__CAP_HOOKS) != 0;
}

/* The epoch in a word that gt__capture_state returned. */
static inline uint32_t gt__capture_epoch_of(uint32_t state)
{
    return state >> GT__CAP_EPOCH_SHIFT;
}

/* The epoch of the current (or last) capture; 0 before the first one. */
static inline uint32_t gt__capture_epoch(void)
{
    return gt__capture_epoch_of(gt__capture_state());
}

/*
 * Turns capture on or off; a no-op when it already is. On: a new epoch
 * and the backward-pass count restarts at 0. Off with flush: also runs
 * the registered flush (gt__capture_set_flush: CUDA's buffered records).
 * Any thread except a signal handler (the flush and the log line are not
 * async-signal-safe). Used by gt_capture_start/stop, the daemon's control
 * messages and trigger windows; GRADTRACE_CAPTURE uses gt__capture_init.
 */
void gt__capture_set(int on, int flush);

/* Agent start (GRADTRACE_CAPTURE=1): capture on, without the log line
 * gt__capture_set writes (the start's own line says it). */
void gt__capture_init(int on);

/*
 * Registers fn as the capture's flush: run when capture stops with flush
 * and before the final flush at exit, so records a hook holds outside the
 * agent's buffers (CUPTI's activity buffers) make it out. One function; a
 * later call replaces it; NULL removes it. Any thread.
 */
void gt__capture_set_flush(void (*fn)(void));

/* Runs the registered flush, if any. Not async-signal-safe. */
void gt__capture_flush(void);

/*
 * A hook's function run when the program itself starts a capture
 * (gt_capture_start, a trigger window opening): the operator callback
 * resumes there (agent/ops.c), so a capture's first operators are
 * recorded even where no module scope or node comes first. One function;
 * a later call replaces it. gt__capture_started runs it: call it on the
 * program's own threads only, never the streamer's (a daemon's "start"
 * may arrive while the process exits and the runtime the function calls
 * into is being torn down; hooks catch up at their next call instead).
 */
void gt__capture_set_started(void (*fn)(void));
void gt__capture_started(void);

/* Trigger engine only: sets (armed != 0) or clears GT__CAP_TRIGGERS. */
void gt__capture_arm(int armed);

/*
 * Backward passes of the current capture, for GT_R_BWD_PASS_BEGIN/END's
 * value. gt__capture_pass_next: @return the number of passes begun before
 * this one (then counts it). gt__capture_passes: @return passes begun.
 */
uint64_t gt__capture_pass_next(void);
uint64_t gt__capture_passes(void);

#endif /* GRADTRACE_AGENT_CAPTURE_H */
