/*
 * Streams that ended while the disk was full (issue 23, item 4).
 *
 * A paused stream's converter holds what the full disk cost, per thread
 * (lost.threads[].disk_full), and the cut files, whose fds it keeps; none
 * of it is on disk yet. When such a stream ends, its converter cannot be
 * finished: freeing it would leave the cut files to the next start, which
 * cuts them to their last mark and knows nothing of the counts. So the
 * server keeps it here, parked, and the once-a-second sweep finishes it
 * when space is back: the cut files are finished through their fds and a
 * last main file carries the counts. The finished agent's status entry
 * (gt__done, for status and collect) is given that file too.
 *
 * Only the loop thread touches the list: a parked converter has no
 * connection and no queue left.
 */
#include "daemon/server/server.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>

#include "common/alloc.h"
#include "daemon/convert/convert.h"

struct gt__parked {
    struct gt__parked *next;
    struct gt__conv *conv;
    struct gt__framer_stats stats;
    int truncated;
    uint32_t pid;
    uint64_t start_mono_ns;
    char stem[128];
};

int gt__disk_space_back(const struct gt__server *s)
{
    struct statvfs st;

    return statvfs(s->out_dir, &st) == 0 &&
           (uint64_t)st.f_bavail * st.f_frsize >= GT__DISK_RESUME_BYTES;
}

int gt__disk_park(struct gt__server *s, struct gt__conv *conv,
                  const struct gt__framer_stats *st, int truncated,
                  uint32_t pid, uint64_t start_mono_ns, const char *stem)
{
    struct gt__parked *p;

    /* Agents are untrusted: many short streams while the disk stays full
     * must not hold converters (and their cut files' fds) without bound.
     * Past the cap a stream is finished as before the parking existed. */
    if (s->nparked >= GT__DISK_PARKED_MAX) {
        gt__log("agent pid %u: %s ended while the disk is full, and %zu "
                "streams are held already: left unfinished, its disk-full "
                "counts lost", (unsigned)pid, stem, s->nparked);
        return -EBUSY;
    }
    p = gt__calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->conv = conv;
    p->stats = *st;
    p->truncated = truncated;
    p->pid = pid;
    p->start_mono_ns = start_mono_ns;
    snprintf(p->stem, sizeof(p->stem), "%s", stem);
    p->next = s->parked;
    s->parked = p;
    s->nparked++;
    gt__log("agent pid %u: %s ended while the disk is full: held until space "
            "returns, then finished with what the full disk cost",
            (unsigned)pid, stem);
    return 0;
}

/* The status entry of the parked stream's agent, if still remembered. */
static struct gt__done *done_of(struct gt__server *s, const struct gt__parked *p)
{
    for (struct gt__done *d = s->done; d; d = d->next)
        if (d->pid == p->pid && d->start_mono_ns == p->start_mono_ns &&
            strcmp(d->stem, p->stem) == 0)
            return d;
    return NULL;
}

/* Finishes p's converter if space allows. @return 1 done (p may go),
 * 0 still full. */
static int parked_finish(struct gt__server *s, struct gt__parked *p)
{
    struct gt__done *d;
    int rc = gt__conv_resume(p->conv);

    if (rc == -ENOSPC || rc == -EDQUOT)
        return 0;
    if (rc == 0)
        rc = gt__conv_finish(p->conv, &p->stats, p->truncated);
    gt__log("agent pid %u: disk space is back: %s finished%s%s",
            (unsigned)p->pid, p->stem, rc ? ": " : "",
            rc ? gt__strerror(rc) : "");
    if ((d = done_of(s, p)) != NULL) {
        const char *const *paths;
        size_t n = gt__conv_files(p->conv, &paths);
        char **files = gt__calloc(n + 1, sizeof(char *));
        size_t k = 0;

        for (size_t i = 0; files && i < n; i++)
            if ((files[k] = gt__strdup(paths[i])) != NULL)
                k++;
        if (files) {
            s->files = s->files - d->nfiles + k;
            for (size_t i = 0; i < d->nfiles; i++)
                gt__free(d->files[i]);
            gt__free(d->files);
            d->files = files;
            d->nfiles = k;
        }
    }
    return 1;
}

void gt__disk_parked_sweep(struct gt__server *s)
{
    struct gt__parked **pp = &s->parked;

    while (*pp) {
        struct gt__parked *p = *pp;

        if (gt__disk_space_back(s) && parked_finish(s, p)) {
            *pp = p->next;
            s->nparked--;
            gt__conv_free(p->conv);
            gt__free(p);
        } else {
            pp = &p->next;
        }
    }
}

void gt__disk_parked_close_all(struct gt__server *s)
{
    for (struct gt__parked *p = s->parked; p; p = p->next)
        if (!gt__disk_space_back(s) || !parked_finish(s, p))
            gt__log("agent pid %u: disk still full at shutdown: %s left "
                    "unfinished (the next start or gradtrace convert "
                    "--repair finishes it, without the disk-full counts)",
                    (unsigned)p->pid, p->stem);
    while (s->parked) {
        struct gt__parked *p = s->parked;

        s->parked = p->next;
        gt__conv_free(p->conv);
        gt__free(p);
    }
    s->nparked = 0;
}
