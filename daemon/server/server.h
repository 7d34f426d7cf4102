/*
 * Internals of gradtraced, the collecting daemon.
 *
 * Pieces, one file each, in the order they call each other (a file
 * calls only files below it; the loop's callbacks are wired by server.c):
 *   main.c         options, log file, detaching, the loop's life
 *   server.c       libuv loop, runtime directory, sockets, the sweep
 *   dispatch.c     control connections: JSON lines in, one reply per line
 *   ingest.c       one agent connection: accept, read, queue, drain, close
 *   agent_stream.c its stream: hello, converter, raw .gtr, disk full,
 *                  acknowledgements, finish
 *   agent_status.c status of live and finished agents
 *   agent_trig.c   triggers sent to an agent and the windows it fired
 *   agent_send.c   control messages to an agent
 *   diskfull.c     streams that ended while the disk was full, finished
 *                  when space returns
 *   peer.c         peer credentials of an accepted connection
 *   workq.c        the conversion pool: agents' bytes decoded and
 *                  converted off the loop thread, one bounded ordered
 *                  queue per agent
 *   log.c          the daemon's log (stderr or a file)
 *
 * Everything here runs on the daemon's loop thread unless a doc block or
 * a field's comment says otherwise. An agent's conversion state (framer,
 * converter, the counters it updates) belongs to whichever thread holds
 * its wq.lock: a pool worker while a buffer converts, the loop while it
 * reads status, flushes, acknowledges or finishes.
 */
#ifndef GRADTRACE_DAEMON_SERVER_H
#define GRADTRACE_DAEMON_SERVER_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "common/codec.h"
#include "common/trigspec.h"
#include "common/version.h"
#include "daemon/control/control.h"
#include "daemon/convert/names.h"
#include "daemon/server/workq.h"

struct cJSON;

/* ------------------------------------------------------------- log.c */

/* Writes one timestamped line to the daemon's log. Loop thread or main. */
void gt__log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Sends later gt__log lines to fd (default 2). */
void gt__log_set_fd(int fd);


#define GT__ARMED_MAX 64        /* armed triggers kept by the daemon */
#define GT__RETIRED_MAX 20      /* retired triggers remembered for status */
#define GT__AGENTS_MAX 1024     /* live agent connections */
#define GT__DONE_MAX 4096       /* finished agents remembered for status */
#define GT__CTLS_MAX 64         /* open control connections */
#define GT__HELLO_TIMEOUT_S 10  /* a connection must say hello by then */
#define GT__DISK_RESUME_BYTES (1u << 20) /* free space that ends a pause */
#define GT__CTL_IDLE_S 30       /* default: a control connection with no
                                 * traffic this long is closed */
#define GT__CTL_QUEUE_MAX (1u << 20) /* reply bytes queued to a client that
                                      * does not read them: cut past this */
#define GT__READ_BYTES (64u * 1024u)  /* one socket read */
#define GT__AGENT_QUEUE_BYTES (4u << 20) /* an agent's unconverted bytes at
                                          * which its socket is not read */

/* Server totals that pool workers add to: atomic, read with gt__stat. */
static inline void gt__stat_add(uint64_t *p, uint64_t n)
{
    __atomic_fetch_add(p, n, __ATOMIC_RELAXED);
}

static inline uint64_t gt__stat(const uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_RELAXED);
}

struct gt__server;

/* A trigger the daemon sent to one agent (agent_trig.c). */
struct gt__agent_trig {
    uint64_t id;                /* the daemon's trigger id */
    char *spec;                 /* canonical text, as the agent got it */
    uint32_t count;
    int cleared;                /* trigger_clear came after it */
};

/* One agent connection (ingest.c) and its stream (agent_stream.c). */
struct gt__agent {
    uv_pipe_t pipe;             /* first: handle->data is unused, cast back */
    struct gt__server *srv;
    struct gt__agent *next;
    uint64_t id;                /* connection number, from 1 */
    uint32_t peer_pid;          /* from SO_PEERCRED */
    int closing;
    int hello_seen;
    int capture;                /* last capture state the daemon knows */
    int eof;                    /* socket ended; closes once converted */
    int paused;                 /* not read: its queue is full */
    uint64_t connected_ns;
    struct gt__workq_item wq;   /* its queue; wq.lock: the fields below */
    struct gt__workq_buf *rd;   /* the buffer the next read fills (loop) */
    int failed;                 /* a worker found the stream bad */
    char fail_reason[160];
    /* The stream said its rank after the hello (a worker saw it); the
     * loop renames and re-targets (rank_learnt in ingest.c). */
    int rank_news;
    int32_t rank_new;
    struct gt__framer *framer;
    struct gt__conv *conv;
    int raw_fd;                 /* -1 without --raw */
    char stem[128];
    struct gt__hello_info *hello;
    uint8_t *pre;               /* bytes fed before the hello, for --raw */
    size_t pre_len;
    uint64_t bytes;
    uint64_t records;
    int disk_full;              /* output paused on ENOSPC/EDQUOT */
    uint64_t acked;             /* chunks acknowledged (GT_CTL_ACK) */
    uint64_t last_seq;          /* seq of the last chunk converted */
    uint64_t disk_full_records; /* records not converted meanwhile */
    struct gt__agent_trig trigs[GT__ARMED_MAX];
    size_t ntrigs;
};

/* What remains of a finished agent (status, collect). */
struct gt__done {
    struct gt__done *next;
    uint32_t pid, ppid;
    int32_t rank;
    uint64_t start_mono_ns;
    char stem[128];
    char command[256];
    char reason[160];
    char **files;
    size_t nfiles;
    uint64_t bytes, records, events, lost_events, lost_chunks;
    int collected;              /* reported by a collect request */
    struct cJSON *trig;         /* gt__agent_trig_json at the end */
};

struct gt__armed {
    uint64_t id;
    struct gt__trigger t;
    char spec[1024];
    uint32_t sent;              /* agents it was sent to */
    uint32_t fired;             /* windows done by agents that ended */
};

/* A trigger no longer armed (agent_trig.c): why, and what it did. */
struct gt__retired {
    uint64_t id;
    char spec[1024];
    uint32_t sent, fired;
    int cleared;                /* trigger_clear; else its agents were done */
};

struct gt__ctlconn;
struct gt__timer;

struct gt__server {
    uv_loop_t *loop;
    uv_pipe_t agent_srv;
    uv_pipe_t ctl_srv;
    uv_signal_t sig_int;
    uv_signal_t sig_term;
    uv_timer_t sweep;           /* closes connections that never say hello */
    uv_async_t wake;            /* a pool worker has news for the loop */
    struct gt__workq *wq;       /* the conversion pool */
    char agent_path[108];
    char control_path[108];
    char out_dir[4096];
    char index_dir[4200];       /* unfinished-file index, "" when refused */
    int raw;
    uint64_t max_file_bytes;
    uint64_t start_ns;
    int lock_fd;
    int listening;
    int shutting_down;
    struct gt__agent *agents;
    unsigned nagents;
    uint64_t next_agent_id;
    struct gt__done *done;      /* newest first */
    size_t ndone;
    struct gt__armed armed[GT__ARMED_MAX];
    size_t narmed;
    struct gt__retired retired[GT__RETIRED_MAX]; /* newest last */
    size_t nretired;
    uint64_t next_trigger_id;
    struct gt__ctlconn *ctls;
    int nctls;
    uint64_t ctl_idle_ns;       /* --control-idle-s */
    uint64_t ctl_cut;           /* control clients cut (idle, not reading) */
    uint64_t repaired;          /* unfinished files repaired at start */
    uint64_t disk_full;         /* times an agent's output hit a full disk */
    struct gt__timer *timers;
    /* Stops the daemon (gt__server_shutdown, set by gt__server_init): a
     * shutdown request calls it, since the server owns the handles and
     * dispatch.c is one of them. */
    void (*shutdown)(struct gt__server *s);
    struct gt__parked *parked;  /* ended while the disk was full (diskfull.c) */
    size_t nparked;
    /* totals over every connection since start */
    /* records, chunks and disk_full are added to by pool workers:
     * gt__stat_add / gt__stat */
    uint64_t connections, refused, bytes, records, events, chunks;
    uint64_t lost_events, lost_chunks, seq_gaps, bad_streams, files;
};

struct gt__daemon_opts {
    const char *out_dir;
    int raw;
    uint64_t max_file_bytes;
    uint64_t ctl_idle_s;        /* 0: GT__CTL_IDLE_S */
    uint64_t workers;           /* 0: gt__workq_threads_for(cores) */
    uint64_t queue_kb;          /* 0: GT__AGENT_QUEUE_BYTES */
};

/* server.c */
/*
 * Checks the runtime directories, takes the daemon lock, binds both
 * sockets and starts listening on loop. Logs the reason on failure.
 * @return 0, -EADDRINUSE when another daemon runs, or another -errno.
 */
int gt__server_init(struct gt__server *s, uv_loop_t *loop,
                    const struct gt__daemon_opts *o) GT__WUR;
/* Stops accepting, finishes every agent, closes all handles (idempotent). */
void gt__server_shutdown(struct gt__server *s);
/* Removes the sockets and releases the lock after the loop has ended. */
void gt__server_cleanup(struct gt__server *s);

/* peer.c */
/* 0 when the peer of a connected unix socket is this user (its pid in
 * *pid), else -EPERM with a reason in why (cap bytes). */
int gt__peer_check(uv_pipe_t *p, uint32_t *pid, char *why, size_t cap) GT__WUR;

/* ingest.c: agent connections */
void gt__agent_on_connection(uv_stream_t *server, int status);
/* Accepts every connection waiting in the agent socket's backlog. */
void gt__agent_accept_pending(struct gt__server *s);
/* Reads what the socket already holds without blocking and waits until
 * the pool has converted it all; finishes and closes the agent on EOF or
 * error. @return 1 finished, 0 still live. */
int gt__agent_drain(struct gt__agent *a);
/* The pool has news (a stream idle, failed, or below its queue limit):
 * closes finished and failed agents, resumes reading paused ones. */
void gt__agent_wake(struct gt__server *s);
/* The pool's callback: converts one buffer of an agent (a worker). */
void gt__agent_convert(struct gt__workq_item *it, const uint8_t *data,
                       size_t len);
/* Finishes the conversion and closes the connection with a logged reason. */
void gt__agent_close(struct gt__agent *a, const char *reason);

/* agent_stream.c: an agent's stream from its hello to its finish */
/* Creates a->framer (strict), whose hello and chunk handlers are this
 * file's. @return 0 or -ENOMEM. */
int gt__agent_stream_init(struct gt__agent *a) GT__WUR;
/* Appends bytes as received to the raw .gtr (--raw; a write error stops
 * the capture, logged). Loop thread. */
void gt__agent_raw_write(struct gt__agent *a, const uint8_t *data, size_t n);
/* The stream said rank after its hello: stem, files and triggers follow
 * (takes wq.lock). Loop thread. */
void gt__agent_rank_learnt(struct gt__agent *a, int32_t rank);
/* Once a second: flushes a's files and acknowledges what they hold, or
 * retries a paused output (disk full). Takes wq.lock. */
void gt__agent_sweep(struct gt__agent *a);
/* The stream ends (failed: a bad stream, whose framer is not finished):
 * finishes the converter (or hands it to diskfull.c), sends the last ACK,
 * closes the raw file, logs and remembers a summary (gt__done_add). Loop
 * thread, wq.lock held by the caller when a has a framer. */
void gt__agent_finish(struct gt__agent *a, const char *reason, int failed);

/* agent_status.c: status of live and finished agents */
/* Status of a live agent (takes its wq.lock). */
struct cJSON *gt__agent_json(struct gt__agent *a);
/* Whether the agent's stream said its job-wide trigger route is up, so a
 * job trigger handed to it reaches its job (takes its wq.lock). */
int gt__agent_job_route(struct gt__agent *a);
/* The summary a finished agent leaves (after its hello; files, counts,
 * triggers), added to s->done and the server's totals; the oldest past
 * GT__DONE_MAX is freed. wq.lock held when a has a framer.
 * @return it, or NULL when out of memory (then not remembered). */
struct gt__done *gt__done_add(struct gt__agent *a, const char *reason);
struct cJSON *gt__done_json(const struct gt__done *d);
/* Frees a finished agent's record (NULL is ok). */
void gt__done_free(struct gt__done *d);

/* diskfull.c: streams that ended while the disk was full */
struct gt__conv;
/* Most streams held at once for a full disk (diskfull.c). */
#define GT__DISK_PARKED_MAX 64

struct gt__parked;
/* Whether the output directory has GT__DISK_RESUME_BYTES free. */
int gt__disk_space_back(const struct gt__server *s);
/*
 * Keeps conv, a stream that ended while its output was paused by a full
 * disk and that gt__conv_resume could not finish yet, until space is
 * back; then gt__disk_parked_sweep finishes it (gt__conv_finish with st
 * and truncated), gives the agent's status entry (matched by pid,
 * start_mono_ns, stem) its files, and frees it.
 * @return 0: conv is the server's now; -ENOMEM: not taken, still the
 *         caller's.
 */
int gt__disk_park(struct gt__server *s, struct gt__conv *conv,
                  const struct gt__framer_stats *st, int truncated,
                  uint32_t pid, uint64_t start_mono_ns, const char *stem) GT__WUR;
/* The sweep's part: finishes each parked stream once space is back. */
void gt__disk_parked_sweep(struct gt__server *s);
/* At shutdown: one last try each, then frees them (a stream still not
 * finished is left to the next start, its disk-full counts lost; logged). */
void gt__disk_parked_close_all(struct gt__server *s);

/* agent_send.c: control messages to an agent */
/*
 * Queues a control message (type from enum gt_ctl_type, text may be "")
 * on a's connection. Loop thread.
 * @return 0, -EMSGSIZE, -ENOTCONN (closing, or before its hello),
 *         -ENOBUFS (the agent does not read: over its queue limit),
 *         -ENOMEM or a libuv error.
 */
int gt__agent_send(struct gt__agent *a, uint16_t type, const char *text) GT__WUR;
/*
 * Sends a control message at once, without queueing: the last one before
 * the connection closes (closing it cancels queued writes), also while a
 * is closing. Loop thread.
 * @return 0 when all of it went out; -EMSGSIZE; -EAGAIN when messages are
 *         still queued (it would overtake them) or the socket took less;
 *         -EBADF without a socket.
 */
int gt__agent_send_now(struct gt__agent *a, uint16_t type, const char *text) GT__WUR;

/* agent_trig.c: triggers sent to an agent and the windows it fired */
/* Sends a the armed triggers that select it (after its hello). */
void gt__agent_send_triggers(struct gt__agent *a);
void gt__agent_trig_sent(struct gt__agent *a, const struct gt__armed *t);
void gt__agent_trig_cleared(struct gt__agent *a);
void gt__agent_trig_free(struct gt__agent *a);
/*
 * Trigger lifetime (schema/control.md, "Trigger lifetime"): a trigger the
 * daemon holds is retired once it reached agents and none of them holds
 * it any more (each has ended, finished its count of windows, or dropped
 * it for its rank), so an unrelated later job never gets it.
 * gt__armed_retire sweeps (any time: before sending to a new agent, from
 * the sweep timer); gt__agent_trig_closed is called once an agent is
 * unlinked, and sweeps. gt__armed_clear retires every trigger as cleared.
 */
void gt__armed_retire(struct gt__server *s);
void gt__agent_trig_closed(struct gt__agent *a);
void gt__armed_clear(struct gt__server *s);
/* Status: {id, spec, sent_to, state, agents, fired} of armed trigger i;
 * the retired list. NULL on ENOMEM. */
struct cJSON *gt__armed_json(const struct gt__server *s, size_t i);
struct cJSON *gt__retired_json(const struct gt__server *s);
/* The agent's rank changed (a->hello->h.rank is the new one): triggers
 * whose ranks= leave it out are no longer its (the agent dropped them),
 * armed ones that select it now are sent. */
void gt__agent_trig_rank(struct gt__agent *a);
/* {"triggers":[{id,spec,count,windows,state}], "windows":[{id,spec,layer,
 * phase,iteration,segments,state,file}]}; NULL on ENOMEM. */
struct cJSON *gt__agent_trig_json(const struct gt__agent *a);
/* Adds "triggers" and "fired" (copies of trig's lists) to dst. */
void gt__trig_json_merge(struct cJSON *dst, const struct cJSON *trig);

/* dispatch.c */
void gt__ctl_on_connection(uv_stream_t *server, int status);
/* Closes every control connection and timer (shutdown). */
void gt__ctl_close_all(struct gt__server *s);
/* Closes control connections without traffic for s->ctl_idle_ns (called
 * by the server's once-a-second sweep). */
void gt__ctl_sweep(struct gt__server *s);

#endif /* GRADTRACE_DAEMON_SERVER_H */
