/*
 * Trigger specs shared by the CLI, the daemon and the agent
 * (common/trigspec.c). Syntax (schema/control.md):
 *
 *   layer=NAME[,phase=forward|backward|both][,iteration=N|next][,count=N]
 *   [,pass=K][,ops=0|1][,pids=P1,P2...][,ranks=R1,R2...]
 *
 * Fields in any order; a bare value after a list field continues the
 * list. gt__trigger_format writes the canonical text: every field, fixed
 * order, lists last.
 */
#ifndef GRADTRACE_COMMON_TRIGSPEC_H
#define GRADTRACE_COMMON_TRIGSPEC_H

#include <stddef.h>
#include <stdint.h>

#include "common/codec.h"

/* Most pids or ranks one selection may name. */
#define GT__SEL_MAX 256
/* Longest layer name or glob in a trigger. */
#define GT__LAYER_MAX 256
/* Which agents a request is for; empty lists mean all agents. */
struct gt__sel {
    uint32_t pids[GT__SEL_MAX];
    size_t npids;
    int32_t ranks[GT__SEL_MAX];
    size_t nranks;
};

enum gt__phase { GT__PHASE_FORWARD = 1, GT__PHASE_BACKWARD, GT__PHASE_BOTH };

#define GT__ITER_NEXT (-1)
#define GT__PASS_ALL (-1)
/* Largest pass= selector. */
#define GT__PASS_MAX 1000000

struct gt__trigger {
    char layer[GT__LAYER_MAX + 1];
    enum gt__phase phase;       /* default backward */
    int64_t iteration;          /* >= 0, or GT__ITER_NEXT (default) */
    uint32_t count;             /* >= 1, default 1 */
    int32_t pass;               /* backward pass within the step (from 0),
                                 * or GT__PASS_ALL (default) */
    int ops;                    /* 1: the window records aten operators
                                 * too (default 0) */
    struct gt__sel sel;
};

/* Defaults: phase backward, iteration next, count 1, every pass of the
 * step, every agent. */
void gt__trigger_defaults(struct gt__trigger *t);

/*
 * Field setters shared with the daemon's JSON form. @return 0 or -EINVAL
 * with a message naming the field in err.
 */
int gt__trigger_set_layer(struct gt__trigger *t, const char *s, size_t len,
                          char *err, size_t cap) GT__WUR;
int gt__trigger_set_phase(struct gt__trigger *t, const char *s, char *err,
                          size_t cap) GT__WUR;

/*
 * Parses the CLI spelling layer=NAME[,phase=P][,iteration=N|next]
 * [,count=N][,pass=K][,ops=1][,ranks=0,3][,pids=..] into t.
 * @return 0 or -EINVAL with a message naming the bad field.
 */
int gt__trigger_parse_spec(const char *spec, struct gt__trigger *t, char *err,
                           size_t errcap) GT__WUR;

/*
 * Writes the canonical spec text (every field, fixed order; pass only
 * when it selects one, ops only when 1) — the text agents receive in GT_CTL_TRIGGER and
 * the daemon reports.
 * @return its length, or -ENOSPC when cap is too small.
 */
int gt__trigger_format(const struct gt__trigger *t, char *out, size_t cap) GT__WUR;

const char *gt__phase_name(enum gt__phase p);

#endif
