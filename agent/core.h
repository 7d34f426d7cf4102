/*
 * The agent's life cycle (agent/core.c): start, the exit flush, fork. The
 * top of the stream role: it starts what the others are. Called by the
 * constructor (agent/ctor.c), gt_finish, and by tests that run an agent
 * without a constructor.
 */
#ifndef GRADTRACE_AGENT_CORE_H
#define GRADTRACE_AGENT_CORE_H

#include "agent/internal.h"

/*
 * Starts the agent core with c (copied): buffers, strings, signal handlers,
 * fork handlers, and the streamer thread (signals blocked, waits for
 * nothing). Idempotent: later calls return 0 and change nothing.
 * @return 0 or a negative errno (the agent then records nothing).
 */
GT__WUR int gt__agent_start(const struct gt__config *c);

/*
 * Final flush: everything committed so far reaches the sink (the streamer
 * does it; inline when there is no streamer), then the streamer stops.
 * Bounded wait, safe from exit handlers and signal-ish contexts; once only.
 */
void gt__agent_stop(void);

#endif /* GRADTRACE_AGENT_CORE_H */
