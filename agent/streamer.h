/*
 * The streamer thread (agent/streamer.c): every tick, or sooner when a
 * thread seals a block, it drains the threads' buffers into chunks and
 * hands them to the sink; at exit it makes the final pass.
 */
#ifndef GRADTRACE_AGENT_STREAMER_H
#define GRADTRACE_AGENT_STREAMER_H

#include "agent/internal.h"

/* Starts the streamer thread (signals blocked). @return 0 or -errno. */
GT__WUR int gt__streamer_start(void);

/*
 * Asks the streamer for a final flush and waits for it while it makes
 * progress (FINAL_WAIT_MS without any, FINAL_CAP_MS at most); without
 * a streamer, flushes inline. Then the streamer is gone.
 */
void gt__streamer_stop(void);

/*
 * The process ends without exit() (_exit, agent/exit.c): when this
 * process's streamer runs, as gt__streamer_stop (final pass, goodbye,
 * bounded wait); otherwise nothing (a fork child that never recorded
 * ends without a stream; after gt__streamer_stop nothing is left).
 */
void gt__streamer_exit_flush(void);

/* In a fork child: the parent's streamer does not exist here. */
void gt__streamer_after_fork_child(void);

#endif /* GRADTRACE_AGENT_STREAMER_H */
