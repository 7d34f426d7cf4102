/*
 * The CLI's side of the control protocol: one blocking request, one reply
 * line, with a deadline so a wedged daemon cannot hang `gradtrace`; and
 * the readers of reply members the subcommands print.
 */
#include "daemon/cli/cli.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <poll.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/paths.h"
#include "common/util.h"

/* Reads up to the first newline into a growing buffer (caller frees). */
static int read_line(int fd, int timeout_ms, char **out)
{
    int64_t deadline = (int64_t)gt__mono_ns() + (int64_t)timeout_ms * 1000000;
    size_t len = 0, cap = 4096;
    char *buf = gt__malloc(cap);
    int rc;

    if (!buf)
        return -ENOMEM;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int64_t left = (deadline - (int64_t)gt__mono_ns()) / 1000000;
        ssize_t n;

        if (left <= 0) {
            rc = -ETIMEDOUT;
            goto out_free_buf;
        }
        if (poll(&p, 1, (int)left) < 0) {
            if (errno == EINTR)
                continue;
            rc = -errno;
            goto out_free_buf;
        }
        if (len + 1 >= cap) {
            char *nb = cap >= (64u << 20) ? NULL : gt__realloc(buf, cap * 2);

            if (!nb) {
                rc = -ENOMEM;
                goto out_free_buf;
            }
            buf = nb;
            cap *= 2;
        }
        n = read(fd, buf + len, cap - len - 1);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n < 0) {
            rc = -errno;
            goto out_free_buf;
        }
        if (n == 0) {
            rc = -ECONNRESET;
            goto out_free_buf;
        }
        len += (size_t)n;
        buf[len] = '\0';
        if (memchr(buf + len - (size_t)n, '\n', (size_t)n)) {
            *out = buf;
            return 0;
        }
    }
out_free_buf:
    gt__free(buf);
    return rc;
}

int gt__cli_connect(const char *path, char *why, size_t cap)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd, rc;

    if (strlen(path) >= sizeof(sa.sun_path)) {
        snprintf(why, cap, "socket path too long: %s", path);
        return -ENAMETOOLONG;
    }
    if ((rc = gt__socket_dir_check(path, why, cap)) < 0) {
        if (rc == -ENOENT)
            snprintf(why, cap, "no daemon on %s (no such directory)", path);
        return rc;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        rc = -errno;
        snprintf(why, cap, "socket: %s", strerror(-rc));
        return rc;
    }
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        rc = -errno;
        snprintf(why, cap, "no daemon on %s (%s)", path, strerror(-rc));
        goto out_close_fd;
    }
    if ((rc = gt__peer_uid_check(fd, why, cap)) < 0) {
        char peer[256];

        snprintf(peer, sizeof(peer), "%s", why);
        snprintf(why, cap, "not talking to %s: %s", path, peer);
        goto out_close_fd;
    }
    return fd;
out_close_fd:
    close(fd);
    return rc;
}

int gt__cli_request(const char *path, const cJSON *req, int timeout_ms,
                    cJSON **reply, char *err, size_t errcap)
{
    char *text = cJSON_PrintUnformatted(req);
    char *line = NULL;
    int fd, rc;

    *reply = NULL;
    if (!text) {
        snprintf(err, errcap, "out of memory");
        return -ENOMEM;
    }
    fd = gt__cli_connect(path, err, errcap);
    if (fd < 0) {
        rc = fd;
        goto out_free_text;
    }
    rc = gt__write_all(fd, text, strlen(text), GT__WRITE_SOCKET, timeout_ms);
    if (rc == 0)
        rc = gt__write_all(fd, "\n", 1, GT__WRITE_SOCKET, timeout_ms);
    if (rc == 0)
        rc = read_line(fd, timeout_ms, &line);
    if (rc < 0) {
        snprintf(err, errcap, "control request to %s failed: %s", path,
                 strerror(-rc));
        goto out_close_fd;
    }
    *reply = cJSON_Parse(line);
    /* Whatever the daemon relays, the terminal gets clean text. */
    gt__json_clean_strings(*reply);
    if (!cJSON_IsObject(*reply)) {
        cJSON_Delete(*reply);
        *reply = NULL;
        snprintf(err, errcap, "daemon sent an invalid reply");
        rc = -EPROTO;
        goto out_free_line;
    }
    if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(*reply, "ok"))) {
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(*reply, "error");

        snprintf(err, errcap, "%s", cJSON_IsString(e) ? e->valuestring : "request failed");
        rc = -EINVAL;
    }
out_free_line:
    gt__free(line);
out_close_fd:
    close(fd);
out_free_text:
    cJSON_free(text);
    return rc;
}

int gt__cli_simple(const char *path, const char *cmd, int timeout_ms,
                   cJSON **reply, char *err, size_t errcap)
{
    cJSON *req = cJSON_CreateObject();
    int rc;

    if (!req || !cJSON_AddStringToObject(req, "cmd", cmd)) {
        cJSON_Delete(req);
        snprintf(err, errcap, "out of memory");
        return -ENOMEM;
    }
    rc = gt__cli_request(path, req, timeout_ms, reply, err, errcap);
    cJSON_Delete(req);
    return rc;
}

int gt__cli_exe_dir(char *buf, size_t cap)
{
    char path[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
    char *slash;

    if (n <= 0)
        return -errno;
    path[n] = '\0';
    slash = strrchr(path, '/');
    if (!slash)
        return -ENOENT;
    *slash = '\0';
    if ((size_t)snprintf(buf, cap, "%s", path) >= cap)
        return -ENAMETOOLONG;
    return 0;
}

int gt__cli_control_path(char *buf, size_t cap)
{
    if (gt__control_socket_path(buf, cap) < 0) {
        fprintf(stderr, "gradtrace: control socket path too long\n");
        return -ENAMETOOLONG;
    }
    return 0;
}

double gt__cli_num(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

const char *gt__cli_str(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

    if (!cJSON_IsString(v))
        return "";
    gt__text_clean(v->valuestring);
    return v->valuestring;
}
