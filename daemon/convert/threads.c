/*
 * A writer's thread table: per OS thread, its tracks and open stacks.
 *
 * Threads are found by OS tid through an index (index.h). Each gets
 * its scope track at once and its synthetic tracks (backward nodes, layers
 * forward, CUDA API) on first use, labelled with the thread's name as the
 * stream knows it (stream.c); a later GT_R_THREAD_INFO that changes the
 * name relabels all of them (the metadata is re-emitted).
 */
#include <stdio.h>

#include "common/alloc.h"
#include "daemon/convert/internal.h"

/* ------------------------------------------------------------ threads */

static char *thread_label(struct gt__writer *c, const struct gt__wthread *th,
                          const char *suffix, char *buf, size_t cap)
{
    uint32_t len = 0, id = gt__cstream_tname(c->s, th->os_tid);
    const char *name = id ? gt__cstream_raw(c->s, id, &len) : NULL;
    if (name && !*suffix)
        snprintf(buf, cap, "%.*s", (int)(len > 200 ? 200 : len), name);
    else if (name)
        snprintf(buf, cap, "%.*s [%u] %s", (int)(len > 200 ? 200 : len),
                 name, th->os_tid, suffix);
    else
        snprintf(buf, cap, "thread %u%s%s", th->os_tid, *suffix ? " " : "",
                 suffix);
    return buf;
}

struct tid_key {
    const struct gt__writer *c;
    uint32_t tid;
};

static int thread_is(const void *ctx, uint32_t e)
{
    const struct tid_key *k = ctx;
    return k->c->threads[e].os_tid == k->tid;
}

/* @return the thread for an OS tid, or NULL; never creates one. */
struct gt__wthread *gt__thread_find(struct gt__writer *c, uint32_t tid)
{
    const struct tid_key k = {c, tid};
    uint32_t e = gt__index_find(&c->thread_ix, gt__tid_hash(tid), thread_is,
                                &k, NULL);
    return e == GT__INDEX_NONE ? NULL : &c->threads[e];
}

/* @return the thread for an OS tid, created on first use; NULL if full. */
struct gt__wthread *gt__thread_get(struct gt__writer *c, uint32_t tid)
{
    const struct tid_key k = {c, tid};
    uint32_t i;
    uint32_t e = gt__index_find(&c->thread_ix, gt__tid_hash(tid), thread_is,
                                &k, &i);
    if (e != GT__INDEX_NONE)
        return &c->threads[e];
    if (c->nthreads >= GT__MAX_THREADS) {
        c->an.threads_dropped++;
        return NULL;
    }
    if (c->nthreads == c->threads_cap) {
        uint32_t cap = c->threads_cap ? c->threads_cap * 2 : 16;
        struct gt__wthread *nt = gt__realloc(c->threads, cap * sizeof(*nt));
        if (!nt) {
            c->an.threads_dropped++;
            return NULL;
        }
        c->threads = nt;
        c->threads_cap = cap;
    }
    struct gt__wthread *th = &c->threads[c->nthreads];
    memset(th, 0, sizeof(*th));
    th->os_tid = tid;
    th->order = c->nthreads;
    char label[64];
    gt__main_proc(c);
    /* tid 0 and huge tids cannot be OS threads: give them synthetic ids so
     * they never collide with the converter's own tracks. */
    uint32_t out_tid = tid == 0 || tid >= GT__SYNTH_TID_BASE ? UINT32_MAX
                                                             : tid;
    th->track = gt__track_new(c, 0, out_tid, 100 + 4 * th->order,
                              thread_label(c, th, "", label, sizeof(label)));
    if (!th->track) {
        c->an.threads_dropped++;
        return NULL;
    }
    gt__index_set(&c->thread_ix, i, c->nthreads++);
    return th;
}

/* The synthetic track `which` (1 nodes, 2 layers forward, 3 CUDA API). */
uint32_t gt__thread_track(struct gt__writer *c, struct gt__wthread *th, int which)
{
    static const char *const suffix[] = {"", "backward nodes",
                                         "layers forward", "CUDA API"};
    uint32_t *slot = which == 1 ? &th->bwd_track
                     : which == 2 ? &th->fwd_track
                                  : &th->api_track;
    if (!*slot) {
        char label[300];
        uint32_t tid = th->os_tid; /* th may move: copy what we need */
        uint32_t sort = 100 + 4 * th->order + (uint32_t)which;
        thread_label(c, th, suffix[which], label, sizeof(label));
        uint32_t t = gt__track_new(c, 0, UINT32_MAX, sort, label);
        th = gt__thread_get(c, tid);
        slot = which == 1 ? &th->bwd_track
               : which == 2 ? &th->fwd_track
                            : &th->api_track;
        *slot = t;
    }
    return *slot;
}

/* Relabels every track of th after its name changed. */
static void thread_relabel(struct gt__writer *c, struct gt__wthread *th)
{
    char label[300];
    gt__track_rename(c, th->track, thread_label(c, th, "", label,
                                                 sizeof(label)));
    if (th->bwd_track)
        gt__track_rename(c, th->bwd_track,
                         thread_label(c, th, "backward nodes", label,
                                      sizeof(label)));
    if (th->fwd_track)
        gt__track_rename(c, th->fwd_track,
                         thread_label(c, th, "layers forward", label,
                                      sizeof(label)));
    if (th->api_track)
        gt__track_rename(c, th->api_track,
                         thread_label(c, th, "CUDA API", label, sizeof(label)));
}

void gt__on_thread_info(struct gt__writer *c, const uint8_t *rec,
                        uint16_t size)
{
    struct gt_r_thread_info r;
    (void)size;
    memcpy(&r, rec, sizeof(r));
    /* A named thread exists in every output, so that its sort order
     * follows the stream's, whatever this output records of it. */
    struct gt__wthread *th = gt__thread_get(c, r.tid);
    if (th && c->s->note & GT__NOTE_CHANGED)
        thread_relabel(c, th);
}

void gt__on_thread(struct gt__writer *c, const uint8_t *rec, uint16_t size)
{
    struct gt_r_thread r;
    (void)size;
    memcpy(&r, rec, sizeof(r));
    struct gt__wthread *th = gt__thread_get(c, r.tid);
    c->cur = th ? (uint32_t)(th - c->threads) + 1 : 0;
}
