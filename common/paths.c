/* Default socket locations; see paths.h. */
#include "common/paths.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
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
