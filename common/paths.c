/* Default socket locations; see paths.h. */
#include "common/paths.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static int fit(int n, size_t cap)
{
    return (n < 0 || (size_t)n >= cap) ? -ENAMETOOLONG : 0;
}

int gt__runtime_dir(char *buf, size_t cap)
{
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    struct stat st;

    if (xdg && xdg[0] == '/' && stat(xdg, &st) == 0 && S_ISDIR(st.st_mode) &&
        st.st_uid == getuid())
        return fit(snprintf(buf, cap, "%s/gradtrace", xdg), cap);
    return fit(snprintf(buf, cap, "/tmp/gradtrace-%u", (unsigned)getuid()), cap);
}

static int socket_path(const char *env, const char *name, char *buf, size_t cap)
{
    const char *v = getenv(env);
    char dir[4096];
    int rc;

    if (v && v[0])
        return fit(snprintf(buf, cap, "%s", v), cap);
    rc = gt__runtime_dir(dir, sizeof(dir));
    if (rc < 0)
        return rc;
    return fit(snprintf(buf, cap, "%s/%s", dir, name), cap);
}

int gt__agent_socket_path(char *buf, size_t cap)
{
    return socket_path("GRADTRACE_SOCKET", "agent.sock", buf, cap);
}

int gt__control_socket_path(char *buf, size_t cap)
{
    return socket_path("GRADTRACE_CONTROL", "control.sock", buf, cap);
}

int gt__socket_dir_check(const char *socket_path, char *why, size_t cap)
{
    char dir[4096];
    const char *slash = strrchr(socket_path, '/');
    size_t n = slash ? (size_t)(slash - socket_path) : 0;
    struct stat st;

    if (n >= sizeof(dir))
        return -ENAMETOOLONG;
    if (!slash)
        memcpy(dir, ".", 2);
    else if (n == 0)
        memcpy(dir, "/", 2);
    else {
        memcpy(dir, socket_path, n);
        dir[n] = '\0';
    }
    if (lstat(dir, &st) != 0) {
        int e = errno;
        if (cap)
            snprintf(why, cap, "socket directory %s: %s", dir, strerror(e));
        return -e;
    }
    if (!S_ISDIR(st.st_mode)) {
        if (cap)
            snprintf(why, cap, "socket directory %s is not a directory "
                     "(or is a symlink)", dir);
        return -ENOTDIR;
    }
    if (st.st_uid != geteuid()) {
        if (cap)
            snprintf(why, cap, "socket directory %s is owned by uid %u, not %u",
                     dir, (unsigned)st.st_uid, (unsigned)geteuid());
        return -EPERM;
    }
    if (st.st_mode & 077) {
        if (cap)
            snprintf(why, cap, "socket directory %s: mode %03o is open to "
                     "others (must be 0700)", dir, (unsigned)(st.st_mode & 0777));
        return -EPERM;
    }
    return 0;
}

int gt__peer_uid_check(int fd, char *why, size_t cap)
{
    struct ucred cred;
    socklen_t len = sizeof(cred);

    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
        int e = errno;
        if (cap)
            snprintf(why, cap, "cannot read peer credentials: %s", strerror(e));
        return -e;
    }
    if (cred.uid != geteuid()) {
        if (cap)
            snprintf(why, cap, "peer uid %u pid %d is not this user (uid %u)",
                     (unsigned)cred.uid, (int)cred.pid, (unsigned)geteuid());
        return -EPERM;
    }
    return 0;
}
