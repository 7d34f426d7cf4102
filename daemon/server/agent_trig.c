/*
 * Per-agent trigger state for status and collect: which armed triggers the
 * daemon sent to an agent, and which windows the agent fired.
 *
 * The agent evaluates triggers itself and never answers a trigger message,
 * so the daemon learns what fired only from the stream: each window's
 * WINDOW_* records carry the string id of the spec that opened it, and
 * the converter (convert.h, gt__conv_windows) keeps the windows it has
 * seen. The agent interns exactly the canonical text the daemon sent, so
 * a window belongs to a sent trigger when their spec texts are equal. A
 * trigger is "armed" until that many windows (its count) are done, then
 * "fired"; trigger_clear marks the rest "cleared". A trigger whose layer
 * never runs stays "armed" and leaves no file.
 */
#include "daemon/server/server.h"

#include <cjson/cJSON.h>
#include <string.h>

#include "common/alloc.h"
#include "daemon/convert/convert.h"

void gt__agent_trig_sent(struct gt__agent *a, const struct gt__armed *t)
{
    struct gt__agent_trig *e;

    if (a->ntrigs == GT__ARMED_MAX) {
        /* Keep the newest: drop the oldest cleared one, else the oldest. */
        size_t drop = 0;
        for (size_t i = 0; i < a->ntrigs; i++)
            if (a->trigs[i].cleared) {
                drop = i;
                break;
            }
        gt__free(a->trigs[drop].spec);
        memmove(&a->trigs[drop], &a->trigs[drop + 1],
                (a->ntrigs - drop - 1) * sizeof(a->trigs[0]));
        a->ntrigs--;
    }
    e = &a->trigs[a->ntrigs];
    e->spec = gt__strdup(t->spec);
    if (!e->spec)
        return; /* status will not list it; the agent has it anyway */
    e->id = t->id;
    e->count = t->t.count;
    e->cleared = 0;
    a->ntrigs++;
}

void gt__agent_trig_cleared(struct gt__agent *a)
{
    for (size_t i = 0; i < a->ntrigs; i++)
        a->trigs[i].cleared = 1;
}

static struct gt__armed *armed_find(struct gt__server *s, uint64_t id)
{
    for (size_t i = 0; i < s->narmed; i++)
        if (s->armed[i].id == id)
            return &s->armed[i];
    return NULL;
}

void gt__agent_trig_rank(struct gt__agent *a)
{
    struct gt__server *s = a->srv;
    uint32_t pid = a->hello->h.pid;
    int32_t rank = a->hello->h.rank;
    size_t k = 0;

    for (size_t i = 0; i < a->ntrigs; i++) {
        struct gt__armed *t = armed_find(s, a->trigs[i].id);
        if (t && !a->trigs[i].cleared && !gt__sel_match(&t->t.sel, pid, rank)) {
            if (t->sent)
                t->sent--;
            gt__free(a->trigs[i].spec);
            continue;
        }
        a->trigs[k++] = a->trigs[i];
    }
    a->ntrigs = k;
    for (size_t i = 0; i < s->narmed; i++) {
        struct gt__armed *t = &s->armed[i];
        int sent = 0;
        for (size_t j = 0; j < a->ntrigs && !sent; j++)
            sent = a->trigs[j].id == t->id;
        if (!sent && gt__sel_match(&t->t.sel, pid, rank) &&
            gt__agent_send(a, GT_CTL_TRIGGER, t->spec) == 0) {
            t->sent++;
            gt__agent_trig_sent(a, t);
        }
    }
}

void gt__agent_trig_free(struct gt__agent *a)
{
    for (size_t i = 0; i < a->ntrigs; i++)
        gt__free(a->trigs[i].spec);
    a->ntrigs = 0;
}

static const char *win_state(int s)
{
    return s == GT__CONV_WIN_DONE ? "done" : s == GT__CONV_WIN_CUT ? "cut" : "open";
}

cJSON *gt__agent_trig_json(const struct gt__agent *a)
{
    const struct gt__conv_window *w = NULL;
    size_t nw = a->conv ? gt__conv_windows(a->conv, &w) : 0;
    cJSON *o = cJSON_CreateObject();
    cJSON *arr = o ? cJSON_AddArrayToObject(o, "triggers") : NULL;

    for (size_t i = 0; arr && i < a->ntrigs; i++) {
        const struct gt__agent_trig *t = &a->trigs[i];
        cJSON *j = cJSON_CreateObject();
        unsigned done = 0, open = 0;

        for (size_t k = 0; k < nw; k++) {
            if (!w[k].spec || strcmp(w[k].spec, t->spec) != 0)
                continue;
            done += w[k].state != GT__CONV_WIN_OPEN;
            open += w[k].state == GT__CONV_WIN_OPEN;
        }
        cJSON_AddNumberToObject(j, "id", (double)t->id);
        cJSON_AddStringToObject(j, "spec", t->spec);
        cJSON_AddNumberToObject(j, "count", t->count);
        cJSON_AddNumberToObject(j, "windows", done);
        cJSON_AddStringToObject(j, "state", done >= t->count ? "fired"
                                            : t->cleared     ? "cleared"
                                            : open           ? "capturing"
                                                             : "armed");
        cJSON_AddItemToArray(arr, j);
    }
    arr = o ? cJSON_AddArrayToObject(o, "windows") : NULL;
    for (size_t k = 0; arr && k < nw; k++) {
        cJSON *j = cJSON_CreateObject();

        cJSON_AddNumberToObject(j, "id", w[k].id);
        cJSON_AddStringToObject(j, "spec", w[k].spec ? w[k].spec : "");
        cJSON_AddStringToObject(j, "layer", w[k].layer ? w[k].layer : "");
        cJSON_AddStringToObject(j, "phase", w[k].phase ? w[k].phase : "");
        cJSON_AddNumberToObject(j, "iteration", (double)w[k].iteration);
        cJSON_AddNumberToObject(j, "segments", w[k].segments);
        cJSON_AddStringToObject(j, "state", win_state(w[k].state));
        if (w[k].file)
            cJSON_AddStringToObject(j, "file", w[k].file);
        else
            cJSON_AddNullToObject(j, "file");
        cJSON_AddItemToArray(arr, j);
    }
    return o;
}

void gt__trig_json_merge(cJSON *dst, const cJSON *trig)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(trig, "triggers");
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(trig, "windows");

    cJSON_AddItemToObject(dst, "triggers",
                          t ? cJSON_Duplicate(t, 1) : cJSON_CreateArray());
    cJSON_AddItemToObject(dst, "fired",
                          w ? cJSON_Duplicate(w, 1) : cJSON_CreateArray());
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
