/*
 * Where chunks go (agent/sink.c): the daemon's agent socket or a .gtr
 * file, held in the stream's state (agent/stream.h). Every function here
 * is for the stream lock's holder.
 */
#ifndef GRADTRACE_AGENT_SINK_H
#define GRADTRACE_AGENT_SINK_H

#include <stdatomic.h>
#include <stddef.h>

#include "agent/stream.h"

/*
 * Tries to open the sink (file: open + hello; socket: nonblocking connect,
 * hello once connected). Called by the lock holder. @return 0 when ready,
 * -EINPROGRESS while a connect is pending, or a negative errno (the caller
 * backs off).
 */
GT__WUR int gt__sink_open(void);

/* A sink should exist now: always for a socket; for a file once the
 * process has recorded. */
static inline int gt__sink_wanted(void)
{
    return gt__st.kind == GT__SINK_SOCKET || atomic_load(&gt__st.file_wanted);
}

/* Lock holder: the socket became writable/readable/hung up (poll revents):
 * a pending connect completes, the daemon's control messages are read
 * (agent/control.h); a connection that broke is closed. */
void gt__sink_events(short revents);

/*
 * Writes len bytes, waiting at most timeout_ms for a full socket.
 * Async-signal-safe (write/send/poll only). @return 0 or a negative errno
 * (the stream is then broken: the caller closes it).
 */
GT__WUR int gt__sink_write(const void *buf, size_t len, int timeout_ms);

/*
 * Whether len more bytes fit into the socket's send buffer, reserve bytes
 * left over, so that writing them cannot wait for the daemon; waits up to
 * wait_ms for the daemon to read. Only a socket holding unread bytes is
 * ever full: a file, an empty socket (a chunk larger than the buffer must
 * still go out) or an unknown state say yes. Lock holder.
 * @return 1 fits, 0 not.
 */
int gt__sink_room(size_t len, size_t reserve, int wait_ms);

/* Closes the sink; a socket is retried after the backoff. */
void gt__sink_close(const char *why);

#endif /* GRADTRACE_AGENT_SINK_H */
