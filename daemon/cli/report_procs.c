/*
 * Which processes' inputs a report is of (daemon/cli/report.h).
 *
 * `gradtrace report` over every trace file of a run whose DataLoader workers (or
 * inductor's compile workers, or any child the job forks) recorded too
 * gets their files with the training process's: summed by layer path, a
 * worker's modules would pass for the model's. So inputs are grouped by
 * the process that wrote them (host and pid from the trace's metadata;
 * rotated files of one process are one). Several processes are one table
 * only when each is a rank of one job (distinct ranks); otherwise the
 * table is of one process: `--pid N`'s, else the one with the most
 * iterations (then the most files, then the parent of the others, then
 * the lowest pid), and the others are named in a note with how to report
 * them. Inputs that say no process (a .gtr, a foreign trace) always count.
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
static int64_t g_kept_pid = -1;

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
    size_t np = 0;
    int ranks_ok = 1;

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
    }
    for (size_t a = 0; a < np; a++)
        for (size_t b = 0; b < np; b++)
            if (p[a].in->rank < 0 || (a != b && p[a].in->rank == p[b].in->rank))
                ranks_ok = 0;
    if (want_pid < 0 && (np <= 1 || ranks_ok))
        return 0;
    size_t main = np;
    for (size_t k = 0; k < np; k++)
        if (want_pid >= 0 ? p[k].in->pid == want_pid
                          : main == np || better(&p[k], &p[main], p, np))
            main = k;
    if (main == np) {
        fprintf(stderr, "%s: --pid %" PRId64 ": no input was written by that "
                "process\n", prog, want_pid);
        return 2;
    }
    g_kept_pid = p[main].in->pid;
    for (int i = 0; i < n; i++)
        if (in[i].pid >= 0 && !same_proc(&in[i], p[main].in))
            keep[i] = 0;
    for (size_t k = 0; k < np; k++)
        if (k != main) {
            g_out[g_nout++] = p[k];
            g_nout_files += p[k].files;
        }
    return 0;
}

void gt__report_procs_note(FILE *f)
{
    if (!g_nout)
        return;
    fprintf(f, "\nprocesses: the table is of pid %" PRId64 "; left out %zu "
            "other process%s (%zu file%s), each its own table with --pid N:\n",
            g_kept_pid, g_nout, g_nout == 1 ? "" : "es", g_nout_files,
            g_nout_files == 1 ? "" : "s");
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
