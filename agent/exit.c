/*
 * _exit and _Exit: a process that ends without exit() still flushes.
 *
 * Python's multiprocessing ends every forked worker with os._exit (so do
 * launchers and many C programs after fork): no atexit handler and no
 * destructor runs, so without this the records of the worker's last
 * tick (and any chunk not yet written) are in no trace and counted
 * nowhere. Interposed (the preloaded agent exports both names), each asks
 * the streamer for its final pass, the same bounded flush exit() gets
 * (the stream ends with a goodbye), then ends the process the way _exit
 * does, with exit_group.
 *
 * Only for this process's own streamer: in a vfork child (or any child
 * made without fork(), which shares the parent's memory or has no
 * streamer thread) gt__st.pid is not our pid, and a fork child that never
 * recorded has no streamer yet: those end at once, as before. glibc's own
 * calls (exit() after the atexit handlers, posix_spawn's child) use its
 * internal alias and never come here.
 *
 * CUPTI's buffers are not flushed here (cuptiActivityFlushAll is not safe
 * where _exit may be called: in a signal handler, in a child after fork):
 * GPU activity still inside CUPTI at _exit is lost, as at a crash.
 */
#include <sys/syscall.h>
#include <unistd.h>

#include "agent/stream.h"
#include "agent/streamer.h"

static void exit_flush(void)
{
    if (gt__st.pid == (uint32_t)syscall(SYS_getpid))
        gt__streamer_exit_flush();
}

__attribute__((visibility("default"), noreturn)) void _exit(int status)
{
    exit_flush();
    for (;;)
        syscall(SYS_exit_group, status);
}

__attribute__((visibility("default"), noreturn)) void _Exit(int status)
{
    exit_flush();
    for (;;)
        syscall(SYS_exit_group, status);
}
