/*
 * Per-layer aggregation: the table `gradtrace report` prints, per module
 * path: forward calls and time, recompute calls and time (activation
 * checkpointing), backward time and node count (sums over the layer's
 * nodes: its own, and inclusive of sub-layers), the backward remainder no
 * layer owns, and the iterations' count and time; per row also its
 * AccumulateGrad time, its own longest backward node, GPU kernel time per
 * phase, per-iteration statistics (agg_iter.c) and, over several ranks'
 * tables (gt__agg_merge, gt__agg_rank_summary), its slowest rank. Rows
 * form the module tree (parent from the backward spans, else by path); a
 * container never called itself (nn.ModuleList) gets its children's sums
 * (gt__agg_finish).
 *
 * The table is filled from layer spans named as the trace names them
 * ("<path> (<Class>) forward", "<path> (<Class>) backward"), so that both
 * ways in give the same rows: the aggregation consumer (gt__agg_consumer_create),
 * which gets the spans straight from the converter while it decodes a
 * recording, and a reader of trace files (cli/report.c), which parses
 * them from the JSON. Times are the trace's microseconds as doubles.
 *
 * Names are agent strings, and trace files are untrusted: every string
 * the table keeps (path, class, parent, node and kernel names) is display
 * text, valid UTF-8 without C0, DEL or C1 controls (gt__text_clean makes
 * it so on the way in), so whatever prints a row prints text.
 *
 * Memory: one row per distinct layer path, each of fixed size (no state
 * per iteration or per node). Not thread-safe.
 */
#ifndef GRADTRACE_DAEMON_AGG_H
#define GRADTRACE_DAEMON_AGG_H

#include <stddef.h>
#include <stdint.h>

#include "common/codec.h"
#include "daemon/convert/consumer.h"
#include "daemon/convert/index.h"

/* One layer's numbers for one iteration, or summed over several. */
struct gt__agg_vals {
    double fwd_calls, fwd_us, rc_calls, rc_us;
    double bwd_spans, bwd_us, self_us, accg_us, nodes, self_nodes, order2;
    double comm_us, fwd_comm_us;
};

/* One iteration span as gt__agg_step got it (us), when the table logs
 * them (gt__agg_log_iterations): the report's first pass, which chooses
 * the warm-up iterations and tells the second which iteration a span
 * belongs to as it arrives (gt__agg_plan). */
struct gt__agg_it {
    uint64_t step;
    double ts, dur;
};

/* Reservoir size for the per-iteration percentiles: exact up to this many
 * iterations, a uniform sample of them beyond (agg_iter.c). */
#define GT__AGG_RESERVOIR 64
/* Backward kernel names kept per layer (struct gt__agg_layer.bk_name). */
#define GT__AGG_TOPK 4
/* Layer spans of one layer held until their iteration ends. */
#define GT__AGG_PENDING 8

/* Per-iteration statistics of one number (fwd, bwd, recompute, all). */
struct gt__agg_stat {
    uint64_t n;          /* iterations in which the layer ran */
    double sum, sumsq;
    double res[GT__AGG_RESERVOIR];
};

enum { GT__AGG_ST_FWD, GT__AGG_ST_BWD, GT__AGG_ST_RC, GT__AGG_ST_ALL,
       GT__AGG_NST };

/* A span waiting for its iteration (agg_iter.c). */
struct gt__agg_pend {
    double ts;
    struct gt__agg_vals v;
};

/* A layer's per-iteration state: spans not yet in an iteration, the last
 * closed iteration's values (late backward spans still add to it), the
 * statistics, and the sums over the --iterations selection. */
struct gt__agg_iters {
    struct gt__agg_pend pend[GT__AGG_PENDING];
    unsigned npend;
    int held_set;
    uint64_t held_step;
    struct gt__agg_vals held;
    struct gt__agg_stat st[GT__AGG_NST];
    struct gt__agg_vals sel;   /* iterations inside the selection */
    uint64_t sel_iters;
    /* The held iteration's forward and recompute of the children, for a
     * row not called (or not recomputed) itself in it (a container). */
    double kid_fwd, kid_rc;
    int kid_set;
};

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
    double comm_us;      /* communication inside its own nodes (not in
                          * bwd_us or bwd_self_us) */
    double fwd_comm_us;  /* communication in its forward calls, inclusive
                          * like fwd_us (and not in it) */
    /* Its own longest node: the name that was a span's longest own node
     * with the largest sum of those times over the spans (top-1, so
     * bounded; a name losing to another in some spans is undercounted). */
    char *top_node;
    double top_node_us;
    /* GPU kernels tagged with the layer, by phase: its own, and (after
     * gt__agg_finish) inclusive of sub-layers. */
    uint64_t gpu_kernels;
    double gpu_self_us[2], gpu_us[2]; /* [0] forward, [1] backward */
    /* Its own backward kernels' heaviest names: space-saving top-K (a
     * name not kept replaces the lightest and inherits its sum, so a sum
     * may be overestimated by at most the lightest kept one's). */
    char *bk_name[GT__AGG_TOPK];
    double bk_us[GT__AGG_TOPK];
    uint64_t bwd_nodes, bwd_self_nodes, order2;
    /* gt__agg_finish: */
    int depth;           /* in the module tree, 0 for a root */
    int container;       /* children and no forward call of its own */
    long up;             /* parent row, -1: a root (kept by sorts) */
    struct gt__agg_iters *it; /* per-iteration state, NULL until needed */
    /* gt__agg_rank_summary, with several ranks: the rank whose fwd + rc +
     * bwd is largest, that time, and the ranks' mean. The time is each
     * rank's median per iteration (rank_median 1: robust to a warm-up
     * iteration) when every rank has per-iteration values for the row,
     * else its total. */
    int32_t slow_rank;
    int rank_median;
    double slow_us, rank_mean_us;
};

/* The backward time no layer owns, summed over pass groups. */
struct gt__agg_rest {
    uint64_t groups, nodes, un_nodes, un_accg, order2;
    double time_us, un_us;
    double comm_us;      /* communication inside nodes, every node's */
};

/* Compiled regions' attribution (their "compiled totals"), per phase:
 * us[] region time, then its operators' time in one layer, in a fused
 * common ancestor, in no module, and matched to no call. */
enum { GT__AGG_C_REGION = 0, GT__AGG_C_ONE, GT__AGG_C_FUSED,
       GT__AGG_C_UNOWNED, GT__AGG_C_UNMATCHED };
struct gt__agg_compiled {
    uint64_t regions;
    double us[5];
};

struct gt__agg {
    int ops_detail;      /* enum gt__ops_detail: the most the inputs held */
    struct gt__agg_layer *layers; /* in order of first appearance */
    size_t n, cap;
    struct gt__index ix; /* rows by path; rebuilt after a sort */
    uint64_t steps;      /* iteration spans */
    double step_us;
    /* per-iteration state (agg_iter.c) */
    struct gt__agg_stat step_st;  /* iteration durations */
    int have_it;                  /* an iteration closed */
    uint64_t it_step;             /* the last closed iteration's number */
    double it_s, it_e;            /* and its start and end (us) */
    int select;                   /* only iterations sel_lo..sel_hi */
    uint64_t sel_lo, sel_hi, sel_steps;
    double sel_step_us;
    /* Iterations left out besides (warm-up; sorted step numbers, owned),
     * and how many of this table's iterations that left out, and their
     * time (us). */
    uint64_t *skip;
    size_t nskip;
    uint64_t skipped;
    double skipped_us;
    /* The logged iterations (log_its set: every gt__agg_step appends) and
     * a first pass's iterations of the same input (plan, not owned):
     * with a selection, a backward span's longest node and a compiled
     * graph's node count only when the span's iteration is selected. */
    int log_its;
    struct gt__agg_it *its;
    size_t nits, its_cap;
    const struct gt__agg_it *plan;
    size_t nplan;
    /* Backward spans whose longest node is a compiled graph's
     * (CompiledFunctionBackward: torch.compile), and those nodes' time. */
    uint64_t compiled_spans;
    double compiled_us;
    struct gt__agg_compiled compiled[2]; /* forward, backward */
    uint64_t late;                /* spans too late for their iteration */
    uint64_t rng;                 /* reservoir sampling state */
    /* what the input says was lost (gt__agg_lost), for the hints */
    uint64_t lost_events, lost_chunks, corrupt_chunks, truncated;
    uint64_t gpu_kernels;         /* kernels with a layer, all rows */
    uint32_t nranks;              /* gt__agg_rank_summary's n */
    struct gt__agg_rest rest;
    /* The remainder's per-iteration state, so that --iterations narrows
     * it as it narrows the rows (agg_iter.c; NULL until needed). */
    struct gt__agg_iters *rest_it;
    int finished;        /* gt__agg_finish ran */
    size_t tree_n;       /* rows when gt__agg_tree last ran, +1 */
    size_t *tree_ix;     /* its order: row indexes, deepest first */
    int tree_dirty;      /* a parent was set since */
    int iter_closed;     /* gt__agg_iter_finish ran */
    int32_t rank;        /* the input's rank (hello / distributedInfo),
                          * -1 unknown; gt__agg_init sets -1 */
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
    double time_us, self_us, accg_us, comm_us;
    const char *parent;  /* NULL: none given */
    const char *top_node; /* the span's longest own node, or NULL */
    double top_node_us;
    /* A forward or recompute span whose time is time_us, not its
     * duration (a compiled region's: the sum of its layer's kernels). */
    int timed;
};

enum gt__agg_order {
    GT__AGG_MODEL = 0,   /* module tree: parents first, siblings by first
                          * forward call (a container: its first child's),
                          * rows never called and childless last */
    GT__AGG_FWD,         /* forward time, largest first */
    GT__AGG_BWD,         /* backward time, largest first */
    GT__AGG_NAME,        /* path */
};

/* Row of path, or NULL. Rows must not move meanwhile (no sort). */
const struct gt__agg_layer *gt__agg_find(struct gt__agg *a, const char *path);
/* Sets each row of all (finished) to the slowest of the n per-rank
 * tables (finished; their rows may be in any order) for that row. */
void gt__agg_rank_summary(struct gt__agg *all, struct gt__agg *ranks, size_t n);

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
/* Adds one GPU kernel name (NULL: unnamed) of dur us tagged with layer
 * path (bwd 1: in its backward). @return 0 or -ENOMEM. */
GT__WUR int gt__agg_kernel(struct gt__agg *a, const char *path, int bwd,
                           double dur, const char *name);
/* Row l's heaviest backward kernel: its index in bk_name, or -1. */
int gt__agg_top_kernel(const struct gt__agg_layer *l);
/* Adds one compiled region's totals (us as struct gt__agg_compiled's,
 * bwd: a backward graph's) ending at ts us, when its iteration counts. */
void gt__agg_compiled(struct gt__agg *a, int bwd, const double us[5],
                      double ts);
/* Adds one pass group's totals ("backward totals"). */
void gt__agg_totals(struct gt__agg *a, const struct gt__agg_rest *t);
/* The same, for the group that ended at ts us: it also joins that
 * iteration (the --iterations selection). @return 0 or -ENOMEM. */
GT__WUR int gt__agg_totals_at(struct gt__agg *a, const struct gt__agg_rest *t,
                              double ts);
/* Resolves the tree (parents, depths) and gives containers their
 * children's forward and recompute sums. Call once, after the last span. */
void gt__agg_finish(struct gt__agg *a);
/* Adds one iteration span of dur us (no start or step known). */
void gt__agg_iteration(struct gt__agg *a, double dur);
/*
 * Adds iteration span ProfilerStep#step over [ts, ts + dur] us: the layer
 * spans that started before its end and are not in an earlier iteration
 * become its values (per-iteration statistics; the --iterations
 * selection). @return 0 or -ENOMEM.
 */
GT__WUR int gt__agg_step(struct gt__agg *a, uint64_t step, double ts,
                         double dur);
/* Counts only iterations lo..hi (ProfilerStep numbers) in the rows; call
 * before the first span. */
void gt__agg_select(struct gt__agg *a, uint64_t lo, uint64_t hi);
/* Leaves iterations steps[0..n) (ProfilerStep numbers, any order; copied)
 * out of the rows as well; call before the first span. @return 0 or
 * -ENOMEM. */
GT__WUR int gt__agg_skip(struct gt__agg *a, const uint64_t *steps, size_t n);
/* Whether iteration step is counted (the selection and the skip list). */
int gt__agg_selected(const struct gt__agg *a, uint64_t step);
/* Logs every iteration span into a->its (a first pass); call before the
 * first span. */
void gt__agg_log_iterations(struct gt__agg *a);
/* The iterations a first pass logged from the same input (n of them, in
 * the order they closed; the caller keeps them alive until
 * gt__agg_iter_finish): with a selection, a span's iteration is then known
 * when it arrives. */
void gt__agg_plan(struct gt__agg *a, const struct gt__agg_it *its, size_t n);
/* Whether a span starting at ts us falls in a counted iteration: always
 * without a selection or without a plan (the whole input's, as before
 * there was a plan); never after the plan's last iteration. */
int gt__agg_ts_selected(const struct gt__agg *a, double ts);
/* Adds what an input says was lost: events dropped by the agent, chunks
 * missing or corrupt, a truncated end. */
void gt__agg_lost(struct gt__agg *a, uint64_t events, uint64_t chunks,
                  uint64_t corrupt, int truncated);
/* Statistic s: p (0..1) quantile of its per-iteration values, from the
 * reservoir. @return it, or -1 when there are none. */
double gt__agg_quantile(const struct gt__agg_stat *s, double p);
/* Its mean and standard deviation (0 with fewer than 2 values). */
double gt__agg_mean(const struct gt__agg_stat *s);
double gt__agg_stddev(const struct gt__agg_stat *s);
/* Sorts the rows. */
void gt__agg_sort(struct gt__agg *a, enum gt__agg_order order);

/* Between the agg files (agg_tree.c): the row of path (len bytes), added
 * when new. @return it, or NULL (out of memory). */
struct gt__agg_layer *gt__agg_row_get(struct gt__agg *a, const char *path,
                                      size_t len);

/* Between agg.c and agg_iter.c: span ts (us) of row l, values v, waits
 * for its iteration (@return 0 or -ENOMEM); and the last iteration's
 * values committed, the selection applied (from gt__agg_finish). */
GT__WUR int gt__agg_iter_span(struct gt__agg *a, struct gt__agg_iters **itp,
                              double ts, const struct gt__agg_vals *v);
void gt__agg_iter_finish(struct gt__agg *a);
/* Between the agg files (agg_tree.c): every row's up and depth set, and the
 * row indexes deepest first (children before parents), both redone only
 * when rows or parents changed since; the order is the table's (NULL: out
 * of memory). */
const size_t *gt__agg_tree(struct gt__agg *a);
/* Between agg.c and agg_iter.c (gt__agg_merge): row s's per-iteration
 * state into row d (@return 0 or -ENOMEM), and the iteration totals. */
GT__WUR int gt__agg_iter_merge(struct gt__agg *a, struct gt__agg_layer *d,
                               const struct gt__agg_layer *s);
void gt__agg_steps_merge(struct gt__agg *a, const struct gt__agg *s);

/*
 * Adds table s, which gt__agg_iter_finish has closed (its selection
 * applied) and gt__agg_finish has not, to table d, which holds no span of
 * its own: the tables of several inputs (ranks) as one. Sums are exact;
 * the merged quantiles come from a proportional sample of both
 * reservoirs. @return 0 or -ENOMEM.
 */
GT__WUR int gt__agg_merge(struct gt__agg *d, const struct gt__agg *s);

/*
 * The aggregation consumer: decodes a stream with the converter's own span
 * logic (the same layer spans, passes and capture windows as the trace
 * files would hold) and adds its layer and iteration spans to a, which
 * stays the caller's (several recordings may add to one table). No file
 * is written. @return the consumer, or NULL (out of memory).
 */
struct gt__consumer *gt__agg_consumer_create(struct gt__agg *a);

#endif /* GRADTRACE_DAEMON_AGG_H */
