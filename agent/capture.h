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
 * Any thread except a signal handler (the flush is not
 * async-signal-safe). Used by gt_capture_start/stop, the daemon's control
 * messages and trigger windows; GRADTRACE_CAPTURE uses gt__capture_init.
 */
void gt__capture_set(int on, int flush);

/* Agent start (GRADTRACE_CAPTURE=1): capture on, without the GT__DIAG line
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

/*
 * Captures the daemon asks for (GT_CTL_CAPTURE_ON, agent/control.c), which
 * begin at the program's next iteration boundary so that their first
 * iteration is whole, and with a count end by themselves (schema/
 * control.md, "start"). This file knows no iteration: callers pass the
 * trigger engine's number (gt__trig_iteration), which changes at every
 * boundary.
 *
 * gt__capture_request: iterations 0 for "until stopped", else the
 * iterations to capture; iteration the current number; now nonzero to
 * start at once (the program has no iterations to wait for). A request
 * replaces an earlier one. Any thread except a signal handler.
 *
 * gt__capture_request_cancel: a stop (GT_CTL_CAPTURE_OFF, gt_capture_stop)
 * drops a request not yet begun or still counting.
 *
 * gt__capture_boundary: called by the program's thread right after an
 * iteration boundary's records (gt_step's STEP mark, a counted pass's
 * end) with the number after it: a waiting request begins, a counting one
 * may end (capture off with flush). One relaxed load while no request is
 * open.
 *
 * gt__capture_tick: the streamer, every tick: follows the boundaries'
 * pace and begins a waiting request once no boundary came for max(2 s,
 * three iterations).
 *
 * gt__capture_pending: nonzero while a request waits for its boundary
 * (the module hooks are wanted then: gt_hooks_wanted).
 *
 * gt__capture_hooks_ask: gt_hooks_wanted's part: @return
 * gt__capture_pending(), and notes that the hooks' side asked, and saw
 * the request. Once some caller asks, a waiting request begins only at a
 * boundary after it was seen (or 1 s after it came), so the hooks are in
 * by the first forward it records.
 */
void gt__capture_request(uint64_t iterations, uint64_t iteration, int now);
void gt__capture_request_cancel(void);
void gt__capture_boundary(uint64_t iteration);
void gt__capture_tick(uint64_t now_ns, uint64_t iteration);
int gt__capture_pending(void);
int gt__capture_hooks_ask(void);

#endif /* GRADTRACE_AGENT_CAPTURE_H */
