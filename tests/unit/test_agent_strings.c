/*
 * Agent string interning (agent/strings.c) and its contract with the
 * stream (agent/streamer.c): the same text gets the same id; each definition
 * crosses a stream once, before any record that uses it, even while other
 * threads intern and record concurrently; a reconnection is a new stream
 * that carries every definition again. The stream tests run the real agent
 * core (streamer thread, nonblocking socket sink) against a listening
 * socket in a mkdtemp directory, standing in for the daemon; they also
 * check that the daemon's CAPTURE_OFF message reaches the agent.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <string.h>
#include <unistd.h>

#include "agent/control.h"
#include "agent/core.h"
#include "agent/internal.h"
#include "agent/stream.h"
#include "agent/strings.h"

Test(agent_strings, same_text_same_id)
{
    uint32_t a = gt_intern("alpha"), b = gt_intern("beta");

    cr_assert_gt(a, 0);
    cr_assert_gt(b, 0);
    cr_assert_neq(a, b);
    cr_assert_eq(gt_intern("alpha"), a);
    cr_assert_eq(gt__intern("alphabet", 5), a, "length-delimited, not NUL");
    cr_assert_eq(gt_intern(NULL), 0);
}

Test(agent_strings, many_distinct_strings)
{
    char buf[32];
    static uint32_t ids[50000];

    for (int i = 0; i < 50000; i++) {
        snprintf(buf, sizeof(buf), "name-%d", i);
        ids[i] = gt_intern(buf);
        cr_assert_gt(ids[i], 0);
    }
    for (int i = 0; i < 50000; i++) {
        const char *s;
        uint32_t len;
        snprintf(buf, sizeof(buf), "name-%d", i);
        cr_assert_eq(gt_intern(buf), ids[i], "stable across table growth");
        cr_assert_eq(gt__strings_get(ids[i], &s, &len), 0);
        cr_assert_eq(len, strlen(buf));
        cr_assert_eq(memcmp(s, buf, len), 0);
    }
    cr_assert_geq(gt__strings_count(), 50000);
}

Test(agent_strings, long_strings_are_cut)
{
    static char big[GT_STRING_MAX + 100];
    const char *s;
    uint32_t len;

    memset(big, 'x', sizeof(big) - 1);
    cr_assert_eq(gt__strings_get(gt_intern(big), &s, &len), 0);
    cr_assert_eq(len, GT_STRING_MAX);
}

/* ---------------------------------------------------------- stream tests */

struct seen {
    int hellos;
    uint32_t defs[65536];     /* definitions per id in this stream */
    uint64_t scopes;          /* scope records */
    int used_before_defined;  /* records naming an id not yet defined */
};

static int seen_hello(void *ud, const struct gt__hello_info *h)
{
    struct seen *s = ud;

    (void)h;
    s->hellos++;
    return 0;
}

static int seen_chunk(void *ud, const struct gt_chunk_header *h,
                      const uint8_t *recs, size_t n)
{
    struct seen *s = ud;
    struct gt__rec_iter it;
    uint16_t type, size;
    const uint8_t *rec;

    (void)h;
    gt__rec_iter_init(&it, recs, n);
    while (gt__rec_next(&it, &type, &size, &rec) == 1) {
        if (type == GT_R_STRING) {
            struct gt_r_string r;
            if (gt__rec_get(rec, size, &r, sizeof(r)) == 0 && r.id < 65536)
                s->defs[r.id]++;
        } else if (type == GT_R_SCOPE_BEGIN) {
            struct gt_r_scope_begin r;
            if (gt__rec_get(rec, size, &r, sizeof(r)) == 0) {
                s->scopes++;
                if (r.name >= 65536 || !s->defs[r.name])
                    s->used_before_defined++;
            }
        }
    }
    return 0;
}

static int listen_at(const char path[64])
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);

    cr_assert_geq(fd, 0);
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    cr_assert_eq(listen(fd, 4), 0);
    return fd;
}

static int accept_within(int lfd, int ms)
{
    struct pollfd p = {.fd = lfd, .events = POLLIN};

    cr_assert_eq(poll(&p, 1, ms), 1, "the agent did not connect in %d ms", ms);
    return accept(lfd, NULL, NULL);
}

static void send_ctl_text(int fd, uint16_t type, const char *text)
{
    uint8_t buf[256];
    size_t len = strlen(text);
    struct gt_ctl c = {.magic = GT_CTL_MAGIC, .type = type,
                       .size = (uint16_t)(sizeof(c) + len)};

    memcpy(buf, &c, sizeof(c));
    memcpy(buf + sizeof(c), text, len);
    /* Two writes: the agent must reassemble a message split across reads. */
    cr_assert_eq(write(fd, buf, 5), 5);
    usleep(30000);
    cr_assert_eq(write(fd, buf + 5, sizeof(c) + len - 5), (ssize_t)(sizeof(c) + len - 5));
}

static void send_ctl(int fd, uint16_t type)
{
    send_ctl_text(fd, type, "");
}

/* Reads the stream until `want` scope records arrived (or 5 s passed). */
static void read_until(int fd, struct gt__framer *f, struct seen *s, uint64_t want)
{
    uint8_t buf[65536];

    for (int waited = 0; s->scopes < want && waited < 5000;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        ssize_t n;
        if (poll(&p, 1, 50) <= 0) {
            waited += 50;
            continue;
        }
        n = read(fd, buf, sizeof(buf));
        cr_assert_gt(n, 0, "stream closed early");
        cr_assert_eq(gt__framer_feed(f, buf, (size_t)n), 0);
    }
    cr_assert_eq(s->scopes, want);
}

struct interner {
    int index;
    int n;
};

#define USES_PER_NAME 10

/* Each name is new when first recorded, and the streamer keeps cycling
 * meanwhile (blocks seal often): definitions race their records. */
static void *intern_and_record(void *arg)
{
    struct interner *w = arg;
    char buf[32];

    for (int k = 0; k < w->n; k++) {
        uint32_t id;
        snprintf(buf, sizeof(buf), "th%d-%d", w->index, k);
        id = gt_intern(buf);
        for (int u = 0; u < USES_PER_NAME; u++) {
            gt_scope_begin(id);
            gt_scope_end();
        }
    }
    return NULL;
}

Test(agent_strings, defined_once_per_stream_and_again_after_reconnect, .timeout = 30)
{
    char dir[] = "/tmp/gt-agent-strings.XXXXXX", path[64];
    struct gt__config c;
    struct seen s1 = {0}, s2 = {0};
    struct gt__framer *f;
    pthread_t th[2];
    struct interner w[2] = {{0, 20000}, {1, 20000}};
    uint32_t alpha;
    int lfd, cfd;

    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/agent.sock", dir);
    lfd = listen_at(path);
    memset(&c, 0, sizeof(c));
    snprintf(c.socket_path, sizeof(c.socket_path), "%s", path);
    c.capture = 1;
    /* Room for the whole run (no drop can spoil the counts), small enough
     * blocks that the streamer wakes often while names are being made. */
    c.block_kb = 64;
    c.blocks = 256;
    cr_assert_eq(gt__agent_start(&c), 0);

    /* Stream 1: two threads intern and use 40000 new names; the main thread
     * reuses one name many times. */
    cfd = accept_within(lfd, 5000);
    send_ctl(cfd, GT_CTL_WELCOME);
    f = gt__framer_create(GT__FRAMER_STRICT, seen_hello, seen_chunk, &s1);
    alpha = gt_intern("alpha");
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, intern_and_record, &w[i]);
    for (int i = 0; i < 500; i++) {
        gt_scope_begin(alpha);
        gt_scope_end();
    }
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    read_until(cfd, f, &s1, 2 * 20000 * USES_PER_NAME + 500);
    cr_assert_eq(s1.hellos, 1);
    cr_assert_eq(s1.used_before_defined, 0, "a record arrived before its string");
    for (uint32_t id = 1; id < 65536; id++)
        cr_assert_leq(s1.defs[id], 1, "string %u defined %u times", id, s1.defs[id]);
    cr_assert_eq(s1.defs[alpha], 1);
    gt__framer_free(f);

    /* The daemon goes away; the agent reconnects within its backoff. */
    close(cfd);
    cfd = accept_within(lfd, 5000);
    f = gt__framer_create(GT__FRAMER_STRICT, seen_hello, seen_chunk, &s2);
    for (int i = 0; i < 100; i++) {
        gt_scope_begin(alpha);
        gt_scope_end();
    }
    read_until(cfd, f, &s2, 100);
    cr_assert_eq(s2.hellos, 1, "a new connection starts with a hello");
    cr_assert_eq(s2.defs[alpha], 1, "old ids are defined again in the new stream");
    cr_assert_eq(s2.used_before_defined, 0);
    cr_assert_geq(s2.defs[w[1].n], 1, "the whole table is re-sent");

    /* Control: the daemon turns capture off. */
    send_ctl(cfd, GT_CTL_CAPTURE_OFF);
    for (int i = 0; i < 200 && gt_capture_active(); i++)
        usleep(10000);
    cr_assert_eq(gt_capture_active(), 0, "CAPTURE_OFF was not applied");
    send_ctl(cfd, GT_CTL_CAPTURE_ON);
    for (int i = 0; i < 200 && !gt_capture_active(); i++)
        usleep(10000);
    cr_assert_eq(gt_capture_active(), 1, "CAPTURE_ON was not applied");

    /* Triggers are kept (for the trigger engine) until cleared. */
    send_ctl_text(cfd, GT_CTL_TRIGGER, "layer=layers.1,phase=backward");
    for (int i = 0; i < 200 && gt__triggers_count() == 0; i++)
        usleep(10000);
    cr_assert_eq(gt__triggers_count(), 1);
    cr_assert_str_eq(gt__trigger_text(0), "layer=layers.1,phase=backward");
    send_ctl(cfd, GT_CTL_TRIGGER_CLEAR);
    for (int i = 0; i < 200 && gt__triggers_count() != 0; i++)
        usleep(10000);
    cr_assert_eq(gt__triggers_count(), 0);

    gt__agent_stop();
    gt__framer_free(f);
    close(cfd);
    close(lfd);
    unlink(path);
    rmdir(dir);
}

Test(agent_strings, record_packs_a_string_definition_or_says_it_does_not_fit)
{
    uint32_t id = gt_intern("packed.layer");
    uint8_t buf[64];
    struct gt_r_string r;

    int k = gt__strings_record(id, buf, sizeof(buf));
    cr_assert_eq(k, (int)(sizeof(r) + 12));
    memcpy(&r, buf, sizeof(r));
    cr_assert_eq(r.h.type, GT_R_STRING);
    cr_assert_eq(r.h.size, k);
    cr_assert_eq(r.id, id);
    cr_assert_eq(memcmp(buf + sizeof(r), "packed.layer", 12), 0);
    cr_assert_eq(gt__strings_record(id, buf, (uint32_t)k - 1), 0, "one byte short");
    cr_assert_eq(gt__strings_record(gt__strings_count() + 1, buf, sizeof(buf)), -ENOENT);
    cr_assert_eq(gt__strings_record(0, buf, sizeof(buf)), -ENOENT);
}
