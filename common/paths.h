/*
 * Where the daemon's sockets live, agreed by the agent, the daemon and the
 * CLI: $XDG_RUNTIME_DIR/gradtrace when XDG_RUNTIME_DIR is set, absolute and
 * owned by this user, else /tmp/gradtrace-<uid>. The daemon creates the
 * directory 0700 and refuses one owned by someone else or open to others.
 *
 *   <dir>/agent.sock     agents stream here (GRADTRACE_SOCKET overrides)
 *   <dir>/control.sock   JSON-lines control (GRADTRACE_CONTROL overrides)
 *
 * Async-signal-safe: no (getenv). Called once at start by each program.
 */
#ifndef GRADTRACE_COMMON_PATHS_H
#define GRADTRACE_COMMON_PATHS_H

#include <stddef.h>

/* @return 0, or -ENAMETOOLONG when the path does not fit cap bytes. */
int gt__runtime_dir(char *buf, size_t cap);
/* <runtime dir>/agent.sock unless GRADTRACE_SOCKET is set. Same returns. */
int gt__agent_socket_path(char *buf, size_t cap);
/* <runtime dir>/control.sock unless GRADTRACE_CONTROL is set. */
int gt__control_socket_path(char *buf, size_t cap);

#endif
