/*
 * What `gradtrace report` and `gradtrace diff` share inside the CLI: how
 * the inputs become one table (report.c), the table's outputs
 * (report_out.c: text, CSV, JSON; report_svg.c: the bar chart), the
 * hints drawn from it (hints.c), and the rows shown and their sums that
 * all of these read (report_rows.c, below them all). Everything reads a
 * finished, sorted struct gt__agg and writes to a FILE; nothing here
 * keeps state.
 */
#ifndef GRADTRACE_DAEMON_CLI_REPORT_H
#define GRADTRACE_DAEMON_CLI_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include "daemon/convert/agg.h"

enum gt__rep_format { GT__REP_TABLE = 0, GT__REP_CSV, GT__REP_JSON };

struct gt__rep_opts {
    enum gt__rep_format format;
    int order;           /* enum gt__agg_order */
    int depth;           /* rows deeper than this are not shown; -1: all */
    long top;            /* at most this many rows; -1: all */
    const char *svg;     /* write the bar chart here, or NULL */
    int select;          /* --iterations A-B */
    uint64_t lo, hi;
    int warmup;          /* leave warm-up and outlier iterations out
                          * (report_warm.c); off with --iterations */
    int totals;          /* --totals: the table's ms are sums, not per
                          * iteration */
    int no_hints;
    int by_rank;         /* a table per rank, then the whole */
    int has_pid;         /* --pid: the table is of that process */
    int64_t pid;
};

/* What gt__report_warmup left out: how many iterations, their time (us),
 * and the median iteration of all (us). */
struct gt__rep_warm {
    size_t n;
    double us, median_us;
};
/*
 * The warm-up and outlier iterations among n durations (us, in time
 * order) by the rule in report_warm.c and schema/report.md: out[i] set to
 * 1 for those left out, else 0; w says how many and their time.
 * @return 0 or -ENOMEM.
 */
int gt__report_warmup(const double *dur, size_t n, unsigned char *out,
                      struct gt__rep_warm *w) GT__WUR;

/* The inputs' tables by rank (inputs without a rank are in none). */
#define GT__MAX_RANKS 64
struct gt__rep_ranks {
    size_t n;
    struct gt__agg a[GT__MAX_RANKS];
};
void gt__report_ranks_close(struct gt__rep_ranks *rk);

/*
 * Reads the inputs (trace files and .gtr recordings, n paths) into r,
 * which the caller initialised, applying o's iteration selection, then
 * finishes and sorts it by o->order. Each input is read into its own
 * table first and added to r and, when rk is not NULL and the input has
 * a rank, to that rank's table in rk (zeroed by the caller; close it with
 * gt__report_ranks_close); with several ranks each row of r gets its
 * slowest rank. prog names the command in messages. With a selection or
 * o->warmup the inputs are read twice: first for their iterations (which
 * the selection must meet; which are warm-up), then into the table.
 * @return 0, 1 (unreadable input or no layer spans) or 2 (--iterations
 * names none of the input's iterations); message printed.
 */
/* What an input's metadata says (report_in.c): lost counts (the largest
 * over its files), its rank, and the process that wrote it (pid -1: not
 * said, as in a .gtr or a foreign trace). */
struct gt__rep_in {
    uint64_t events, chunks, corrupt;
    int truncated;
    int32_t rank;        /* distributedInfo's or the agent's, -1 none */
    int64_t pid, ppid;
    char host[64], cmd[96];
};

/* The command reading the inputs (report, diff), for its messages. */
void gt__report_in_prog(const char *prog);
/* Reads path (a trace or a .gtr) into t (initialised by the caller,
 * selection and plan set); in gets its metadata. @return 0 or a negative
 * errno (message printed). */
int gt__report_read_input(struct gt__agg *t, const char *path,
                          struct gt__rep_in *in);

/*
 * Which of n inputs (in: their metadata; its: their iteration counts, or
 * NULL) the table is of (report_procs.c): keep[i] = 1 for those kept. All
 * when they are one process or ranks of one job; else want_pid's (< 0:
 * the process with the most iterations). @return 0, or 2 when want_pid
 * wrote none (message printed, prog first).
 */
int gt__report_procs(const struct gt__rep_in *in, const size_t *its, int n,
                     int64_t want_pid, unsigned char *keep, const char *prog);
/* After a table: the processes the last gt__report_procs left out. */
void gt__report_procs_note(FILE *f);

int gt__report_load(struct gt__agg *r, const struct gt__rep_opts *o,
                    int n, char **paths, const char *prog,
                    struct gt__rep_ranks *rk);

/* report_rows.c. Whether row l is shown under o (depth); the --top cut
 * is the caller's. */
int gt__report_shown(const struct gt__agg_layer *l, const struct gt__rep_opts *o);

/* The sums the total line shows: the top-level rows plus the remainder. */
struct gt__rep_totals {
    double fwd_us, rc_us, bwd_us, accg_us;
    double comm_us;      /* communication inside backward nodes, all of it
                          * (rows' and unattributed nodes'); not in bwd_us */
    double comm_un_us;   /* of that, in nodes of no layer */
    double fwd_comm_us;  /* communication in the top-level rows' forwards
                          * (not in fwd_us) */
    uint64_t nodes;
    double step_us;      /* the iterations' time, 0 without iterations */
    double rest_us;      /* step time outside layer spans (may be < 0) */
};
struct gt__rep_totals gt__report_totals(const struct gt__agg *r);
/* Row l's share of the step (fwd + recompute + bwd over the iterations'
 * time), or -1 without iterations. */
double gt__report_share(const struct gt__agg *r, const struct gt__agg_layer *l);

/* hints.c. One hint: its kind (a short identifier), the layer it names ("" for the
 * whole input) and its evidence as one sentence. */
struct gt__hint {
    const char *kind;
    const char *layer;
    char text[320];
};
#define GT__MAX_HINTS 16
/* The hints the table supports, strongest evidence first. @return their
 * number (at most cap). */
size_t gt__hints_find(const struct gt__agg *r, struct gt__hint *h, size_t cap);

/* report_out.c, report_svg.c: the outputs. */
void gt__report_print_table(FILE *f, const struct gt__agg *r,
                            const struct gt__rep_opts *o);
void gt__report_print_csv(FILE *f, const struct gt__agg *r,
                          const struct gt__rep_opts *o);
/* @return 0 or -ENOMEM. */
int gt__report_print_json(FILE *f, const struct gt__agg *r,
                          const struct gt__rep_opts *o) GT__WUR;
/* Writes the bar chart as a self-contained SVG file. @return 0 or a
 * negative errno. */
int gt__report_write_svg(const char *path, const struct gt__agg *r,
                         const struct gt__rep_opts *o) GT__WUR;

/* `gradtrace diff`'s rule (diff.c): thresholds in percent, standard
 * errors and ms. */
struct gt__diff_rule {
    double thr, sigma, min_ms, fail;
};
/*
 * The verdict on a row whose own change is own ms per iteration, base ms
 * its base time, se the standard error of the difference of the runs'
 * per-iteration means (< 0: unknown, that test skipped) and step the base
 * iteration's ms. @return 1 slower, -1 faster, 0 within noise.
 */
int gt__diff_verdict(const struct gt__diff_rule *o, double own, double base,
                     double se, double step);

/* report_clock.c: a merged trace's clock alignment ("merge":{...} line
 * of its metadata), kept while reading and printed after the table. */
void gt__report_note_merge(const char *line);
void gt__report_print_clock(FILE *f);
void gt__report_clock_close(void);

/* A trace's "compiled totals" instant (args, at ts us) into r
 * (report_rows.c). @return 0. */
struct cJSON;
int gt__report_compiled_totals(struct gt__agg *r, const struct cJSON *args,
                               double ts);

#endif /* GRADTRACE_DAEMON_CLI_REPORT_H */
