/*
 * The daemon's JSON-lines control protocol (schema/control.md): request
 * parsing and trigger objects. Pure (cJSON only), shared by the server
 * (which answers requests) and the CLI (which builds them), and linked
 * alone by the unit tests and the control fuzzer.
 */
#ifndef GRADTRACE_DAEMON_CONTROL_H
#define GRADTRACE_DAEMON_CONTROL_H

#include <stddef.h>
#include <stdint.h>

#include "common/codec.h"
#include "common/trigspec.h"

/* Largest control request line (bytes, newline excluded). */
#define GT__CTL_REQ_MAX (64u * 1024u)

struct cJSON;

enum gt__cmd {
    GT__CMD_STATUS = 1,
    GT__CMD_START,
    GT__CMD_STOP,
    GT__CMD_TRIGGER,
    GT__CMD_TRIGGER_CLEAR,
    GT__CMD_COLLECT,
    GT__CMD_SHUTDOWN,
    GT__CMD_JOB_TRIGGER,        /* a trigger for every rank of the job */
};

struct gt__req {
    enum gt__cmd cmd;
    struct gt__sel sel;         /* start, stop */
    uint64_t duration_ms;       /* start: 0 = until stop */
    uint64_t iterations;        /* start: 0 = until stop */
    struct gt__trigger trig;    /* trigger */
    uint32_t pid;               /* collect: root of the process tree */
    uint64_t since_ns;          /* collect: agents started at or after this
                                   CLOCK_MONOTONIC time */
};

/*
 * Parses one control request line (JSON object with a "cmd" string).
 * Unknown members are errors, so typos never pass silently.
 * @return 0, or -EINVAL / -EMSGSIZE / -ENOMEM with a one-line message in
 *         err (always NUL-terminated).
 */
int gt__req_parse(const char *line, size_t len, struct gt__req *req, char *err,
                  size_t errcap) GT__WUR;

/*
 * Validates a trigger given as a JSON object (the members of a "trigger"
 * request besides "cmd"): layer, phase, iteration, count, pids, ranks.
 * @return 0 or -EINVAL with a message naming the bad field.
 */
int gt__trigger_from_json(const struct cJSON *obj, struct gt__trigger *t,
                          char *err, size_t errcap) GT__WUR;

/*
 * Every string in the tree (values and member names) made valid UTF-8
 * without control characters, in place (gt__text_clean): the daemon's
 * replies and what the CLI prints never carry raw agent bytes.
 */
void gt__json_clean_strings(struct cJSON *o);

/* The trigger as request members (caller frees); NULL on ENOMEM. */
struct cJSON *gt__trigger_to_json(const struct gt__trigger *t);

/* @return 1 when (pid, rank) is selected by s (empty lists select all). */
int gt__sel_match(const struct gt__sel *s, uint32_t pid, int32_t rank);
/* As gt__sel_match, but an agent whose rank is unknown (-1) matches any
 * ranks list: it may learn a rank later (torch.multiprocessing.spawn), and
 * the agent keeps such a trigger until it does. */
int gt__sel_match_later(const struct gt__sel *s, uint32_t pid, int32_t rank);

#endif /* GRADTRACE_DAEMON_CONTROL_H */
