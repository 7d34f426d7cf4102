/*
 * The stream: the byte stream of one agent to the daemon (or into its
 * .gtr file). Its state, defined by agent/stream.c, is shared by the files
 * that write it, bottom up: stream.c (lock, hello, once-per-stream
 * records, reset), control.c (messages from the daemon), sink.c (daemon
 * socket or .gtr file), crash.c (fatal-signal flush), streamer.c (the
 * thread, chunk building) and core.c (start, exit, fork).
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
    uint32_t str_emitted;      /* string definitions sent in this stream */
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

    /* Loss counts of this stream (the streamer's; reset with it). */
    uint64_t orphan_sent;      /* process-level LOST events last sent */
    uint64_t chunks_sent;      /* GT_LOST_CHUNKS last sent */
    uint64_t orphan_base;      /* gt__lost_orphan at stream start */
    int resend_due;            /* a chunk was dropped: the next pass sends
                                * the once-per-stream records again */
};

extern struct gt__stream gt__st;

/* ------------------------------------------------------------ lock */

/* Bounded attempt: spins/sleeps up to wait_ms. @return 1 taken, 0 not
 * (busy, or held by this very thread). Async-signal-safe. */
int gt__stream_trylock(int wait_ms);
void gt__stream_unlock(void);

/* ------------------------------------------------------------ identity */

/* Reads the host name and command line once (a fork child shares them)
 * and interns them for GT_R_PROCESS_INFO. Agent start only. */
void gt__stream_identity_read(void);

/* Builds gt__st.hello for the current process: pid, ranks, host, command
 * line, and whether capture is on right now. Lock holder, or start. */
void gt__stream_hello_build(void);

/* ------------------------------------------------------------ records */

/* ts of a record for the chunk header's first_ns, 0 if it has none. */
uint64_t gt__rec_ts(const uint8_t *rec, uint16_t type, uint16_t size);

/*
 * Writes GT_R_PROCESS_INFO + a host GT_R_CLOCK_SYNC (device -1) into out
 * (at least 88 bytes). Async-signal-safe. @return bytes written.
 */
uint32_t gt__meta_records(uint8_t *out);

/* A new stream began (hello written): re-send strings, infos, meta; the
 * loss counts start again. Lock holder. */
void gt__stream_reset(void);

/* In a fork child (gt__streamer_after_fork_child): the parent's sink,
 * lock, chunk numbers and counts are not this process's. */
void gt__stream_after_fork_child(void);

#endif
