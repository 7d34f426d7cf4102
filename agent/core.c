/*
 * Agent life cycle: start (configuration applied, hello prepared, streamer
 * started), the exit flush, and fork.
 *
 * Exit: gt__agent_stop runs from our atexit handler (registered in the
 * constructor, so it runs after the application's own atexit handlers) and
 * again from the library destructor; only the first call does anything.
 * It asks the streamer for a final pass and waits a bounded time: if exit
 * was called from a signal handler that interrupted a thread holding a
 * lock the streamer needs, the process still exits.
 *
 * Fork: the intern lock is held across fork() so the child's table is
 * consistent. The child forgets the parent's buffered records, sink and
 * streamer, gets its own hello (pid, ppid) and its own file (%p or a
 * ".<pid>" suffix), and starts a streamer only when it first needs one:
 * a child that just calls exec never starts a thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "agent/core.h"

#include "agent/capture.h"
#include "agent/crash.h"
#include "agent/ring.h"
#include "agent/sink.h"
#include "agent/stream.h"
#include "agent/streamer.h"
#include "agent/strings.h"
#include "agent/trigger.h"
#include "common/paths.h"
#include "common/util.h"

static _Atomic int started;
static _Atomic int stopped;

/* The process's place in its job, from the configuration (read from the
 * environment by the constructor, or by a fork child). */
static void identity_ranks(void)
{
    const struct gt__config *config = gt__agent_config();

    gt__st.rank = config->rank;
    gt__st.local_rank = config->local_rank;
    gt__st.world_size = config->world_size;
    gt__trig_env_rank(config->rank);
}

/* A fork child: what its environment says now, else what the parent had
 * (its environment's, or what gt_set_rank told it). */
static void identity_ranks_child(void)
{
    const struct gt__config *config = gt__agent_config();

    gt__config_reread_identity();
    if (config->rank >= 0)
        gt__st.rank = config->rank;
    if (config->local_rank >= 0)
        gt__st.local_rank = config->local_rank;
    if (config->world_size >= 0)
        gt__st.world_size = config->world_size;
    gt__trig_env_rank(config->rank);
}

/*
 * A runtime that learns the rank later than the environment could say it
 * (torch.multiprocessing.spawn sets no RANK; the Python package reads it
 * from the default process group) reports it here. The stream then
 * carries it in a new GT_R_PROCESS_INFO and the converter renames the
 * process and writes it in the trace's metadata. The file stem and the
 * daemon's trigger routing (ranks=), both decided at the hello, keep
 * what the environment said.
 */
GT_API void gt_set_rank(int32_t rank, int32_t world_size)
{
    if (rank < 0 || (rank == gt__st.rank && world_size == gt__st.world_size))
        return;
    __atomic_store_n(&gt__st.rank, rank, __ATOMIC_RELAXED);
    if (world_size >= 0)
        __atomic_store_n(&gt__st.world_size, world_size, __ATOMIC_RELAXED);
    __atomic_store_n(&gt__st.meta_due, 1, __ATOMIC_RELEASE);
    gt__trig_set_rank(rank);
}

static void identity_now(void)
{
    gt__st.pid = (uint32_t)getpid();
    gt__st.start_mono = gt__mono_ns();
    gt__st.start_real = gt__real_ns();
}

static int sink_path(int child)
{
    if (gt__st.kind == GT__SINK_FILE)
        return gt__config_file_path(gt__agent_config()->file_path, (int)gt__st.pid,
                                    child, gt__st.path, sizeof(gt__st.path));
    snprintf(gt__st.path, sizeof(gt__st.path), "%s", gt__agent_config()->socket_path);
    return 0;
}

static void fork_prepare(void)
{
    gt__strings_fork_prepare();
}

static void fork_parent(void)
{
    gt__strings_fork_parent();
}

static void fork_child(void)
{
    gt__strings_fork_child();
    gt__ring_after_fork_child();
    gt__streamer_after_fork_child();
    identity_now();
    /* Alone in the new process, the child may read the environment: a
     * launcher that forks its workers may have set their ranks. */
    identity_ranks_child();
    if (sink_path(1) < 0)
        gt__st.path[0] = '\0';
    gt__stream_hello_build();
    atomic_store(&stopped, 0);
}

int gt__agent_start(const struct gt__config *c)
{
    int rc;

    if (atomic_exchange(&started, 1))
        return 0;
    gt__config_set(c);
    gt__diag_on = c->log;
    gt__ring_configure(c->block_kb, c->blocks);
    gt__timebase_init(c->tsc);
    gt__st.kind = c->file_path[0] ? GT__SINK_FILE : GT__SINK_SOCKET;
    identity_now();
    gt__stream_identity_read();
    identity_ranks();
    rc = sink_path(0);
    if (rc < 0) {
        GT__DIAG("GRADTRACE_FILE does not expand to a usable path");
        return rc;
    }
    gt__capture_init(c->capture);
    gt__stream_hello_build();
    /* Warm the CRC tables now: the crash handler must not be the first
     * caller (its one-time init is not async-signal-safe). */
    (void)gt__crc32c(0, "", 0);
    gt__crash_install();
    rc = pthread_atfork(fork_prepare, fork_parent, fork_child);
    if (rc)
        GT__DIAG("pthread_atfork failed: forked children share our state");
    /* A socket stream starts here, before the application runs: a
     * nonblocking connect (a Unix socket connect completes or fails at
     * once) plus a hello into an empty socket buffer. Nothing here waits
     * for a daemon; a pending or failed connect is the streamer's. A file
     * is opened at the first record (see agent/stream.h). */
    if (gt__sink_wanted() && gt__stream_trylock(0)) {
        rc = gt__sink_open();
        (void)rc;
        gt__stream_unlock();
    }
    rc = gt__streamer_start();
    GT__DIAG("agent started: %s %s, capture %s, %u x %u KiB per thread",
             gt__st.kind == GT__SINK_FILE ? "file" : "socket", gt__st.path,
             c->capture ? "on" : "off", c->blocks, c->block_kb);
    return rc;
}

void gt__agent_stop(void)
{
    if (!atomic_load(&started) || atomic_exchange(&stopped, 1))
        return;
    gt__capture_flush();
    gt__streamer_stop();
    if (gt__diag_on) {
        unsigned states = 0;
        for (struct gt__thread *t = atomic_load(&gt__threads); t; t = t->next)
            states++;
        GT__DIAG("stopped: %llu threads recorded using %u buffer sets, %llu chunks "
                 "lost", (unsigned long long)atomic_load(&gt__thread_registrations),
                 states, (unsigned long long)atomic_load(&gt__st.lost_chunks));
    }
}
