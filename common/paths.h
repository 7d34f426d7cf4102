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
#include <sys/types.h>

/* @return 0, or -ENAMETOOLONG when the path does not fit cap bytes. */
int gt__runtime_dir(char *buf, size_t cap);
/* <runtime dir>/agent.sock unless GRADTRACE_SOCKET is set. Same returns. */
int gt__agent_socket_path(char *buf, size_t cap);
/* <runtime dir>/control.sock unless GRADTRACE_CONTROL is set. */
int gt__control_socket_path(char *buf, size_t cap);

/*
 * Before the agent or the CLI sends anything to a daemon socket, or obeys
 * what comes back, it checks who is there (another user may have created
 * the default directory first and listen in it):
 *
 * gt__socket_dir_check: the directory holding socket_path (its text up to
 * the last '/', "." when there is none) is a directory, not a symlink,
 * owned by this process's effective uid, with no group or other
 * permissions.
 * @return 0; -ENOTDIR (not a directory, or a symlink), -EPERM (another
 *         owner, or open to others), or another -errno from lstat. why
 *         (cap bytes) says which, when cap > 0.
 *
 * gt__peer_uid_check: the process at the other end of the connected Unix
 * socket fd (for a listener: whoever called listen) runs as our
 * effective uid, read with SO_PEERCRED.
 * @return 0, -EPERM (another uid) or -errno (not a Unix socket).
 *
 * Any thread; not async-signal-safe (snprintf for why).
 */
int gt__socket_dir_check(const char *socket_path, char *why, size_t cap)
    __attribute__((warn_unused_result));
int gt__peer_uid_check(int fd, char *why, size_t cap)
    __attribute__((warn_unused_result));

#endif
