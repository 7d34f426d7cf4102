/*
 * Per-layer aggregation: the table `gradtrace report` prints, per module
 * path: forward calls and time, recompute calls and time (activation
 * checkpointing), backward time and node count (sums over the layer's
 * nodes: its own, and inclusive of sub-layers), the backward remainder no
 * layer owns, and the iterations' count and time. Rows form the module
 * tree (parent from the backward spans, else by path); a container never
 * called itself (nn.ModuleList) gets its children's sums (gt__agg_finish).
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
    char *parent;        /* parent path from a backward span, or NULL */
    double first_fwd_ts; /* earliest forward start (us), or -1 */
    double first_ts;     /* earliest start of any span (us) */
    uint64_t fwd_calls;
    double fwd_us;       /* containers: their children's (gt__agg_finish) */
    uint64_t rc_calls;   /* recompute spans */
    double rc_us;
    uint64_t bwd_spans;
    double bwd_us;       /* node time, inclusive of sub-layers */
    double bwd_self_us;  /* node time of its own nodes */
    double bwd_wall_us;  /* sum of the spans' durations */
    double accg_us;      /* its own AccumulateGrad nodes' time */
    uint64_t bwd_nodes, bwd_self_nodes, order2;
    /* gt__agg_finish: */
    int depth;           /* in the module tree, 0 for a root */
    int container;       /* children and no forward call of its own */
    long up;             /* parent row, -1: a root (kept by sorts) */
};

/* The backward time no layer owns, summed over pass groups. */
struct gt__agg_rest {
    uint64_t groups, nodes, un_nodes, un_accg, order2;
    double time_us, un_us;
};

struct gt__agg {
    struct gt__agg_layer *layers; /* in order of first appearance */
    size_t n, cap;
    uint32_t *slots;     /* index by path: row + 1; rebuilt after a sort */
    size_t nslots;
    uint64_t steps;      /* iteration spans */
    double step_us;
    struct gt__agg_rest rest;
    int finished;        /* gt__agg_finish ran */
};

/* Phases of struct gt__agg_ev. */
enum gt__agg_phase {
    GT__AGG_PH_BWD = 0,
    GT__AGG_PH_FWD = 1,
    GT__AGG_PH_RECOMPUTE = 2,
};

/* One layer span as the trace holds it (times in us). For a backward
 * span, time_us < 0 means the trace gave no sums (an older converter):
 * its duration stands in. */
struct gt__agg_ev {
    enum gt__agg_phase phase;
    const char *name;    /* the event's name, with its phase suffix */
    double ts, dur;
    double nodes, self_nodes, order2;
    double time_us, self_us, accg_us;
    const char *parent;  /* NULL: none given */
};

enum gt__agg_order {
    GT__AGG_MODEL = 0,   /* module tree: parents first, siblings by first
                          * forward call (a container: its first child's),
                          * rows never called and childless last */
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
/* Adds one layer span of any phase. @return 0 or -ENOMEM. */
GT__WUR int gt__agg_add(struct gt__agg *a, const struct gt__agg_ev *ev);
/* Adds one pass group's totals ("backward totals"). */
void gt__agg_totals(struct gt__agg *a, const struct gt__agg_rest *t);
/* Resolves the tree (parents, depths) and gives containers their
 * children's forward and recompute sums. Call once, after the last span. */
void gt__agg_finish(struct gt__agg *a);
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
