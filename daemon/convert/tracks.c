/*
 * A writer's tracks: the processes (the training process, one per GPU)
 * and their tracks (OS threads, CUDA streams, the converter's own), each
 * declared to the writer's output (emit.h process and track ops) when it
 * is made or renamed.
 *
 * Tracks fed with complete events that are not known to nest (GPU
 * activity, CUDA API calls, computed layer spans) go through gt__place,
 * which keeps a small stack of open ends per track and sends anything
 * that would overlap without nesting to an overlap track, so no track
 * ever holds invalid nesting, whatever the output.
 */
#include <errno.h>
#include <stdio.h>

#include "common/alloc.h"
#include "daemon/convert/internal.h"

/* ------------------------------------------------------------ processes */

static uint32_t proc_new(struct gt__writer *c, uint32_t pid, uint32_t sort,
                         const char *name)
{
    struct gt__proc *np = gt__realloc(c->procs, (c->nprocs + 1) * sizeof(*np));
    if (!np)
        return UINT32_MAX;
    c->procs = np;
    struct gt__proc *p = &c->procs[c->nprocs];
    memset(p, 0, sizeof(*p));
    p->pid = pid;
    p->sort = sort;
    p->next_synth = GT__SYNTH_TID_BASE;
    gt__emit_process(c->out, c->nprocs, pid, sort, name);
    return c->nprocs++;
}

/* "python3 [rank 0] pid 1234": the command's basename, rank, pid. */
static void main_proc_name(const struct gt__writer *c, char *name, size_t cap)
{
    const char *cmd = c->s->cmdline ? c->s->cmdline : "";
    size_t n = strcspn(cmd, " ");
    const char *base = cmd;
    for (size_t i = 0; i < n; i++)
        if (cmd[i] == '/')
            base = cmd + i + 1;
    int bl = (int)(n - (size_t)(base - cmd));
    if (bl > 200)
        bl = 200;
    if (bl <= 0) {
        base = "process";
        bl = 7;
    }
    if (c->s->rank >= 0)
        snprintf(name, cap, "%.*s [rank %d] pid %u", bl, base, c->s->rank,
                 c->s->pid);
    else
        snprintf(name, cap, "%.*s pid %u", bl, base, c->s->pid);
}

uint32_t gt__main_proc(struct gt__writer *c)
{
    if (c->nprocs == 0) {
        char name[320];
        main_proc_name(c, name, sizeof(name));
        if (proc_new(c, c->s->pid, 0, name) == UINT32_MAX)
            c->err = c->err ? c->err : -ENOMEM;
    }
    return 0;
}

void gt__main_proc_rename(struct gt__writer *c)
{
    char name[320];
    if (c->nprocs == 0)
        return;
    main_proc_name(c, name, sizeof(name));
    gt__emit_process(c->out, 0, c->procs[0].pid, c->procs[0].sort, name);
}

uint32_t gt__gpu_proc(struct gt__writer *c, uint32_t device)
{
    if (device >= GT__MAX_DEVICES)
        return UINT32_MAX;
    gt__main_proc(c);
    if (!c->gpu_proc[device]) {
        char name[32];
        snprintf(name, sizeof(name), "GPU %u", device);
        uint32_t p = proc_new(c, GT__GPU_PID_BASE + device, 1000 + device,
                              name);
        if (p == UINT32_MAX)
            return UINT32_MAX;
        c->gpu_proc[device] = p + 1;
    }
    return c->gpu_proc[device] - 1;
}

/* ------------------------------------------------------------ tracks */

/* A track named name (raw, owned by the track from here on). */
static uint32_t track_new_own(struct gt__writer *c, uint32_t proc,
                              uint32_t tid, uint32_t sort, char *name)
{
    if (c->ntracks + 1 >= GT__MAX_TRACKS)
        goto out_free;
    if (c->ntracks + 1 >= c->tracks_cap) {
        uint32_t cap = c->tracks_cap ? c->tracks_cap * 2 : 64;
        struct gt__track *nt = gt__realloc(c->tracks, cap * sizeof(*nt));
        if (!nt)
            goto out_free;
        c->tracks = nt;
        c->tracks_cap = cap;
        if (c->ntracks == 0)
            c->ntracks = 1; /* index 0 means "no track" */
    }
    if (tid == UINT32_MAX)
        tid = c->procs[proc].next_synth++;
    struct gt__track *t = &c->tracks[c->ntracks];
    memset(t, 0, sizeof(*t));
    t->proc = proc;
    t->tid = tid;
    t->sort = sort;
    t->name = name;
    gt__emit_track(c->out, c->ntracks, proc, tid, sort, name);
    return c->ntracks++;

out_free:
    gt__free(name);
    return 0;
}

uint32_t gt__track_new(struct gt__writer *c, uint32_t proc, uint32_t tid,
                       uint32_t sort, const char *name)
{
    char *own = gt__strdup(name);
    return own ? track_new_own(c, proc, tid, sort, own) : 0;
}

void gt__track_rename(struct gt__writer *c, uint32_t t, const char *name)
{
    char *own = gt__strdup(name);
    if (!own || t == 0) {
        gt__free(own);
        return;
    }
    struct gt__track *tr = &c->tracks[t];
    gt__free(tr->name);
    tr->name = own;
    gt__emit_track(c->out, t, tr->proc, tr->tid, tr->sort, own);
}

/* ------------------------------------------------------------ placement */

static int lane_try(struct gt__track *t, uint64_t s, uint64_t e)
{
    if (s < t->last_start)
        return 0; /* out of start order: nesting cannot be verified */
    while (t->depth > 0 && t->ends[t->depth - 1] <= s)
        t->depth--;
    if (t->depth > 0 && e > t->ends[t->depth - 1])
        return 0;
    if (t->depth == GT__LANE_DEPTH)
        return 0;
    t->ends[t->depth++] = e;
    t->last_start = s;
    return 1;
}

/* Overlap track level lvl of track pt (named after its primary track:
 * "<name> (overlap <lvl>)"). @return it, or 0. */
static uint32_t overlap_new(struct gt__writer *c, const struct gt__track *pt,
                            uint32_t lvl)
{
    size_t cut = strlen(pt->name);
    if (lvl > 1) {
        const char *par = strstr(pt->name, " (overlap ");
        if (par)
            cut = (size_t)(par - pt->name);
    }
    char *name = gt__malloc(cut + 32);
    if (!name)
        return 0;
    snprintf(name, cut + 32, "%.*s (overlap %u)", (int)cut, pt->name, lvl);
    return track_new_own(c, pt->proc, UINT32_MAX, pt->sort + lvl, name);
}

uint32_t gt__place(struct gt__writer *c, uint32_t t, uint64_t s, uint64_t e)
{
    while (t) {
        if (lane_try(&c->tracks[t], s, e)) {
            if (c->tracks[t].level)
                c->an.overlap_moved++;
            return t;
        }
        if (!c->tracks[t].overflow) {
            uint32_t lvl = c->tracks[t].level + 1;
            if (lvl > GT__MAX_OVERFLOW)
                break;
            uint32_t nt = overlap_new(c, &c->tracks[t], lvl);
            if (!nt)
                break;
            c->tracks[nt].level = lvl;
            c->tracks[t].overflow = nt;
        }
        t = c->tracks[t].overflow;
    }
    c->an.overlap_dropped++;
    return 0;
}
