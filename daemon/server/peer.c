/*
 * Who is at the other end of an accepted connection: the third layer of
 * the daemon's trust model (server.c). Agent and control connections
 * alike pass this check before a byte of theirs is read, so it sits
 * below both (ingest.c, dispatch.c) and knows neither.
 */
#include "daemon/server/server.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int gt__peer_check(uv_pipe_t *p, uint32_t *pid, char *why, size_t cap)
{
    struct ucred cred;
    socklen_t len = sizeof(cred);
    uv_os_fd_t fd;

    if (uv_fileno((uv_handle_t *)p, &fd) != 0 ||
        getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
        snprintf(why, cap, "cannot read peer credentials: %s", strerror(errno));
        return -EPERM;
    }
    *pid = (uint32_t)cred.pid;
    if (cred.uid != geteuid()) {
        snprintf(why, cap, "peer uid %u pid %d is not the daemon's user (uid %u)",
                 (unsigned)cred.uid, (int)cred.pid, (unsigned)geteuid());
        return -EPERM;
    }
    return 0;
}
