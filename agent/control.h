/*
 * What the daemon tells the agent (agent/control.c): control messages on
 * the agent socket, applied to the capture state and the trigger engine,
 * and the job-wide trigger kept for the Python side. Below the sink: the
 * sink reads them when the socket is readable, and closes the connection
 * when they say so.
 */
#ifndef GRADTRACE_AGENT_CONTROL_H
#define GRADTRACE_AGENT_CONTROL_H

#include <stddef.h>

#include "agent/internal.h"

/*
 * Lock holder, socket readable or hung up: reads the daemon's control
 * messages and applies them (capture on/off, triggers, acknowledgements).
 * @return 0 while the connection stands; a negative errno with *why set
 * when it must be closed (the daemon closed it, a read error, a malformed
 * message): the caller closes the sink.
 */
GT__WUR int gt__control_read(const char **why);

/*
 * Lock holder, connection ending: applies the whole control messages still
 * readable (the ACKs a dead daemon sent before it went), closing nothing.
 */
void gt__control_drain(void);

/*
 * Trigger specs the daemon sent (GT_CTL_TRIGGER, canonical text), kept in
 * arrival order for diagnostics (the trigger engine arms its own copy);
 * GT_CTL_TRIGGER_CLEAR empties the list. At most GT__TRIGGERS_MAX (later
 * ones are armed but not kept here). Read them from the streamer thread
 * (or with the stream lock).
 */
#define GT__TRIGGERS_MAX 16
unsigned gt__triggers_count(void);
const char *gt__trigger_text(unsigned i);

/*
 * The job-wide trigger (GT_CTL_JOB_TRIGGER) the daemon handed this agent,
 * if not yet taken: copied NUL-terminated into buf and forgotten.
 * @return its length, 0 when there is none, -ENOSPC when cap is too small
 * (it stays). Any thread; cold path (a mutex).
 */
int gt__jobtrig_take(char *buf, size_t cap);

#endif /* GRADTRACE_AGENT_CONTROL_H */
