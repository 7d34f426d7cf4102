/*
 * String interning (agent/strings.c).
 *
 * Ids are process-wide and stable (1, 2, ...); a forked child keeps them.
 * Every definition goes into an append-only list, segmented so that entries
 * never move: the streamer and a crash handler read it without the lock,
 * up to gt__strings_count() (acquire). Each stream (connection or file)
 * keeps how many list entries it has emitted; a new stream starts at 0 and
 * so re-emits the whole table before its first records.
 */
#ifndef GRADTRACE_AGENT_STRINGS_H
#define GRADTRACE_AGENT_STRINGS_H

#include <stdint.h>

/* Number of ids handed out so far; ids 1..count are readable. */
uint32_t gt__strings_count(void);

/*
 * The text of id (1..gt__strings_count()), not NUL-terminated: *len bytes.
 * Lock-free and async-signal-safe. @return 0, or -ENOENT.
 */
int gt__strings_get(uint32_t id, const char **s, uint32_t *len);

/*
 * Writes id's GT_R_STRING record (header and text) at out when it fits in
 * room bytes. Lock-free and async-signal-safe (the crash flush uses it).
 * @return the bytes written, 0 when the record does not fit, or -ENOENT.
 */
int gt__strings_record(uint32_t id, uint8_t *out, uint32_t room);

/* pthread_atfork handlers: hold the intern lock across fork. */
void gt__strings_fork_prepare(void);
void gt__strings_fork_parent(void);
void gt__strings_fork_child(void);

#endif
