/*
 * Records the daemon may not have: per thread, how many records went out
 * in chunks the daemon never acknowledged (GT_CTL_ACK), or were dropped
 * without a sink. Reported in every stream as GT_R_LOST records with the
 * thread's tid and what = GT_LOST_UNDELIVERED, cumulative over the
 * process's life (schema/wire.md), so that per thread
 *   records in the trace + GT_LOST_EVENTS + GT_LOST_UNDELIVERED = recorded.
 *
 * Bounded: GT__UNDEL_SLOTS chunks awaiting an ACK (past that, the newest
 * chunks share the last slot: a partly acknowledged slot counts all of its
 * records as undelivered, erring on "lost"); GT__UNDEL_PAIRS threads per
 * chunk and GT__UNDEL_TIDS threads in all (past those, records are counted
 * under tid 0, the process, still counted, no longer attributed).
 *
 * Only the stream lock holder calls these (streamer, crash flush).
 */
#ifndef GRADTRACE_AGENT_UNDELIVERED_H
#define GRADTRACE_AGENT_UNDELIVERED_H

#include <stdint.h>

#define GT__UNDEL_SLOTS 256u
#define GT__UNDEL_PAIRS 32u
#define GT__UNDEL_TIDS 1024u

/* n records of thread tid went into the chunk being built. */
void gt__undel_add(uint32_t tid, uint32_t n);

/* The chunk being built was written to the connection; it is chunk
 * number `sent` (1-based) of that connection. */
void gt__undel_chunk_sent(uint64_t sent);

/* The chunk being built was not written (no sink, encode or write error):
 * its records are undelivered. */
void gt__undel_chunk_lost(void);

/* n records of tid were discarded without a sink. */
void gt__undel_discarded(uint32_t tid, uint64_t n);

/* The daemon acknowledged the first `acked` chunks of the connection. */
void gt__undel_acked(uint64_t acked);

/* The connection ended: every chunk not acknowledged is undelivered. */
void gt__undel_connection_lost(void);

/* A new stream began: every count is owed to it again. */
void gt__undel_stream_reset(void);

/* Calls emit(tid, count) for every count the stream has not seen yet. */
void gt__undel_emit(void (*emit)(uint32_t tid, uint64_t count));

/* Fork child: the parent's counts are not ours. */
void gt__undel_forget(void);

#endif
