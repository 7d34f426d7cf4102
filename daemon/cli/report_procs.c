/*
 * Which processes' inputs a report is of (daemon/cli/report.h).
 *
 * `gradtrace report` over every trace file of a run whose DataLoader workers (or
 * inductor's compile workers, or any child the job forks) recorded too
 * gets their files with the training process's: summed by layer path, a
 * worker's modules would pass for the model's. So inputs are grouped by
 * the process that wrote them (host and pid from the trace's metadata;
 * rotated files of one process are one). Several processes are one table
 * only when each is a rank of one job (distinct ranks). Otherwise the
 * table is of `--pid N`'s process, else of one process per rank (a rank's
 * DataLoader workers inherit its rank), or without ranks of one process:
 * the one with the most iterations (then the most files, then the parent
 * of the others, then the lowest pid). Processes of no rank beside ranked
 * ones (a launcher) are left out. The others are named in a note with how
 * to report them. Inputs that say no process (a .gtr, a foreign trace) always count.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/util.h"
#include "daemon/cli/report.h"

#define MAX_PROCS 64

struct proc {
    const struct gt__rep_in *in; /* its first input */
    size_t its, files;
};

/* What the last choice left out, for gt__report_procs_note. */
static struct proc g_out[MAX_PROCS];
static size_t g_nout, g_nout_files;
static int64_t g_kept_pid = -1; /* the one process kept, -1: several */
static size_t g_nkept;

static int same_proc(const struct gt__rep_in *a, const struct gt__rep_in *b)
{
    return a->pid == b->pid && strcmp(a->host, b->host) == 0;
}

/* @return 1 when x should be the table's process rather than y. */
static int better(const struct proc *x, const struct proc *y,
                  const struct proc *all, size_t n)
{
    if (x->its != y->its)
        return x->its > y->its;
    if (x->files != y->files)
        return x->files > y->files;
    size_t kids_x = 0, kids_y = 0;
    for (size_t i = 0; i < n; i++) {
        kids_x += all[i].in->ppid == x->in->pid;
        kids_y += all[i].in->ppid == y->in->pid;
    }
    if (kids_x != kids_y)
        return kids_x > kids_y;
    return x->in->pid < y->in->pid;
}

int gt__report_procs(const struct gt__rep_in *in, const size_t *its, int n,
                     int64_t want_pid, unsigned char *keep, const char *prog)
{
    struct proc p[MAX_PROCS];
    unsigned char kept[MAX_PROCS] = {0};
    size_t np = 0;
    int ranked = 0;

    g_nout = g_nout_files = 0;
    g_kept_pid = -1;
    for (int i = 0; i < n; i++) {
        keep[i] = 1;
        if (in[i].pid < 0)
            continue;
        size_t k = 0;
        while (k < np && !same_proc(p[k].in, &in[i]))
            k++;
        if (k == np) {
            if (np == MAX_PROCS)
                continue; /* past the cap: kept, as an unknown process */
            p[np++] = (struct proc){.in = &in[i]};
        }
        p[k].its += its ? its[i] : 0;
        p[k].files++;
        ranked |= in[i].rank >= 0;
    }
    if (want_pid >= 0) {
        for (size_t k = 0; k < np; k++)
            kept[k] = p[k].in->pid == want_pid;
    } else {
        /* Per rank the process with the most iterations (a rank's
         * DataLoader workers inherit its rank); processes of no rank only
         * when no process has one (a torchrun launcher is no rank). */
        for (size_t k = 0; k < np; k++) {
            if (ranked && p[k].in->rank < 0)
                continue;
            size_t best = k;
            for (size_t j = 0; j < np; j++)
                if (p[j].in->rank == p[k].in->rank && better(&p[j], &p[best], p, np))
                    best = j;
            kept[best] = 1;
        }
    }
    size_t nk = 0;
    for (size_t k = 0; k < np; k++)
        if (kept[k]) {
            nk++;
            g_kept_pid = p[k].in->pid;
        }
    if (want_pid >= 0 && nk == 0) {
        fprintf(stderr, "%s: --pid %" PRId64 ": no input was written by that "
                "process\n", prog, want_pid);
        return 2;
    }
    if (nk == np)
        return 0;
    if (nk > 1)
        g_kept_pid = -1; /* one per rank: the note says how many */
    g_nkept = nk;
    for (int i = 0; i < n; i++) {
        if (in[i].pid < 0)
            continue;
        for (size_t k = 0; k < np; k++)
            if (same_proc(&in[i], p[k].in))
                keep[i] = kept[k];
    }
    for (size_t k = 0; k < np; k++)
        if (!kept[k]) {
            g_out[g_nout++] = p[k];
            g_nout_files += p[k].files;
        }
    return 0;
}

void gt__report_procs_note(FILE *f)
{
    if (!g_nout)
        return;
    if (g_kept_pid >= 0)
        fprintf(f, "\nprocesses: the table is of pid %" PRId64 ";", g_kept_pid);
    else
        fprintf(f, "\nprocesses: the table is of %zu ranks' processes;", g_nkept);
    fprintf(f, " left out %zu other process%s (%zu file%s), each its own "
            "table with --pid N:\n", g_nout, g_nout == 1 ? "" : "es",
            g_nout_files, g_nout_files == 1 ? "" : "s");
    for (size_t k = 0; k < g_nout && k < 8; k++) {
        char cmd[96];
        /* The trace is untrusted: text only reaches the terminal. */
        snprintf(cmd, sizeof(cmd), "%s", g_out[k].in->cmd);
        gt__text_clean(cmd);
        fprintf(f, "  pid %-8" PRId64 " parent %-8" PRId64 " %zu iteration%s  %s\n",
                g_out[k].in->pid, g_out[k].in->ppid, g_out[k].its,
                g_out[k].its == 1 ? "" : "s", cmd);
    }
    if (g_nout > 8)
        fprintf(f, "  ... and %zu more\n", g_nout - 8);
}
