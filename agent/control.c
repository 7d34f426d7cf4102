/*
 * What the daemon tells the agent: control messages (struct gt_ctl +
 * text, include/gradtrace/wire.h) arriving on the agent socket, read by
 * the sink's holder when the socket is readable (gt__sink_events).
 *
 * capture on/off go to the capture state (agent/capture.h), trigger specs
 * to the trigger engine (agent/trigger.h), which also keeps their text
 * for diagnostics. A message that is not well formed (bad magic, a size
 * out of bounds) means the stream cannot be trusted: gt__control_read
 * says so and the sink closes the connection, retried like any broken
 * one. Unknown types are skipped, so a newer daemon can send messages
 * this agent does not know.
 */
#include <errno.h>
#include <pthread.h>
#include <sys/socket.h>

#include "agent/control.h"

#include "agent/capture.h"
#include "agent/stream.h"
#include "agent/trigger.h"
#include "agent/undelivered.h"
#include "common/util.h"

static char triggers[GT__TRIGGERS_MAX][GT_CTL_MAX_SIZE];
static unsigned ntriggers;

unsigned gt__triggers_count(void)
{
    return ntriggers;
}

const char *gt__trigger_text(unsigned i)
{
    return i < ntriggers ? triggers[i] : NULL;
}

/* The newest job-wide trigger not yet taken by the Python side: written
 * by the streamer, taken by the job's watcher thread (gt_job_trigger_take);
 * a newer one replaces it. */
static pthread_mutex_t jobtrig_lock = PTHREAD_MUTEX_INITIALIZER;
static char jobtrig[GT_CTL_MAX_SIZE];
static size_t jobtrig_len;

static void jobtrig_put(const char *text, size_t len)
{
    if (len == 0 || len >= sizeof(jobtrig))
        return;
    pthread_mutex_lock(&jobtrig_lock);
    memcpy(jobtrig, text, len);
    jobtrig_len = len;
    pthread_mutex_unlock(&jobtrig_lock);
    GT__DIAG("job-wide trigger received: %.*s", (int)len, text);
}

int gt__jobtrig_take(char *buf, size_t cap)
{
    int n = 0;
    pthread_mutex_lock(&jobtrig_lock);
    if (jobtrig_len && jobtrig_len < cap) {
        memcpy(buf, jobtrig, jobtrig_len);
        buf[jobtrig_len] = '\0';
        n = (int)jobtrig_len;
        jobtrig_len = 0;
    } else if (jobtrig_len) {
        n = -ENOSPC;
    }
    pthread_mutex_unlock(&jobtrig_lock);
    return n;
}

/*
 * "start": capture from the next iteration boundary (agent/capture.h), so
 * that the first iteration is whole; "iterations=N" ends it after N. A
 * program with no iteration to wait for (none counted yet, no optimizer
 * announced, its forward not begun) starts at once. "ms=N" is the
 * daemon's to end (it sends GT_CTL_CAPTURE_OFF).
 */
static void capture_on(const char *text, size_t len)
{
    uint64_t n = 0, it = gt__trig_iteration();
    int now;

    if (len > 11 && memcmp(text, "iterations=", 11) == 0 &&
        gt__parse_u64n(text + 11, len - 11, 1, UINT32_MAX, &n) != 0)
        n = 0;
    now = it == 0 && !(gt__trig_pass_flags() & GT_MARK_F_STEPS) &&
          !atomic_load(&gt__trig_begun) && !gt__trig_in_backward();
    gt__capture_request(n, it, now);
}

static void ctl_handle(uint16_t type, const char *text, size_t len)
{
    switch (type) {
    case GT_CTL_WELCOME:
        GT__DIAG("daemon says welcome (%.*s)", (int)len, text);
        break;
    case GT_CTL_CAPTURE_ON:
        capture_on(text, len);
        break;
    case GT_CTL_CAPTURE_OFF:
        gt__capture_request_cancel();
        gt__capture_set(0, 1);
        break;
    case GT_CTL_TRIGGER:
        /* Armed in the trigger engine (agent/trigger.c); the text is also
         * kept for diagnostics. */
        (void)gt__trig_arm(text, len);
        if (ntriggers < GT__TRIGGERS_MAX) {
            memcpy(triggers[ntriggers], text, len);
            triggers[ntriggers][len] = '\0';
            ntriggers++;
        }
        break;
    case GT_CTL_ACK: {
        /* "chunks=N ...": N chunks of this connection are written. */
        uint64_t n;
        size_t k = 0;
        while (k < len && text[k] != ' ')
            k++;
        if (k > 7 && memcmp(text, "chunks=", 7) == 0 &&
            gt__parse_u64n(text + 7, k - 7, 0, gt__st.sent, &n) == 0 &&
            n > gt__st.acked) {
            gt__st.acked = n;
            gt__undel_acked(n);
        }
        break;
    }
    case GT_CTL_JOB_TRIGGER:
        jobtrig_put(text, len);
        break;
    case GT_CTL_TRIGGER_CLEAR:
        GT__DIAG("triggers cleared");
        gt__trig_clear();
        ntriggers = 0;
        break;
    default:
        break;
    }
}

/* Handles every whole message in gt__st.ctl. @return bytes consumed, or
 * -EBADMSG when a header is not well formed. */
static int ctl_parse(void)
{
    uint32_t off = 0;

    while (gt__st.ctl_len - off >= sizeof(struct gt_ctl)) {
        struct gt_ctl c;
        memcpy(&c, gt__st.ctl + off, sizeof(c));
        if (c.magic != GT_CTL_MAGIC || c.size < sizeof(c) ||
            c.size > GT_CTL_MAX_SIZE)
            return -EBADMSG;
        if (gt__st.ctl_len - off < c.size)
            break;
        ctl_handle(c.type, (const char *)gt__st.ctl + off + sizeof(c),
                   c.size - sizeof(c));
        off += c.size;
    }
    return (int)off;
}

void gt__control_drain(void)
{
    for (;;) {
        ssize_t n = recv(gt__st.fd, gt__st.ctl + gt__st.ctl_len,
                         sizeof(gt__st.ctl) - gt__st.ctl_len, MSG_DONTWAIT);
        int off;

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        gt__st.ctl_len += (uint32_t)n;
        off = ctl_parse();
        if (off < 0)
            return;
        memmove(gt__st.ctl, gt__st.ctl + off, gt__st.ctl_len - (uint32_t)off);
        gt__st.ctl_len -= (uint32_t)off;
    }
}

int gt__control_read(const char **why)
{
    for (;;) {
        ssize_t n = recv(gt__st.fd, gt__st.ctl + gt__st.ctl_len,
                         sizeof(gt__st.ctl) - gt__st.ctl_len, MSG_DONTWAIT);
        int off;

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (n <= 0) {
            *why = n == 0 ? "daemon closed the connection" : "read error";
            return n == 0 ? -ECONNRESET : -errno;
        }
        gt__st.ctl_len += (uint32_t)n;
        off = ctl_parse();
        if (off < 0) {
            *why = "bad control message from the daemon";
            return off;
        }
        memmove(gt__st.ctl, gt__st.ctl + off, gt__st.ctl_len - (uint32_t)off);
        gt__st.ctl_len -= (uint32_t)off;
    }
}
