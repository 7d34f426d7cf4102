/*
 * Per-layer aggregation: the table `gradtrace report` prints, per module
 * path: forward calls and time, backward spans, backward time and node
 * count, all inclusive of sub-layers (a parent's span contains its
 * children's), and the iterations' count and time.
 *
 * The table is filled from layer spans named as the trace names them
 * ("<path> (<Class>) forward", "<path> (<Class>) backward"), so that both
 * ways in give the same rows: the aggregation sink (gt__agg_sink_create),
 * which gets the spans straight from the converter while it decodes a
 * recording, and a reader of trace files (cli/report.c), which parses
 * them from the JSON. Times are the trace's microseconds as doubles.
 *
 * Memory: one row per distinct layer path. Not thread-safe.
 */
#ifndef GRADTRACE_DAEMON_AGG_H
#define GRADTRACE_DAEMON_AGG_H

#include <stddef.h>
#include <stdint.h>

#include "common/codec.h"
#include "daemon/convert/sink.h"

struct gt__agg_layer {
    char *path;
    char *cls;           /* NULL until a span names its class */
    double first_fwd_ts; /* earliest forward start (us), or -1 */
    double first_ts;     /* earliest start of any span (us) */
    uint64_t fwd_calls;
    double fwd_us;
    uint64_t bwd_spans;
    double bwd_us;
    uint64_t bwd_nodes;
};

struct gt__agg {
    struct gt__agg_layer *layers; /* in order of first appearance */
    size_t n, cap;
    uint32_t *slots;     /* index by path: row + 1; rebuilt after a sort */
    size_t nslots;
    uint64_t steps;      /* iteration spans */
    double step_us;
};

enum gt__agg_order {
    GT__AGG_MODEL = 0,   /* first forward call (parents first), then by path */
    GT__AGG_FWD,         /* forward time, largest first */
    GT__AGG_BWD,         /* backward time, largest first */
    GT__AGG_NAME,        /* path */
};

/* An empty table. */
void gt__agg_init(struct gt__agg *a);
/* Frees the rows. */
void gt__agg_close(struct gt__agg *a);

/*
 * Adds one layer span: fwd 1 for layer_forward, 0 for layer_backward;
 * name as the trace's event name; ts and dur in us; nodes the backward
 * span's node count (added when > 0). A name without its phase suffix is
 * ignored. @return 0 or -ENOMEM.
 */
GT__WUR int gt__agg_span(struct gt__agg *a, int fwd, const char *name,
                         double ts, double dur, double nodes);
/* Adds one iteration span of dur us. */
void gt__agg_iteration(struct gt__agg *a, double dur);
/* Sorts the rows. */
void gt__agg_sort(struct gt__agg *a, enum gt__agg_order order);

/*
 * The aggregation sink: decodes a stream with the converter's own span
 * logic (the same layer spans, passes and capture windows as the trace
 * files would hold) and adds its layer and iteration spans to a, which
 * stays the caller's (several recordings may add to one table). No file
 * is written. @return the sink, or NULL (out of memory).
 */
struct gt__csink *gt__agg_sink_create(struct gt__agg *a);

#endif /* GRADTRACE_DAEMON_AGG_H */
