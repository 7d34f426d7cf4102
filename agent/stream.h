/*
 * The streamer and its sink: state shared by streamer.c (the thread, chunk
 * building), sink.c (daemon socket or .gtr file), control.c (messages
 * from the daemon), crash.c (fatal-signal flush) and core.c (start, exit,
 * fork).
 *
 * One consumer at a time: whoever drains thread buffers or writes to the
 * sink holds `lock` (an atomic owner tid, not a mutex, so that a signal
 * handler can try it with a bounded wait and see whether it interrupted the
 * owner itself).
 *
 * When: a socket is connected at start (the daemon must be able to send
 * capture-on to a process that records nothing yet); a file is opened when
 * the process first records, so wrappers (sh -c, a launcher that execs)
 * and forked children that never record leave no file behind, and a
 * process exec'd from one does not share its file.
 *
 * A stream is one connection or one file: it starts with a hello, then
 * every string definition so far, process info and a clock pair, and each
 * thread's THREAD_INFO before its first records. Chunk sequence numbers
 * are per process and continue across reconnects, so a reader sees chunks
 * dropped while no sink was there as a gap.
 */
#ifndef GRADTRACE_AGENT_STREAM_H
#define GRADTRACE_AGENT_STREAM_H

#include <stdatomic.h>
#include <stdint.h>

#include "agent/internal.h"

enum gt__sink_kind { GT__SINK_SOCKET = 1, GT__SINK_FILE = 2 };

struct gt__stream {
    _Atomic int lock;          /* owner's tid, 0 when free */
    int kind;                  /* enum gt__sink_kind */
    int fd;                    /* -1 when there is no sink */
    int connecting;            /* socket: connect in progress */
    int ready;                 /* hello written: chunks may follow */
    int child;                 /* this process is a fork child */
    uint32_t stream_id;        /* incremented for every new stream */
    uint32_t str_emitted;      /* string log entries sent in this stream */
    int meta_due;              /* process info + clock pair owed */
    _Atomic int job_route;     /* gt_job_route: job triggers reach the job */
    _Atomic uint64_t seq;      /* next chunk number */
    _Atomic uint64_t lost_chunks; /* chunks dropped, process lifetime */
    uint64_t sent;             /* chunks written to this connection */
    uint64_t acked;            /* of them, acknowledged (GT_CTL_ACK) */
    int sndbuf;                /* socket: its send buffer, 0 unknown */
    uint64_t backoff_ns;       /* socket reconnect delay */
    uint64_t next_try_ns;      /* no sink: when to try again */
    int warned_open;           /* open failures since the last success */
    _Atomic int file_wanted;   /* file mode: a thread has recorded */
    char path[GT__PATH_MAX];    /* file: expanded path; socket: sun_path */

    /* hello, rebuilt for each process (fork) */
    uint8_t hello[GT_HELLO_MAX_SIZE];
    uint32_t hello_len;
    uint32_t pid;
    uint64_t start_mono, start_real;
    uint32_t host_id, cmd_id;  /* interned for GT_R_PROCESS_INFO */
    int32_t rank, local_rank, world_size;

    /* daemon -> agent control bytes not yet parsed */
    uint8_t ctl[GT_CTL_MAX_SIZE];
    uint32_t ctl_len;
};

extern struct gt__stream gt__st;

/* ------------------------------------------------------------ lock */

/* Bounded attempt: spins/sleeps up to wait_ms. @return 1 taken, 0 not
 * (busy, or held by this very thread). Async-signal-safe. */
int gt__stream_trylock(int wait_ms);
void gt__stream_unlock(void);

/* ------------------------------------------------------------ sink.c */

/*
 * Tries to open the sink (file: open + hello; socket: nonblocking connect,
 * hello once connected). Called by the lock holder. @return 0 when ready,
 * -EINPROGRESS while a connect is pending, or a negative errno (the caller
 * backs off).
 */
GT__WUR int gt__sink_open(void);

/* A sink should exist now: always for a socket; for a file once the
 * process has recorded. */
static inline int gt__sink_wanted(void)
{
    return gt__st.kind == GT__SINK_SOCKET || atomic_load(&gt__st.file_wanted);
}

/* Lock holder: the socket became writable/readable/hung up (poll revents). */
void gt__sink_events(short revents);

/*
 * Writes len bytes, waiting at most timeout_ms for a full socket.
 * Async-signal-safe (write/send/poll only). @return 0 or a negative errno
 * (the stream is then broken: the caller closes it).
 */
GT__WUR int gt__sink_write(const void *buf, size_t len, int timeout_ms);

/*
 * Whether len more bytes fit into the socket's send buffer, reserve bytes
 * left over, so that writing them cannot wait for the daemon; waits up to
 * wait_ms for the daemon to read. Only a socket holding unread bytes is
 * ever full: a file, an empty socket (a chunk larger than the buffer must
 * still go out) or an unknown state say yes. Lock holder.
 * @return 1 fits, 0 not.
 */
int gt__sink_room(size_t len, size_t reserve, int wait_ms);

/* Closes the sink; a socket is retried after the backoff. */
void gt__sink_close(const char *why);

/* ------------------------------------------------------------ control.c */

/*
 * Lock holder, socket readable or hung up: reads the daemon's control
 * messages and applies them (capture on/off, triggers). A connection
 * closed by the daemon, a read error or a malformed message closes the
 * sink (gt__sink_close).
 */
void gt__control_read(void);

/*
 * Lock holder, connection ending: applies the whole control messages still
 * readable (the ACKs a dead daemon sent before it went), closing nothing.
 */
void gt__control_drain(void);

/*
 * Trigger specs the daemon sent (GT_CTL_TRIGGER, canonical text), kept in
 * arrival order for diagnostics (the trigger engine arms its own copy);
 * GT_CTL_TRIGGER_CLEAR empties the list. At most GT__TRIGGERS_MAX (later
 * ones are armed but not kept here). Read them from the streamer thread
 * (or with the stream lock).
 */
#define GT__TRIGGERS_MAX 16

/*
 * The job-wide trigger (GT_CTL_JOB_TRIGGER) the daemon handed this agent,
 * if not yet taken: copied NUL-terminated into buf and forgotten.
 * @return its length, 0 when there is none, -ENOSPC when cap is too small
 * (it stays). Any thread; cold path (a mutex).
 */
int gt__jobtrig_take(char *buf, size_t cap);
unsigned gt__triggers_count(void);
const char *gt__trigger_text(unsigned i);

/* ------------------------------------------------------------ streamer.c */

/* Starts the streamer thread (signals blocked). @return 0 or -errno. */
GT__WUR int gt__streamer_start(void);

/*
 * Asks the streamer for a final flush and waits for it (bounded); without
 * a streamer, flushes inline. Then the streamer is gone.
 */
void gt__streamer_stop(void);

/*
 * The process ends without exit() (_exit, agent/exit.c): when this
 * process's streamer runs, as gt__streamer_stop (final pass, goodbye,
 * bounded wait); otherwise nothing (a fork child that never recorded
 * ends without a stream; after gt__streamer_stop nothing is left).
 */
void gt__streamer_exit_flush(void);

/* In a fork child: the parent's streamer does not exist here. */
void gt__streamer_after_fork_child(void);

/* ts of a record for the chunk header's first_ns, 0 if it has none. */
uint64_t gt__rec_ts(const uint8_t *rec, uint16_t type, uint16_t size);

/*
 * Writes GT_R_PROCESS_INFO + a host GT_R_CLOCK_SYNC (device -1) into out
 * (at least 88 bytes). Async-signal-safe. @return bytes written.
 */
uint32_t gt__meta_records(uint8_t *out);

/* A new stream began (hello written): re-send strings, infos, meta. */
void gt__stream_reset(void);

#endif
