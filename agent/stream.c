/*
 * The stream: what one agent sends the daemon (or writes to its file),
 * and the state that every file writing it shares (agent/stream.h): the
 * lock its writers take, the hello that begins it, the records it
 * carries once per stream (process info and a clock pair), and what
 * starting a new stream resets. Below the sink (agent/sink.c), the
 * control messages (agent/control.c), the crash flush and the streamer,
 * which all write through it.
 */
#include <fcntl.h>
#include <stddef.h>
#include <time.h>
#include <unistd.h>

#include "agent/stream.h"

#include "agent/capture.h"
#include "agent/ring.h"
#include "agent/undelivered.h"

struct gt__stream gt__st = {.fd = -1};

/* Host name and command line, read once (a fork child shares them). */
static char hostname[256];
static char cmdline[GT_HELLO_MAX_SIZE];
static size_t cmdline_len;

/* ------------------------------------------------------------ lock */

int gt__stream_trylock(int wait_ms)
{
    int me = (int)gettid();

    for (int i = 0;; i++) {
        int expect = 0;
        struct timespec ms = {0, 1000000};

        if (atomic_compare_exchange_strong(&gt__st.lock, &expect, me))
            return 1;
        if (expect == me || i >= wait_ms)
            return 0;
        nanosleep(&ms, NULL);
    }
}

void gt__stream_unlock(void)
{
    atomic_store(&gt__st.lock, 0);
}

/* ------------------------------------------------------------ identity */

void gt__stream_identity_read(void)
{
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    char joined[GT_HELLO_MAX_SIZE];

    if (gethostname(hostname, sizeof(hostname) - 1) < 0)
        hostname[0] = '\0';
    cmdline_len = 0;
    if (fd >= 0) {
        ssize_t n;
        while (cmdline_len < sizeof(cmdline) &&
               (n = read(fd, cmdline + cmdline_len, sizeof(cmdline) - cmdline_len)) > 0)
            cmdline_len += (size_t)n;
        close(fd);
    }
    while (cmdline_len && cmdline[cmdline_len - 1] == '\0')
        cmdline_len--;
    for (size_t i = 0; i < cmdline_len; i++)
        joined[i] = cmdline[i] ? cmdline[i] : ' ';
    gt__st.host_id = gt__intern(hostname, strlen(hostname));
    gt__st.cmd_id = gt__intern(joined, cmdline_len);
}

void gt__stream_hello_build(void)
{
    struct gt_hello h = {
        .magic = GT_HELLO_MAGIC,
        .major = GT_WIRE_MAJOR,
        .minor = GT_WIRE_MINOR,
        .pid = gt__st.pid,
        .ppid = (uint32_t)getppid(),
        .rank = gt__st.rank,
        .local_rank = gt__st.local_rank,
        .world_size = gt__st.world_size,
        .flags = (gt__st.kind == GT__SINK_FILE ? GT_HELLO_FILE : 0) |
                 (gt__capture_on() ? GT_HELLO_CAPTURE : 0) |
                 (gt__agent_config()->ops ? GT_HELLO_OPS : 0),
        .start_mono_ns = gt__st.start_mono,
        .start_real_ns = gt__st.start_real,
    };
    ssize_t n = gt__hello_encode(&h, hostname, cmdline, cmdline_len, gt__st.hello,
                                sizeof(gt__st.hello));

    gt__st.hello_len = n > 0 ? (uint32_t)n : 0;
}

/* ------------------------------------------------------------ records */

uint64_t gt__rec_ts(const uint8_t *rec, uint16_t type, uint16_t size)
{
    size_t off;
    uint64_t ts;

    switch (type) {
    case GT_R_SCOPE_BEGIN: off = offsetof(struct gt_r_scope_begin, ts); break;
    case GT_R_SCOPE_END: off = offsetof(struct gt_r_scope_end, ts); break;
    case GT_R_NODE_CREATED: off = offsetof(struct gt_r_node_created, ts); break;
    case GT_R_BWD_NODE_BEGIN: off = offsetof(struct gt_r_bwd_node_begin, ts); break;
    case GT_R_BWD_NODE_END: off = offsetof(struct gt_r_bwd_node_end, ts); break;
    case GT_R_BWD_PASS_BEGIN:
    case GT_R_BWD_PASS_END:
    case GT_R_STEP: off = offsetof(struct gt_r_mark, ts); break;
    case GT_R_INSTANT: off = offsetof(struct gt_r_instant, ts); break;
    case GT_R_GPU_KERNEL: off = offsetof(struct gt_r_gpu_kernel, start); break;
    case GT_R_GPU_MEMCPY: off = offsetof(struct gt_r_gpu_memcpy, start); break;
    case GT_R_GPU_MEMSET: off = offsetof(struct gt_r_gpu_memset, start); break;
    case GT_R_CUDA_API: off = offsetof(struct gt_r_cuda_api, start); break;
    case GT_R_CLOCK_SYNC: off = offsetof(struct gt_r_clock_sync, mono_ns); break;
    case GT_R_WINDOW_BEGIN:
    case GT_R_WINDOW_BEGIN_SHARED:
    case GT_R_WINDOW_END: off = offsetof(struct gt_r_window, ts); break;
    case GT_R_WARNING: off = offsetof(struct gt_r_warning, ts); break;
    default: return 0;
    }
    if (off + 8 > size)
        return 0;
    memcpy(&ts, rec + off, 8);
    return ts;
}

uint32_t gt__meta_records(uint8_t *out)
{
    struct gt_r_process_info pi = {
        .h = {GT_R_PROCESS_INFO, sizeof(pi)},
        .pid = gt__st.pid,
        .ppid = (uint32_t)getppid(),
        .rank = gt__st.rank,
        .local_rank = gt__st.local_rank,
        .world_size = gt__st.world_size,
        .hostname = gt__st.host_id,
        .cmdline = gt__st.cmd_id,
        .start_mono_ns = gt__st.start_mono,
        .start_real_ns = gt__st.start_real,
    };
    struct gt_r_clock_sync cs = {.h = {GT_R_CLOCK_SYNC, sizeof(cs)}, .device = -1};
    uint64_t m0 = gt__mono_ns(), r = gt__real_ns(), m1 = gt__mono_ns();

    /* The realtime read sits between two monotonic reads: pair it with
     * their midpoint, uncertain by half the interval. */
    cs.mono_ns = m0 + (m1 - m0) / 2;
    cs.real_ns = r;
    cs.uncertainty_ns = (m1 - m0 + 1) / 2;
    memcpy(out, &pi, sizeof(pi));
    memcpy(out + sizeof(pi), &cs, sizeof(cs));
    return sizeof(pi) + sizeof(cs);
}

/* ------------------------------------------------------------ a new stream */

void gt__stream_after_fork_child(void)
{
    atomic_store(&gt__st.lock, 0);
    /* The parent's sink is a shared object: closed here, never written. */
    if (gt__st.fd >= 0)
        close(gt__st.fd);
    gt__st.fd = -1;
    gt__st.ready = 0;
    gt__st.connecting = 0;
    gt__st.ctl_len = 0;
    gt__st.next_try_ns = 0;
    gt__st.backoff_ns = 0;
    gt__st.warned_open = 0;
    atomic_store(&gt__st.file_wanted, 0);
    gt__st.child = 1;
    atomic_store(&gt__st.seq, 0);
    atomic_store(&gt__st.lost_chunks, 0);
    gt__st.sent = gt__st.acked = 0;
    gt__undel_forget();
}

/*
 * LOST counts are cumulative since the stream began (schema/wire.md):
 * drops before it are not this stream's to explain. GT_LOST_CHUNKS is the
 * exception: chunks dropped while there was no stream can only be reported
 * in the next one, so it counts over the process's life.
 */
void gt__stream_reset(void)
{
    gt__st.stream_id++;
    gt__st.str_emitted = 0;
    gt__st.meta_due = 1;
    gt__st.orphan_sent = 0;
    gt__st.chunks_sent = 0;
    gt__st.resend_due = 0;
    gt__st.orphan_base = atomic_load(&gt__lost_orphan);
    gt__undel_stream_reset();
    for (struct gt__thread *t = atomic_load(&gt__threads); t; t = t->next) {
        int status = atomic_load_explicit(&t->status, memory_order_acquire);
        if (status != GT__THR_ACTIVE && status != GT__THR_EXITED)
            continue;
        t->lost_stream = gt__st.stream_id;
        t->lost_sent = 0;
        t->lost_base = atomic_load_explicit(&t->lost, memory_order_relaxed);
    }
}
