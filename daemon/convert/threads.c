/*
 * The converter's string table and thread table.
 *
 * Strings are stored twice, raw (for layer paths and labels) and escaped
 * once for JSON, so naming an event is a memcpy. Ids index an array (the
 * agent numbers strings densely from 1), capped at GT__STR_MAX_IDS and
 * GT__STR_MAX_BYTES against hostile input. A string re-sent with the same
 * id and text (after a reconnect) costs nothing; a different text replaces
 * it and forgets its cached layer.
 *
 * Threads are found by OS tid through an open-addressing index. Each gets
 * its scope track at once and its synthetic tracks (backward nodes, layers
 * forward, CUDA API) on first use, named after the thread; a later
 * GT_R_THREAD_INFO renames all of them (the metadata is re-emitted).
 */
#include <stdio.h>

#include "common/alloc.h"
#include "daemon/convert/internal.h"

/* ------------------------------------------------------------ strings */

void gt__str_define(struct gt__conv *c, uint32_t id, const char *text,
                    size_t len)
{
    if (id == 0 || id >= GT__STR_MAX_IDS) {
        c->an.bad_string_ids++;
        return;
    }
    if (len > GT_STRING_MAX)
        len = GT_STRING_MAX;
    if (id >= c->nstrs) {
        uint32_t n = c->nstrs ? c->nstrs : 256;
        while (n <= id)
            n *= 2;
        if (n > GT__STR_MAX_IDS)
            n = GT__STR_MAX_IDS;
        struct gt__str *ns = gt__realloc(c->strs, n * sizeof(*ns));
        if (!ns) {
            c->an.strings_dropped++;
            return;
        }
        memset(ns + c->nstrs, 0, (n - c->nstrs) * sizeof(*ns));
        for (uint32_t i = c->nstrs; i < n; i++)
            ns[i].layer = -1;
        c->strs = ns;
        c->nstrs = n;
    }
    struct gt__str *s = &c->strs[id];
    if (s->raw && s->raw_len == len && memcmp(s->raw, text, len) == 0)
        return; /* re-sent after a reconnect: nothing changes */
    size_t need = len + 1 + GT__JSON_ESCAPED_MAX(len) + 1;
    if (c->str_bytes + need > GT__STR_MAX_BYTES) {
        c->an.strings_dropped++;
        return;
    }
    char *raw = gt__malloc(len + 1);
    char *esc = gt__malloc(GT__JSON_ESCAPED_MAX(len) + 1);
    if (!raw || !esc) {
        gt__free(raw);
        gt__free(esc);
        c->an.strings_dropped++;
        return;
    }
    memcpy(raw, text, len);
    raw[len] = 0;
    size_t el = gt__json_escape(esc, text, len);
    esc[el] = 0;
    /* Keep only what the escaped text needs. */
    char *fit = gt__realloc(esc, el + 1);
    if (fit)
        esc = fit;
    if (s->raw)
        c->str_bytes -= s->raw_len + 1 + s->esc_len + 1;
    gt__free(s->raw);
    gt__free(s->esc);
    s->raw = raw;
    s->esc = esc;
    s->raw_len = (uint32_t)len;
    s->esc_len = (uint32_t)el;
    s->layer = -1;
    s->cls = 0;
    c->str_bytes += len + 1 + el + 1;
}

/* ------------------------------------------------------------ threads */

static uint32_t tid_hash(uint32_t tid)
{
    return (tid * 2654435761u) >> 7;
}

static char *thread_label(struct gt__conv *c, const struct gt__thread *th,
                          const char *suffix, char *buf, size_t cap)
{
    uint32_t len = 0;
    const char *name = th->name ? gt__str_raw(c, th->name, &len) : NULL;
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

/* @return the thread for an OS tid, or NULL; never creates one. */
struct gt__thread *gt__thread_find(struct gt__conv *c, uint32_t tid)
{
    uint32_t i = tid_hash(tid) & c->thread_mask;
    for (;;) {
        uint32_t r = c->thread_slots[i];
        if (r == 0)
            return NULL;
        if (c->threads[r - 1].os_tid == tid)
            return &c->threads[r - 1];
        i = (i + 1) & c->thread_mask;
    }
}

/* @return the thread for an OS tid, created on first use; NULL if full. */
struct gt__thread *gt__thread_get(struct gt__conv *c, uint32_t tid)
{
    uint32_t i = tid_hash(tid) & c->thread_mask;
    for (;;) {
        uint32_t r = c->thread_slots[i];
        if (r == 0)
            break;
        if (c->threads[r - 1].os_tid == tid)
            return &c->threads[r - 1];
        i = (i + 1) & c->thread_mask;
    }
    if (c->nthreads >= GT__MAX_THREADS) {
        c->an.threads_dropped++;
        return NULL;
    }
    if (c->nthreads == c->threads_cap) {
        uint32_t cap = c->threads_cap ? c->threads_cap * 2 : 16;
        struct gt__thread *nt = gt__realloc(c->threads, cap * sizeof(*nt));
        if (!nt) {
            c->an.threads_dropped++;
            return NULL;
        }
        c->threads = nt;
        c->threads_cap = cap;
    }
    struct gt__thread *th = &c->threads[c->nthreads];
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
    c->thread_slots[i] = ++c->nthreads;
    return th;
}

/* The synthetic track `which` (1 nodes, 2 layers forward, 3 CUDA API). */
uint32_t gt__thread_track(struct gt__conv *c, struct gt__thread *th, int which)
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

void gt__thread_named(struct gt__conv *c, uint32_t tid, uint32_t name)
{
    struct gt__thread *th = gt__thread_get(c, tid);
    char label[300];
    if (!th || th->name == name)
        return;
    th->name = name;
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

