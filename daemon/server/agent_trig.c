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
 *
 * Lifetime: the daemon's armed list holds a trigger until it reached
 * agents and none holds it any more (ended, fired its count, or left out
 * by the rank it learnt), or until trigger_clear; then it is retired (the
 * last GT__RETIRED_MAX are kept for status with what they fired), so a
 * later job's agents never get it.
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

/* Windows of trigger spec the agent finished (done or cut). */
static unsigned windows_done(const struct gt__agent *a, const char *spec)
{
    const struct gt__conv_window *w = NULL;
    size_t nw = a->conv ? gt__conv_windows(a->conv, &w) : 0;
    unsigned done = 0;

    for (size_t k = 0; k < nw; k++)
        done += w[k].spec && strcmp(w[k].spec, spec) == 0 &&
                w[k].state != GT__CONV_WIN_OPEN;
    return done;
}

/* The agent's entry of trigger id while the agent still holds it. */
static const struct gt__agent_trig *holding(const struct gt__agent *a, uint64_t id)
{
    for (size_t i = 0; i < a->ntrigs; i++) {
        const struct gt__agent_trig *t = &a->trigs[i];
        if (t->id == id)
            return t->cleared || windows_done(a, t->spec) >= t->count ? NULL : t;
    }
    return NULL;
}

static void retire(struct gt__server *s, size_t i, int cleared)
{
    struct gt__armed *t = &s->armed[i];
    struct gt__retired *r;

    if (s->nretired == GT__RETIRED_MAX) {
        memmove(&s->retired[0], &s->retired[1], (GT__RETIRED_MAX - 1) * sizeof(*r));
        s->nretired--;
    }
    r = &s->retired[s->nretired++];
    r->id = t->id;
    memcpy(r->spec, t->spec, sizeof(r->spec));
    r->sent = t->sent;
    r->fired = t->fired;
    r->cleared = cleared;
    for (const struct gt__agent *a = s->agents; a; a = a->next)
        for (size_t k = 0; k < a->ntrigs; k++)
            if (a->trigs[k].id == t->id)
                r->fired += windows_done(a, a->trigs[k].spec);
    gt__log("trigger %llu retired (%s): %s, sent to %u agent(s), %u window(s)",
            (unsigned long long)t->id, cleared ? "cleared" : "its agents are done",
            t->spec, (unsigned)r->sent, (unsigned)r->fired);
    memmove(&s->armed[i], &s->armed[i + 1], (s->narmed - i - 1) * sizeof(*t));
    s->narmed--;
}

void gt__armed_retire(struct gt__server *s)
{
    for (size_t i = 0; i < s->narmed;) {
        int held = 0;
        for (const struct gt__agent *a = s->agents; a && !held; a = a->next)
            held = a->hello_seen && !a->closing && holding(a, s->armed[i].id);
        if (s->armed[i].sent && !held)
            retire(s, i, 0);
        else
            i++;
    }
}

void gt__agent_trig_closed(struct gt__agent *a)
{
    struct gt__server *s = a->srv;

    for (size_t i = 0; i < a->ntrigs; i++)
        for (size_t k = 0; k < s->narmed; k++)
            if (s->armed[k].id == a->trigs[i].id)
                s->armed[k].fired += windows_done(a, a->trigs[i].spec);
    /* Unlinked already: a retire does not count its windows again. */
    gt__armed_retire(s);
}

void gt__armed_clear(struct gt__server *s)
{
    while (s->narmed)
        retire(s, 0, 1);
}

static cJSON *pid_list(const struct gt__server *s, uint64_t id)
{
    cJSON *arr = cJSON_CreateArray();

    for (const struct gt__agent *a = s->agents; arr && a; a = a->next)
        if (a->hello_seen && !a->closing && holding(a, id))
            cJSON_AddItemToArray(arr, cJSON_CreateNumber(a->hello->h.pid));
    return arr;
}

cJSON *gt__armed_json(const struct gt__server *s, size_t i)
{
    const struct gt__armed *t = &s->armed[i];
    cJSON *o = cJSON_CreateObject();
    unsigned fired = t->fired;

    if (!o)
        return NULL;
    for (const struct gt__agent *a = s->agents; a; a = a->next)
        for (size_t k = 0; k < a->ntrigs; k++)
            if (a->trigs[k].id == t->id && !a->closing)
                fired += windows_done(a, a->trigs[k].spec);
    cJSON_AddNumberToObject(o, "id", (double)t->id);
    cJSON_AddStringToObject(o, "spec", t->spec);
    cJSON_AddNumberToObject(o, "sent_to", t->sent);
    cJSON_AddStringToObject(o, "state", t->sent ? "armed" : "waiting");
    cJSON_AddItemToObject(o, "agents", pid_list(s, t->id));
    cJSON_AddNumberToObject(o, "fired", fired);
    return o;
}

cJSON *gt__retired_json(const struct gt__server *s)
{
    cJSON *arr = cJSON_CreateArray();

    for (size_t i = s->nretired; arr && i-- > 0;) {
        const struct gt__retired *r = &s->retired[i];
        cJSON *o = cJSON_CreateObject();

        cJSON_AddNumberToObject(o, "id", (double)r->id);
        cJSON_AddStringToObject(o, "spec", r->spec);
        cJSON_AddNumberToObject(o, "sent_to", r->sent);
        cJSON_AddNumberToObject(o, "fired", r->fired);
        cJSON_AddStringToObject(o, "why", r->cleared ? "cleared" : "done");
        cJSON_AddItemToArray(arr, o);
    }
    return arr;
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

void gt__agent_send_triggers(struct gt__agent *a)
{
    struct gt__server *s = a->srv;

    /* Triggers whose agents are all done belong to no later job. */
    gt__armed_retire(s);
    for (size_t i = 0; i < s->narmed; i++) {
        struct gt__armed *t = &s->armed[i];

        if (gt__sel_match_later(&t->t.sel, a->hello->h.pid, a->hello->h.rank) &&
            gt__agent_send(a, GT_CTL_TRIGGER, t->spec) == 0) {
            t->sent++;
            gt__agent_trig_sent(a, t);
        }
    }
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
