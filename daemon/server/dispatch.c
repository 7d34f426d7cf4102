/*
 * Control connections: JSON lines in, exactly one JSON line out per
 * request (schema/control.md).
 *
 * A connection may send many requests; each is answered in order. A line
 * longer than GT__CTL_REQ_MAX gets an error reply and the connection is
 * closed, since the rest of it cannot be told apart from the next request.
 * Every other bad request (not JSON, unknown command, wrong types) gets an
 * error reply and the connection stays usable. Control clients pass the
 * same SO_PEERCRED check as agents.
 *
 * No client may hold the daemon's memory or its connection slots: one
 * whose unread replies pass GT__CTL_QUEUE_MAX is cut, one without traffic
 * for the idle limit (--control-idle-s) is closed by the sweep, and when
 * all GT__CTLS_MAX slots are taken a new client takes the slot of the one
 * idle longest, so idle connections never lock `status` out.
 *
 * Requests act on agents only through the files below: messages to them
 * (agent_send.c), their triggers (agent_trig.c), their status
 * (agent_status.c), draining them for collect (ingest.c); a shutdown
 * request calls the server's s->shutdown. Nothing there calls back here.
 */
#include "daemon/server/server.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/util.h"
#include "daemon/convert/convert.h"

struct gt__ctlconn {
    uv_pipe_t pipe;
    struct gt__server *srv;
    struct gt__ctlconn *next;
    int closing;
    int last_reply;             /* close once the pending reply is written */
    uint64_t last_ns;           /* last bytes read or reply written */
    size_t len;
    char buf[GT__CTL_REQ_MAX + 1];
};

/* Sends CAPTURE_OFF to the agents a timed start turned on. */
struct gt__timer {
    uv_timer_t t;
    struct gt__server *srv;
    struct gt__timer *next;
    size_t n;
    uint64_t ids[];
};

struct reply_write {
    uv_write_t req;
    struct gt__ctlconn *c;
    char text[];
};

static void on_conn_closed(uv_handle_t *h)
{
    gt__free(h);
}

static void close_conn(struct gt__ctlconn *c)
{
    struct gt__ctlconn **pp = &c->srv->ctls;

    if (c->closing)
        return;
    c->closing = 1;
    while (*pp && *pp != c)
        pp = &(*pp)->next;
    if (*pp)
        *pp = c->next;
    c->srv->nctls--;
    uv_close((uv_handle_t *)&c->pipe, on_conn_closed);
}

static void on_reply_written(uv_write_t *req, int status)
{
    struct reply_write *w = (struct reply_write *)req;
    struct gt__ctlconn *c = w->c;

    (void)status;
    c->last_ns = gt__mono_ns();
    if (c->last_reply && uv_stream_get_write_queue_size(req->handle) == 0)
        close_conn(c);
    gt__free(w);
}

static void send_line(struct gt__ctlconn *c, const char *text)
{
    size_t n = strlen(text);
    struct reply_write *w = gt__malloc(sizeof(*w) + n + 1);
    uv_buf_t b;

    if (!w) {
        close_conn(c);
        return;
    }
    if (uv_stream_get_write_queue_size((uv_stream_t *)&c->pipe) > GT__CTL_QUEUE_MAX) {
        gt__log("control client not reading its replies (%zu bytes queued): "
                "closing", uv_stream_get_write_queue_size((uv_stream_t *)&c->pipe));
        c->srv->ctl_cut++;
        gt__free(w);
        close_conn(c);
        return;
    }
    w->c = c;
    memcpy(w->text, text, n);
    w->text[n] = '\n';
    b = uv_buf_init(w->text, (unsigned)(n + 1));
    if (uv_write(&w->req, (uv_stream_t *)&c->pipe, &b, 1, on_reply_written) != 0) {
        gt__free(w);
        close_conn(c);
    }
}

/* Sends obj (consumed) with "ok" first and the request id echoed. */
static void reply(struct gt__ctlconn *c, cJSON *obj, cJSON *id)
{
    char *text;

    if (!obj) {
        send_line(c, "{\"ok\":false,\"error\":\"out of memory\"}");
        cJSON_Delete(id);
        return;
    }
    if (id)
        cJSON_AddItemToObject(obj, "id", id);
    gt__json_clean_strings(obj);
    text = cJSON_PrintUnformatted(obj);
    send_line(c, text ? text : "{\"ok\":false,\"error\":\"out of memory\"}");
    cJSON_free(text);
    cJSON_Delete(obj);
}

static cJSON *ok_obj(void)
{
    cJSON *o = cJSON_CreateObject();

    if (o)
        cJSON_AddTrueToObject(o, "ok");
    return o;
}

static void reply_error(struct gt__ctlconn *c, const char *msg, cJSON *id)
{
    cJSON *o = cJSON_CreateObject();

    if (o) {
        cJSON_AddFalseToObject(o, "ok");
        cJSON_AddStringToObject(o, "error", msg);
    }
    reply(c, o, id);
}

static cJSON *status_json(struct gt__server *s)
{
    cJSON *o = ok_obj(), *arr, *tot;
    size_t n = 0;

    if (!o)
        return NULL;
    cJSON_AddStringToObject(o, "version", GT__VERSION);
    cJSON_AddNumberToObject(o, "pid", getpid());
    cJSON_AddNumberToObject(o, "uptime_s",
                            (double)(gt__mono_ns() - s->start_ns) / 1e9);
    cJSON_AddStringToObject(o, "output_dir", s->out_dir);
    cJSON_AddBoolToObject(o, "raw", s->raw);
    cJSON_AddStringToObject(o, "agent_socket", s->agent_path);
    cJSON_AddStringToObject(o, "control_socket", s->control_path);
    arr = cJSON_AddArrayToObject(o, "agents");
    for (struct gt__agent *a = s->agents; arr && a; a = a->next)
        if (a->hello_seen && !a->closing)
            cJSON_AddItemToArray(arr, gt__agent_json(a));
    arr = cJSON_AddArrayToObject(o, "triggers");
    for (size_t i = 0; arr && i < s->narmed; i++)
        cJSON_AddItemToArray(arr, gt__armed_json(s, i));
    cJSON_AddItemToObject(o, "retired", gt__retired_json(s));
    /* The most recent finished agents; totals cover all of them. */
    arr = cJSON_AddArrayToObject(o, "finished");
    for (struct gt__done *d = s->done; arr && d && n < 20; d = d->next, n++)
        cJSON_AddItemToArray(arr, gt__done_json(d));
    tot = cJSON_AddObjectToObject(o, "totals");
    if (tot) {
        cJSON_AddNumberToObject(tot, "connections", (double)s->connections);
        cJSON_AddNumberToObject(tot, "refused", (double)s->refused);
        cJSON_AddNumberToObject(tot, "control_cut", (double)s->ctl_cut);
        cJSON_AddNumberToObject(tot, "files_repaired", (double)s->repaired);
        cJSON_AddNumberToObject(tot, "disk_full", (double)gt__stat(&s->disk_full));
        cJSON_AddNumberToObject(tot, "disk_full_held", (double)s->nparked);
        cJSON_AddNumberToObject(tot, "bad_streams", (double)s->bad_streams);
        cJSON_AddNumberToObject(tot, "bytes", (double)s->bytes);
        cJSON_AddNumberToObject(tot, "chunks", (double)gt__stat(&s->chunks));
        cJSON_AddNumberToObject(tot, "records", (double)gt__stat(&s->records));
        cJSON_AddNumberToObject(tot, "events_finished", (double)s->events);
        cJSON_AddNumberToObject(tot, "lost_events_finished", (double)s->lost_events);
        cJSON_AddNumberToObject(tot, "lost_chunks_finished", (double)s->lost_chunks);
        cJSON_AddNumberToObject(tot, "files_written", (double)s->files);
    }
    return o;
}

static void on_timer_closed(uv_handle_t *h)
{
    gt__free(h);
}

static void close_timer(struct gt__timer *t)
{
    struct gt__timer **pp = &t->srv->timers;

    while (*pp && *pp != t)
        pp = &(*pp)->next;
    if (*pp)
        *pp = t->next;
    uv_close((uv_handle_t *)&t->t, on_timer_closed);
}

static void on_duration_end(uv_timer_t *h)
{
    struct gt__timer *t = (struct gt__timer *)h;

    for (struct gt__agent *a = t->srv->agents; a; a = a->next)
        for (size_t i = 0; i < t->n; i++)
            if (a->id == t->ids[i] && gt__agent_send(a, GT_CTL_CAPTURE_OFF, "") == 0)
                a->capture = 0;
    gt__log("timed capture ended for %zu agent(s)", t->n);
    close_timer(t);
}

static void arm_duration(struct gt__server *s, const struct gt__req *r,
                         const uint64_t *ids, size_t n)
{
    struct gt__timer *t = gt__malloc(sizeof(*t) + n * sizeof(uint64_t));

    if (!t)
        return;
    t->srv = s;
    t->n = n;
    memcpy(t->ids, ids, n * sizeof(uint64_t));
    uv_timer_init(s->loop, &t->t);
    t->next = s->timers;
    s->timers = t;
    uv_timer_start(&t->t, on_duration_end, r->duration_ms, 0);
}

static void do_capture(struct gt__ctlconn *c, const struct gt__req *r, cJSON *id)
{
    struct gt__server *s = c->srv;
    int on = r->cmd == GT__CMD_START;
    char text[64] = "";
    uint64_t ids[GT__AGENTS_MAX];
    size_t n = 0;
    cJSON *o, *arr;

    if (on && r->iterations)
        snprintf(text, sizeof(text), "iterations=%llu", (unsigned long long)r->iterations);
    else if (on && r->duration_ms)
        snprintf(text, sizeof(text), "ms=%llu", (unsigned long long)r->duration_ms);
    o = ok_obj();
    arr = o ? cJSON_AddArrayToObject(o, "pids") : NULL;
    for (struct gt__agent *a = s->agents; a && n < GT__AGENTS_MAX; a = a->next) {
        if (!a->hello_seen || a->closing ||
            !gt__sel_match(&r->sel, a->hello->h.pid, a->hello->h.rank))
            continue;
        if (gt__agent_send(a, on ? GT_CTL_CAPTURE_ON : GT_CTL_CAPTURE_OFF, text) < 0)
            continue;
        a->capture = on;
        ids[n++] = a->id;
        cJSON_AddItemToArray(arr, cJSON_CreateNumber(a->hello->h.pid));
    }
    if (n == 0) {
        cJSON_Delete(o);
        reply_error(c, s->nagents ? "no connected agent matches the selection"
                                  : "no agents connected", id);
        return;
    }
    /* The daemon ends a timed window itself too, so it ends even with an
     * agent that ignores the "ms=" hint. */
    if (on && r->duration_ms)
        arm_duration(s, r, ids, n);
    gt__log("capture %s for %zu agent(s)%s%s", on ? "on" : "off", n,
            text[0] ? ": " : "", text);
    reply(c, o, id);
}

static void do_trigger(struct gt__ctlconn *c, const struct gt__req *r, cJSON *id)
{
    struct gt__server *s = c->srv;
    struct gt__armed *t;
    cJSON *o, *arr;
    int len;

    if (s->narmed == GT__ARMED_MAX) {
        reply_error(c, "too many armed triggers (clear them with trigger_clear)", id);
        return;
    }
    t = &s->armed[s->narmed];
    len = gt__trigger_format(&r->trig, t->spec, sizeof(t->spec));
    if (len < 0 || (size_t)len + sizeof(struct gt_ctl) > GT_CTL_MAX_SIZE) {
        reply_error(c, "trigger spec too long", id);
        return;
    }
    t->t = r->trig;
    t->id = ++s->next_trigger_id;
    t->sent = 0;
    s->narmed++;
    o = ok_obj();
    arr = o ? cJSON_AddArrayToObject(o, "pids") : NULL;
    for (struct gt__agent *a = s->agents; a; a = a->next) {
        if (!a->hello_seen || a->closing ||
            !gt__sel_match_later(&t->t.sel, a->hello->h.pid, a->hello->h.rank) ||
            gt__agent_send(a, GT_CTL_TRIGGER, t->spec) < 0)
            continue;
        t->sent++;
        gt__agent_trig_sent(a, t);
        cJSON_AddItemToArray(arr, cJSON_CreateNumber(a->hello->h.pid));
    }
    gt__log("trigger %llu armed: %s (sent to %u agent(s))",
            (unsigned long long)t->id, t->spec, (unsigned)t->sent);
    cJSON_AddNumberToObject(o, "trigger_id", (double)t->id);
    cJSON_AddStringToObject(o, "spec", t->spec);
    reply(c, o, id);
}

/*
 * A job-wide trigger: handed to one agent of this host (the lowest rank),
 * whose Python side carries it through the job's torch.distributed store
 * to every rank (python/gradtrace/_jobtrig.py); the ranks arm it
 * themselves, so the daemon keeps nothing armed.
 */
static void do_job_trigger(struct gt__ctlconn *c, const struct gt__req *r, cJSON *id)
{
    struct gt__server *s = c->srv;
    struct gt__agent *best = NULL;
    char spec[GT_CTL_MAX_SIZE];
    int len = gt__trigger_format(&r->trig, spec, sizeof(spec));
    unsigned connected = 0;
    cJSON *o;

    if (len < 0 || (size_t)len + sizeof(struct gt_ctl) > GT_CTL_MAX_SIZE) {
        reply_error(c, "trigger spec too long", id);
        return;
    }
    /* Only an agent whose Python side watches the job's store can carry
     * the trigger to the ranks; handing it to any other would arm
     * nothing anywhere and still say ok. */
    for (struct gt__agent *a = s->agents; a; a = a->next) {
        if (!a->hello_seen || a->closing)
            continue;
        connected++;
        if (gt__agent_job_route(a) &&
            (!best || (uint32_t)a->hello->h.rank < (uint32_t)best->hello->h.rank))
            best = a;
    }
    if (!best && !connected) {
        reply_error(c, "no agents connected", id);
        return;
    }
    if (!best) {
        /* "pending": a job that has just started may not have its route
         * up yet (the package sees the process group a moment after
         * init_process_group): the CLI asks again for a few seconds. */
        o = cJSON_CreateObject();
        if (o) {
            cJSON_AddFalseToObject(o, "ok");
            cJSON_AddStringToObject(o, "error",
                "no connected agent can reach a torch.distributed job (a job "
                "trigger needs the gradtrace package in the job, gradtrace "
                "record, and a process group on MASTER_ADDR/MASTER_PORT's "
                "store): nothing armed");
            cJSON_AddTrueToObject(o, "pending");
        }
        reply(c, o, id);
        return;
    }
    if (gt__agent_send(best, GT_CTL_JOB_TRIGGER, spec) < 0) {
        reply_error(c, "could not send to the agent", id);
        return;
    }
    gt__log("job-wide trigger handed to pid %u: %s", (unsigned)best->hello->h.pid, spec);
    o = ok_obj();
    cJSON_AddNumberToObject(o, "pid", best->hello->h.pid);
    cJSON_AddNumberToObject(o, "rank", best->hello->h.rank);
    cJSON_AddStringToObject(o, "spec", spec);
    reply(c, o, id);
}

static void do_trigger_clear(struct gt__ctlconn *c, cJSON *id)
{
    struct gt__server *s = c->srv;
    unsigned n = 0;
    cJSON *o;

    for (struct gt__agent *a = s->agents; a; a = a->next)
        if (a->hello_seen && !a->closing &&
            gt__agent_send(a, GT_CTL_TRIGGER_CLEAR, "") == 0) {
            gt__agent_trig_cleared(a);
            n++;
        }
    o = ok_obj();
    cJSON_AddNumberToObject(o, "cleared", (double)s->narmed);
    cJSON_AddNumberToObject(o, "agents", n);
    gt__armed_clear(s);
    reply(c, o, id);
}

static int in_set(const uint32_t *set, size_t n, uint32_t pid)
{
    for (size_t i = 0; i < n; i++)
        if (set[i] == pid)
            return 1;
    return 0;
}

/*
 * The agents of one process tree started since since_ns: pid itself and,
 * transitively, agents whose parent is in the set. Intermediate processes
 * (shells, launchers) inherit LD_PRELOAD, so they are agents too and the
 * chain is visible in the hellos.
 */
static size_t tree_pids(struct gt__server *s, uint32_t root, uint64_t since,
                        uint32_t *set, size_t cap)
{
    size_t n = 1, before;

    set[0] = root;
    do {
        before = n;
        for (struct gt__agent *a = s->agents; a && n < cap; a = a->next)
            if (a->hello_seen && a->hello->h.start_mono_ns >= since &&
                in_set(set, n, a->hello->h.ppid) && !in_set(set, n, a->hello->h.pid))
                set[n++] = a->hello->h.pid;
        for (struct gt__done *d = s->done; d && n < cap; d = d->next)
            if (d->start_mono_ns >= since && in_set(set, n, d->ppid) &&
                !in_set(set, n, d->pid))
                set[n++] = d->pid;
    } while (n != before);
    return n;
}

static void do_collect(struct gt__ctlconn *c, const struct gt__req *r, cJSON *id)
{
    struct gt__server *s = c->srv;
    uint32_t set[GT__AGENTS_MAX];
    size_t n;
    cJSON *o = ok_obj(), *files, *running;
    struct gt__agent *a, *next;
    unsigned agents = 0;

    /* Agents of the tree that already exited may still be in the listen
     * backlog or have data in their sockets: take and read everything
     * now (a live agent only gives what it already sent), so exited
     * processes are complete in their traces. */
    gt__agent_accept_pending(s);
    for (a = s->agents; a; a = next) {
        next = a->next;
        (void)gt__agent_drain(a);
    }
    n = tree_pids(s, r->pid, r->since_ns, set, GT__AGENTS_MAX);
    files = cJSON_AddArrayToObject(o, "files");
    running = cJSON_AddArrayToObject(o, "running");
    for (struct gt__done *d = s->done; d; d = d->next)
        if (d->start_mono_ns >= r->since_ns && in_set(set, n, d->pid)) {
            agents++;
            for (size_t i = 0; i < d->nfiles; i++)
                cJSON_AddItemToArray(files, cJSON_CreateString(d->files[i]));
        }
    for (a = s->agents; a; a = a->next)
        if (a->hello_seen && a->hello->h.start_mono_ns >= r->since_ns &&
            in_set(set, n, a->hello->h.pid)) {
            agents++;
            cJSON_AddItemToArray(running, cJSON_CreateNumber(a->hello->h.pid));
        }
    /* Streams of the tree seen at all: 0 tells record the command never
     * loaded the agent, rather than that it recorded nothing. */
    cJSON_AddNumberToObject(o, "agents", agents);
    reply(c, o, id);
}

static void do_shutdown(struct gt__ctlconn *c, cJSON *id)
{
    struct gt__server *s = c->srv;
    cJSON *o, *files;

    gt__log("shutdown requested");
    c->last_reply = 1;
    s->shutdown(s);
    o = ok_obj();
    files = cJSON_AddArrayToObject(o, "files");
    for (struct gt__done *d = s->done; d; d = d->next)
        for (size_t i = 0; i < d->nfiles; i++)
            cJSON_AddItemToArray(files, cJSON_CreateString(d->files[i]));
    reply(c, o, id);
}

/* The request's "id", detached for echoing, when it is a number or string. */
static cJSON *request_id(const char *line, size_t len)
{
    cJSON *obj = cJSON_ParseWithLength(line, len);
    cJSON *id = NULL;

    if (cJSON_IsObject(obj)) {
        id = cJSON_DetachItemFromObjectCaseSensitive(obj, "id");
        if (id && !cJSON_IsNumber(id) && !cJSON_IsString(id)) {
            cJSON_Delete(id);
            id = NULL;
        }
    }
    cJSON_Delete(obj);
    return id;
}

static void handle_line(struct gt__ctlconn *c, const char *line, size_t len)
{
    struct gt__req *r = gt__malloc(sizeof(*r));
    char err[256];
    cJSON *id;

    if (!r) {
        reply_error(c, "out of memory", NULL);
        return;
    }
    id = request_id(line, len);
    if (gt__req_parse(line, len, r, err, sizeof(err)) < 0) {
        reply_error(c, err, id);
        goto out_free_req;
    }
    switch (r->cmd) {
    case GT__CMD_STATUS: reply(c, status_json(c->srv), id); break;
    case GT__CMD_START:
    case GT__CMD_STOP: do_capture(c, r, id); break;
    case GT__CMD_TRIGGER: do_trigger(c, r, id); break;
    case GT__CMD_JOB_TRIGGER: do_job_trigger(c, r, id); break;
    case GT__CMD_TRIGGER_CLEAR: do_trigger_clear(c, id); break;
    case GT__CMD_COLLECT: do_collect(c, r, id); break;
    case GT__CMD_SHUTDOWN: do_shutdown(c, id); break;
    }
out_free_req:
    gt__free(r);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct gt__ctlconn *c = (struct gt__ctlconn *)h;

    (void)suggested;
    buf->base = c->buf + c->len;
    buf->len = sizeof(c->buf) - c->len;
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    struct gt__ctlconn *c = (struct gt__ctlconn *)st;
    size_t start = 0;
    char *nl;

    (void)buf;
    if (c->closing || c->last_reply)
        return;
    if (nread < 0) {
        close_conn(c);
        return;
    }
    c->last_ns = gt__mono_ns();
    c->len += (size_t)nread;
    while (!c->last_reply && !c->closing &&
           (nl = memchr(c->buf + start, '\n', c->len - start)) != NULL) {
        size_t end = (size_t)(nl - c->buf), len = end - start;

        if (len && c->buf[start + len - 1] == '\r')
            len--;
        if (len)
            handle_line(c, c->buf + start, len);
        start = end + 1;
    }
    if (c->closing || c->last_reply)
        return;
    memmove(c->buf, c->buf + start, c->len - start);
    c->len -= start;
    if (c->len == sizeof(c->buf)) {
        char msg[96];

        snprintf(msg, sizeof(msg), "request larger than %u bytes", GT__CTL_REQ_MAX);
        c->last_reply = 1;
        uv_read_stop(st);
        reply_error(c, msg, NULL);
    }
}

/* Closes the connection other than keep with the oldest traffic.
 * @return 1 when one was closed. */
static int evict_idlest(struct gt__server *s, const struct gt__ctlconn *keep)
{
    struct gt__ctlconn *old = NULL;

    for (struct gt__ctlconn *c = s->ctls; c; c = c->next)
        if (c != keep && !c->closing && !c->last_reply &&
            (!old || c->last_ns < old->last_ns))
            old = c;
    if (!old)
        return 0;
    gt__log("control connections at the limit (%d): closing the one idle "
            "for %llu ms", GT__CTLS_MAX,
            (unsigned long long)((gt__mono_ns() - old->last_ns) / 1000000));
    s->ctl_cut++;
    close_conn(old);
    return 1;
}

void gt__ctl_sweep(struct gt__server *s)
{
    uint64_t now = gt__mono_ns();
    struct gt__ctlconn *c, *next;

    for (c = s->ctls; c; c = next) {
        next = c->next;
        if (!c->closing && now - c->last_ns > s->ctl_idle_ns) {
            gt__log("control connection idle for %llu s: closing",
                    (unsigned long long)(s->ctl_idle_ns / 1000000000u));
            s->ctl_cut++;
            close_conn(c);
        }
    }
}

void gt__ctl_on_connection(uv_stream_t *server, int status)
{
    struct gt__server *s = server->data;
    struct gt__ctlconn *c;
    uint32_t pid;
    char why[160];

    if (status < 0)
        return;
    c = gt__calloc(1, sizeof(*c));
    if (!c)
        return;
    c->srv = s;
    uv_pipe_init(s->loop, &c->pipe, 0);
    c->next = s->ctls;
    s->ctls = c;
    s->nctls++;
    if (uv_accept(server, (uv_stream_t *)&c->pipe) != 0) {
        close_conn(c);
        return;
    }
    c->last_ns = gt__mono_ns();
    /* Each connection holds a request buffer: bound their number so a
     * client opening connections in a loop cannot exhaust memory or fds.
     * The one idle longest gives its slot up, so the newcomer is served. */
    if (s->nctls > GT__CTLS_MAX && !evict_idlest(s, c)) {
        gt__log("refused control connection: %d already open", GT__CTLS_MAX);
        close_conn(c);
        return;
    }
    if (gt__peer_check(&c->pipe, &pid, why, sizeof(why)) < 0) {
        s->refused++;
        gt__log("refused control connection: %s", why);
        close_conn(c);
        return;
    }
    uv_read_start((uv_stream_t *)&c->pipe, on_alloc, on_read);
}

void gt__ctl_close_all(struct gt__server *s)
{
    struct gt__ctlconn *c = s->ctls, *next;

    for (; c; c = next) {
        next = c->next;
        /* The shutdown requester is closed once its reply is written. */
        if (!c->last_reply)
            close_conn(c);
        else
            uv_read_stop((uv_stream_t *)&c->pipe);
    }
    while (s->timers)
        close_timer(s->timers);
}
