/*
 * Fatal-signal flush (agent/crash.c): on SIGSEGV, SIGABRT, SIGBUS, SIGFPE
 * or SIGILL, what the threads have committed is written to the sink as
 * raw chunks, then the signal meets the action that was there before.
 */
#ifndef GRADTRACE_AGENT_CRASH_H
#define GRADTRACE_AGENT_CRASH_H

/*
 * Installs the handlers (once, at agent start, after the stream state and
 * the CRC tables are ready: the handler's first use must not initialize
 * anything). A handler the application installs later replaces ours. Not
 * async-signal-safe; call from gt__agent_start only.
 */
void gt__crash_install(void);

#endif /* GRADTRACE_AGENT_CRASH_H */
