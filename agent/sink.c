/*
 * Where chunks go: the daemon's agent socket or a .gtr file.
 *
 * Socket: nonblocking connect (a Unix socket connect completes at once or
 * fails at once unless the daemon's backlog is full), so the constructor
 * and the application never wait for a daemon; a failed or broken
 * connection is retried with exponential backoff, 50 ms doubling to 2 s.
 * Sends use MSG_NOSIGNAL: a daemon that goes away must not SIGPIPE the
 * training job. The daemon's control messages arrive on the same socket;
 * agent/control.c reads and applies them (capture on/off, triggers).
 *
 * Socket: nothing is sent before the socket's directory (ours, 0700, not
 * a symlink) and the listener's uid (SO_PEERCRED: ours) are checked, so
 * another user who made the directory first never gets the stream.
 *
 * File: opened (truncated, 0600: it holds the command line) on the first
 * attempt; the hello is written once at its start.
 *
 * A daemon that does not read (SIGSTOPped, or its queue for us is full)
 * is no reason to close: the streamer asks gt__sink_room before each
 * chunk and drops (and counts) what does not fit within the wait (as long
 * as a write used to wait before it gave the connection up), so that every chunk
 * it wrote stays on the connection, to be read and acknowledged once the
 * daemon goes on. Closing would count the unacknowledged chunks as lost
 * while the daemon, reading what the socket still holds, converts them
 * too. The last RESERVE bytes of the buffer are kept for the final
 * chunk, the one that carries the loss counts and the goodbye.
 *
 * Everything on the write path is plain syscalls so the crash handler can
 * use it.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "agent/sink.h"

#include "agent/control.h"
#include "agent/stream.h"
#include "agent/undelivered.h"
#include "common/paths.h"
#include "common/util.h"

#define BACKOFF_MIN_NS 50000000ull
#define BACKOFF_MAX_NS 2000000000ull

int gt__sink_write(const void *buf, size_t len, int timeout_ms)
{
    return gt__write_all(gt__st.fd, buf, len,
                         gt__st.kind == GT__SINK_SOCKET ? GT__WRITE_SOCKET : 0,
                         timeout_ms);
}

/* What a write of n bytes costs in the send buffer beyond n (socket
 * buffer accounting per skb), overestimated. */
#define SKB_SLACK(n) ((n) / 16 + 4096)

static int sink_fits(size_t len, size_t reserve)
{
    int queued = 0;

    if (gt__st.kind != GT__SINK_SOCKET || gt__st.fd < 0 || gt__st.sndbuf <= 0)
        return 1;
    if (ioctl(gt__st.fd, SIOCOUTQ, &queued) < 0 || queued <= 0)
        return 1;
    return (uint64_t)queued + len + SKB_SLACK(len) + reserve <=
           (uint64_t)gt__st.sndbuf;
}

int gt__sink_room(size_t len, size_t reserve, int wait_ms)
{
    struct timespec step = {0, 5000000};

    /* The daemon reads what a Unix socket holds in one go: polling the
     * queue is enough, and POLLOUT would not say whether len fits. */
    for (int waited = 0;; waited += 5) {
        if (sink_fits(len, reserve))
            return 1;
        if (waited >= wait_ms)
            return 0;
        nanosleep(&step, NULL);
    }
}

/* No sink for now: the next attempt after the current backoff, which
 * doubles up to BACKOFF_MAX_NS (a successful stream resets it). */
static void schedule_retry(void)
{
    if (gt__st.backoff_ns < BACKOFF_MIN_NS)
        gt__st.backoff_ns = BACKOFF_MIN_NS;
    gt__st.next_try_ns = gt__mono_ns() + gt__st.backoff_ns;
    gt__st.backoff_ns = gt__st.backoff_ns * 2 > BACKOFF_MAX_NS
                            ? BACKOFF_MAX_NS
                            : gt__st.backoff_ns * 2;
}

void gt__sink_close(const char *why)
{
    /* ACKs the daemon sent before it went stay readable after its end:
     * take them, so that only chunks it never wrote count as lost. */
    if (gt__st.fd >= 0 && gt__st.ready && gt__st.kind == GT__SINK_SOCKET)
        gt__control_drain();
    if (gt__st.fd >= 0) {
        GT__DIAG("stream %u closed: %s", gt__st.stream_id, why);
        close(gt__st.fd);
    }
    /* Chunks the daemon never said it wrote (it died, or the connection
     * broke) may be nowhere: counted as lost, reported in the next
     * stream's GT_LOST_CHUNKS. */
    if (gt__st.sent > gt__st.acked) {
        GT__DIAG("%llu chunks sent but not acknowledged: counted as lost",
                 (unsigned long long)(gt__st.sent - gt__st.acked));
        atomic_fetch_add(&gt__st.lost_chunks, gt__st.sent - gt__st.acked);
    }
    /* ...and, per thread, the records they held (GT_LOST_UNDELIVERED). */
    gt__undel_acked(gt__st.acked);
    gt__undel_connection_lost();
    gt__st.sent = gt__st.acked = 0;
    gt__st.fd = -1;
    gt__st.ready = 0;
    gt__st.connecting = 0;
    gt__st.ctl_len = 0;
    schedule_retry();
}

/*
 * A socket is connected: before the hello (which carries the command
 * line) goes out, the peer must run as this user. The directory was
 * checked before connecting; this catches a listener that another user
 * set up in it anyway, or reached through a path we do not control.
 */
static int sink_peer_ok(void)
{
    char why[256];
    int rc;

    if (gt__st.kind != GT__SINK_SOCKET)
        return 0;
    rc = gt__peer_uid_check(gt__st.fd, why, sizeof(why));
    if (rc < 0) {
        if (!gt__st.warned_open++)
            GT__DIAG("not streaming to %s: %s", gt__st.path, why);
        gt__sink_close("peer is not this user");
    }
    return rc;
}

/* The stream exists: hello first, then the streamer re-sends the rest. */
static int sink_start_stream(void)
{
    socklen_t sl = sizeof(gt__st.sndbuf);
    int rc;

    if ((rc = sink_peer_ok()) < 0)
        return rc;
    if (gt__st.kind != GT__SINK_SOCKET ||
        getsockopt(gt__st.fd, SOL_SOCKET, SO_SNDBUF, &gt__st.sndbuf, &sl) < 0)
        gt__st.sndbuf = 0;

    /* Rebuilt per stream: GT_HELLO_CAPTURE says what holds now. */
    gt__stream_hello_build();
    rc = gt__sink_write(gt__st.hello, gt__st.hello_len, 1000);

    if (rc < 0) {
        gt__sink_close("hello not written");
        return rc;
    }
    gt__st.ready = 1;
    gt__st.connecting = 0;
    gt__st.backoff_ns = BACKOFF_MIN_NS;
    gt__st.warned_open = 0;
    gt__stream_reset();
    GT__DIAG("stream %u open: %s", gt__st.stream_id, gt__st.path);
    return 0;
}

static int open_file(void)
{
    int fd = open(gt__st.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

    if (fd < 0) {
        int err = -errno;
        if (!gt__st.warned_open++)
            GT__DIAG("cannot open %s: %s", gt__st.path, strerror(-err));
        schedule_retry();
        return err;
    }
    gt__st.fd = fd;
    return sink_start_stream();
}

static int open_socket(void)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    char why[256];
    int fd, err;

    if (!gt__st.path[0])
        return -ENOENT;
    /* Another user may have made the directory (the default one is in
     * /tmp) and listen in it: never connect there. */
    if ((err = gt__socket_dir_check(gt__st.path, why, sizeof(why))) < 0) {
        if (!gt__st.warned_open++)
            GT__DIAG("not streaming to %s: %s", gt__st.path, why);
        schedule_retry();
        return err;
    }
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    memcpy(sa.sun_path, gt__st.path, strnlen(gt__st.path, sizeof(sa.sun_path) - 1));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
        gt__st.fd = fd;
        return sink_start_stream();
    }
    err = -errno;
    if (err == -EINPROGRESS || err == -EAGAIN) {
        gt__st.fd = fd;
        gt__st.connecting = 1;
        return -EINPROGRESS;
    }
    close(fd);
    if (!gt__st.warned_open++)
        GT__DIAG("no daemon at %s (%s); retrying in the background", gt__st.path,
                 strerror(-err));
    schedule_retry();
    return err;
}

int gt__sink_open(void)
{
    if (gt__st.ready)
        return 0;
    if (gt__st.connecting)
        return -EINPROGRESS;
    return gt__st.kind == GT__SINK_FILE ? open_file() : open_socket();
}

void gt__sink_events(short revents)
{
    if (gt__st.fd < 0 || gt__st.kind != GT__SINK_SOCKET)
        return;
    if (gt__st.connecting) {
        int err = 0;
        socklen_t l = sizeof(err);
        if (!(revents & (POLLOUT | POLLERR | POLLHUP)))
            return;
        if (getsockopt(gt__st.fd, SOL_SOCKET, SO_ERROR, &err, &l) < 0 || err) {
            gt__sink_close("connect failed");
            return;
        }
        (void)sink_start_stream();
        return;
    }
    if (revents & (POLLIN | POLLHUP | POLLERR)) {
        const char *why = NULL;

        if (gt__control_read(&why) < 0)
            gt__sink_close(why);
    }
}
