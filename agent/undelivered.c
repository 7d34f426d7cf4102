/*
 * Per-thread counts of records the daemon may not have (undelivered.h).
 *
 * A chunk holds records of several threads: while it is built, the pairs
 * (tid, records) go to `cur`; once written, to a slot of the ring of
 * chunks awaiting an ACK, keyed by the connection's chunk count after it.
 * An ACK frees the slots it covers; a connection that ends moves the rest
 * into the per-thread totals, which only grow.
 */
#include "agent/undelivered.h"

#include <string.h>

struct pair {
    uint32_t tid;
    uint32_t count;
};

struct slot {
    uint64_t end; /* the connection's chunk count after this slot */
    uint32_t n;
    struct pair p[GT__UNDEL_PAIRS];
};

struct total {
    uint32_t tid;
    uint64_t count; /* cumulative, process life */
    uint64_t sent;  /* last value reported in this stream */
};

static struct slot slots[GT__UNDEL_SLOTS];
static uint32_t s_head, s_n; /* oldest slot, slots in use */
static struct slot cur;
static struct total tot[GT__UNDEL_TIDS];
static uint32_t ntot;

static void pairs_add(struct slot *s, uint32_t tid, uint32_t n)
{
    if (s->n && s->p[s->n - 1].tid == tid) {
        s->p[s->n - 1].count += n;
        return;
    }
    for (uint32_t i = 0; i < s->n; i++)
        if (s->p[i].tid == tid) {
            s->p[i].count += n;
            return;
        }
    if (s->n == GT__UNDEL_PAIRS) {
        tid = 0; /* past the bound: the process's, last pair */
        for (uint32_t i = 0; i < s->n; i++)
            if (s->p[i].tid == 0) {
                s->p[i].count += n;
                return;
            }
        s->p[s->n - 1].tid = 0; /* conservative: ...that thread's too */
        s->p[s->n - 1].count += n;
        return;
    }
    s->p[s->n++] = (struct pair){tid, n};
}

void gt__undel_discarded(uint32_t tid, uint64_t n)
{
    uint32_t i;

    if (!n)
        return;
    for (i = 0; i < ntot; i++)
        if (tot[i].tid == tid)
            break;
    if (i == ntot) {
        if (ntot == GT__UNDEL_TIDS) {
            tid = 0;
            for (i = 0; i < ntot && tot[i].tid != 0; i++)
                ;
            if (i == ntot)
                i = ntot - 1; /* its count joins the last thread's */
        } else {
            tot[ntot++] = (struct total){.tid = tid};
        }
    }
    tot[i].count += n;
}

static void slot_lose(const struct slot *s)
{
    for (uint32_t i = 0; i < s->n; i++)
        gt__undel_discarded(s->p[i].tid, s->p[i].count);
}

void gt__undel_add(uint32_t tid, uint32_t n)
{
    if (n)
        pairs_add(&cur, tid, n);
}

void gt__undel_chunk_sent(uint64_t sent)
{
    struct slot *s;

    if (!cur.n)
        return;
    if (s_n == GT__UNDEL_SLOTS) {
        /* Full: the newest slot takes this chunk too. */
        s = &slots[(s_head + s_n - 1) % GT__UNDEL_SLOTS];
        for (uint32_t i = 0; i < cur.n; i++)
            pairs_add(s, cur.p[i].tid, cur.p[i].count);
    } else {
        s = &slots[(s_head + s_n) % GT__UNDEL_SLOTS];
        *s = cur;
        s_n++;
    }
    s->end = sent;
    cur.n = 0;
}

void gt__undel_chunk_lost(void)
{
    slot_lose(&cur);
    cur.n = 0;
}

void gt__undel_acked(uint64_t acked)
{
    while (s_n && slots[s_head].end <= acked) {
        s_head = (s_head + 1) % GT__UNDEL_SLOTS;
        s_n--;
    }
}

void gt__undel_connection_lost(void)
{
    while (s_n) {
        slot_lose(&slots[s_head]);
        s_head = (s_head + 1) % GT__UNDEL_SLOTS;
        s_n--;
    }
    s_head = 0;
}

void gt__undel_stream_reset(void)
{
    for (uint32_t i = 0; i < ntot; i++)
        tot[i].sent = 0;
}

void gt__undel_emit(void (*emit)(uint32_t tid, uint64_t count))
{
    for (uint32_t i = 0; i < ntot; i++)
        if (tot[i].count != tot[i].sent) {
            emit(tot[i].tid, tot[i].count);
            tot[i].sent = tot[i].count;
        }
}

void gt__undel_forget(void)
{
    s_head = s_n = 0;
    cur.n = 0;
    ntot = 0;
    memset(tot, 0, sizeof(tot));
}
