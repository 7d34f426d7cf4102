/*
 * What status says of agents: a live agent's entry (read under its
 * wq.lock, since a worker may be converting its next buffer), and the
 * summary a finished one leaves (struct gt__done: the last GT__DONE_MAX,
 * newest first, with the server's totals), which collect and shutdown
 * also read for files. Counts of the stream (events, lost events and
 * chunks, job route) are the converter's (gt__conv_summary,
 * gt__conv_job_route): the server keeps no copy of them.
 */
#include "daemon/server/server.h"

#include <cjson/cJSON.h>
#include <string.h>

#include "common/alloc.h"
#include "common/util.h"
#include "daemon/convert/convert.h"

/* Copies src into dst, cut to fit; intentional truncation for summaries. */
static void copy_cut(char *dst, size_t cap, const char *src)
{
    size_t n = strnlen(src, cap - 1);

    memcpy(dst, src, n);
    dst[n] = '\0';
}

struct gt__done *gt__done_add(struct gt__agent *a, const char *reason)
{
    struct gt__server *s = a->srv;
    const char *const *paths = NULL;
    size_t n = a->conv ? gt__conv_files(a->conv, &paths) : 0;
    struct gt__done *d = gt__calloc(1, sizeof(*d));
    struct gt__conv_summary sum = {0};

    if (!d)
        return NULL;
    if (a->conv)
        gt__conv_summary(a->conv, &sum);
    d->pid = a->hello->h.pid;
    d->ppid = a->hello->h.ppid;
    d->rank = a->hello->h.rank;
    d->start_mono_ns = a->hello->h.start_mono_ns;
    copy_cut(d->stem, sizeof(d->stem), a->stem);
    copy_cut(d->command, sizeof(d->command), a->hello->cmdline);
    copy_cut(d->reason, sizeof(d->reason), reason);
    d->bytes = a->bytes;
    d->records = a->records;
    d->events = sum.events;
    d->lost_events = sum.lost_events;
    d->lost_chunks = sum.lost_chunks + gt__framer_stats(a->framer)->chunks_lost;
    d->trig = gt__agent_trig_json(a);
    d->files = gt__calloc(n + 1, sizeof(char *));
    for (size_t i = 0; d->files && i < n; i++)
        if ((d->files[d->nfiles] = gt__strdup(paths[i])) != NULL)
            d->nfiles++;
    s->files += d->nfiles;
    s->events += d->events;
    s->lost_events += d->lost_events;
    s->lost_chunks += d->lost_chunks;
    d->next = s->done;
    s->done = d;
    if (++s->ndone > GT__DONE_MAX) {
        struct gt__done **pp = &s->done;

        while ((*pp)->next)
            pp = &(*pp)->next;
        gt__done_free(*pp);
        *pp = NULL;
        s->ndone--;
    }
    return d;
}

static cJSON *files_json(const char *const *paths, size_t n)
{
    cJSON *arr = cJSON_CreateArray();

    for (size_t i = 0; arr && i < n; i++)
        cJSON_AddItemToArray(arr, cJSON_CreateString(paths[i]));
    return arr;
}

static cJSON *agent_json_locked(const struct gt__agent *a)
{
    const struct gt__framer_stats *st = gt__framer_stats(a->framer);
    const struct gt__hello_info *h = a->hello;
    const char *const *paths = NULL;
    size_t n = gt__conv_files(a->conv, &paths);
    cJSON *o = cJSON_CreateObject();
    struct gt__conv_summary sum;

    if (!o)
        return NULL;
    gt__conv_summary(a->conv, &sum);
    cJSON_AddNumberToObject(o, "pid", h->h.pid);
    cJSON_AddNumberToObject(o, "ppid", h->h.ppid);
    cJSON_AddNumberToObject(o, "rank", h->h.rank);
    cJSON_AddNumberToObject(o, "local_rank", h->h.local_rank);
    cJSON_AddNumberToObject(o, "world_size", h->h.world_size);
    cJSON_AddStringToObject(o, "hostname", h->hostname);
    cJSON_AddStringToObject(o, "command", h->cmdline);
    cJSON_AddStringToObject(o, "stem", a->stem);
    cJSON_AddBoolToObject(o, "capture", a->capture);
    /* Operators in every capture (GRADTRACE_OPS=1); windows with ops=1
     * add them for their own span only. */
    cJSON_AddBoolToObject(o, "ops", (h->h.flags & GT_HELLO_OPS) != 0);
    cJSON_AddBoolToObject(o, "job_route", gt__conv_job_route(a->conv));
    cJSON_AddBoolToObject(o, "disk_full", a->disk_full);
    cJSON_AddNumberToObject(o, "connected_s",
                            (double)(gt__mono_ns() - a->connected_ns) / 1e9);
    cJSON_AddNumberToObject(o, "bytes", (double)a->bytes);
    cJSON_AddNumberToObject(o, "chunks", (double)st->chunks);
    cJSON_AddNumberToObject(o, "records", (double)a->records);
    cJSON_AddNumberToObject(o, "events", (double)sum.events);
    cJSON_AddNumberToObject(o, "lost_events", (double)sum.lost_events);
    cJSON_AddNumberToObject(o, "lost_cupti", (double)sum.lost_cupti);
    cJSON_AddNumberToObject(o, "lost_chunks",
                            (double)(sum.lost_chunks + st->chunks_lost));
    const struct gt__conv_window *w;
    cJSON_AddNumberToObject(o, "windows", (double)gt__conv_windows(a->conv, &w));
    cJSON_AddItemToObject(o, "files", files_json(paths, n));
    cJSON *trig = gt__agent_trig_json(a);
    gt__trig_json_merge(o, trig);
    cJSON_Delete(trig);
    return o;
}

cJSON *gt__done_json(const struct gt__done *d)
{
    cJSON *o = cJSON_CreateObject();

    if (!o)
        return NULL;
    cJSON_AddNumberToObject(o, "pid", d->pid);
    cJSON_AddNumberToObject(o, "ppid", d->ppid);
    cJSON_AddNumberToObject(o, "rank", d->rank);
    cJSON_AddStringToObject(o, "command", d->command);
    cJSON_AddStringToObject(o, "stem", d->stem);
    cJSON_AddStringToObject(o, "end", d->reason);
    cJSON_AddNumberToObject(o, "bytes", (double)d->bytes);
    cJSON_AddNumberToObject(o, "records", (double)d->records);
    cJSON_AddNumberToObject(o, "events", (double)d->events);
    cJSON_AddNumberToObject(o, "lost_events", (double)d->lost_events);
    cJSON_AddNumberToObject(o, "lost_chunks", (double)d->lost_chunks);
    cJSON_AddItemToObject(o, "files",
                          files_json((const char *const *)d->files, d->nfiles));
    gt__trig_json_merge(o, d->trig);
    return o;
}

cJSON *gt__agent_json(struct gt__agent *a)
{
    cJSON *o;

    /* Waits at most for the one buffer a worker is converting. */
    pthread_mutex_lock(&a->wq.lock);
    o = agent_json_locked(a);
    pthread_mutex_unlock(&a->wq.lock);
    return o;
}

int gt__agent_job_route(struct gt__agent *a)
{
    int up;

    pthread_mutex_lock(&a->wq.lock);
    up = a->conv && gt__conv_job_route(a->conv);
    pthread_mutex_unlock(&a->wq.lock);
    return up;
}

void gt__done_free(struct gt__done *d)
{
    if (!d)
        return;
    for (size_t i = 0; i < d->nfiles; i++)
        gt__free(d->files[i]);
    gt__free(d->files);
    cJSON_Delete(d->trig);
    gt__free(d);
}
