/*
 * Control messages to an agent (GT_CTL_*: welcome, capture, triggers,
 * acknowledgements), the one way the daemon talks back on an agent
 * connection. Below everything that sends (ingest.c, agent_trig.c,
 * dispatch.c): it knows the connection's pipe and nothing of why a
 * message goes.
 *
 * Messages are queued on libuv; an agent that stops reading cannot make
 * the queue grow without bound (WRITE_QUEUE_MAX), and a message that
 * cannot be queued is the caller's to drop: the agent never waits for
 * one. The last message before a close is sent at once instead
 * (gt__agent_send_now), since closing the handle cancels queued writes.
 */
#include "daemon/server/server.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "common/alloc.h"

/* A control message queue this long means the agent stopped reading. */
#define WRITE_QUEUE_MAX (256u * 1024u)

struct ctl_write {
    uv_write_t req;
    uint8_t msg[];
};

/* Header and text of one message into out (room for GT_CTL_MAX_SIZE).
 * @return its size, or -EMSGSIZE. */
static int ctl_msg(uint8_t *out, uint16_t type, const char *text)
{
    size_t tlen = strlen(text);
    struct gt_ctl hdr = {.magic = GT_CTL_MAGIC, .type = type};

    if (sizeof(hdr) + tlen > GT_CTL_MAX_SIZE)
        return -EMSGSIZE;
    hdr.size = (uint16_t)(sizeof(hdr) + tlen);
    memcpy(out, &hdr, sizeof(hdr));
    memcpy(out + sizeof(hdr), text, tlen);
    return (int)hdr.size;
}

static void on_written(uv_write_t *req, int status)
{
    /* An agent that exits right after streaming never reads its welcome;
     * only unexpected failures are worth a log line. */
    if (status < 0 && status != UV_ECANCELED && status != UV_EPIPE &&
        status != UV_ECONNRESET)
        gt__log("control message to agent not sent: %s", uv_strerror(status));
    gt__free(req);
}

int gt__agent_send(struct gt__agent *a, uint16_t type, const char *text)
{
    size_t n = sizeof(struct gt_ctl) + strlen(text);
    struct ctl_write *w;
    uv_buf_t b;
    int rc;

    if (n > GT_CTL_MAX_SIZE)
        return -EMSGSIZE;
    if (a->closing || !a->hello_seen)
        return -ENOTCONN;
    if (uv_stream_get_write_queue_size((uv_stream_t *)&a->pipe) > WRITE_QUEUE_MAX)
        return -ENOBUFS;
    w = gt__malloc(sizeof(*w) + n);
    if (!w)
        return -ENOMEM;
    rc = ctl_msg(w->msg, type, text);
    b = uv_buf_init((char *)w->msg, (unsigned)rc);
    rc = uv_write(&w->req, (uv_stream_t *)&a->pipe, &b, 1, on_written);
    if (rc != 0) {
        gt__free(w);
        return rc;
    }
    return 0;
}

int gt__agent_send_now(struct gt__agent *a, uint16_t type, const char *text)
{
    uint8_t msg[GT_CTL_MAX_SIZE];
    int n = ctl_msg(msg, type, text);
    uv_os_fd_t fd;

    if (n < 0)
        return n;
    /* Queued messages go first, or not at all: never overtaken. */
    if (uv_stream_get_write_queue_size((uv_stream_t *)&a->pipe) != 0)
        return -EAGAIN;
    if (uv_fileno((uv_handle_t *)&a->pipe, &fd) != 0)
        return -EBADF;
    if (send(fd, msg, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)n)
        return -EAGAIN;
    return 0;
}
