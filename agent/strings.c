/*
 * String interning: an open-addressing hash table (ids, keyed by text)
 * guarded by one mutex, over an append-only, segmented list of definitions.
 *
 * Interning is a cold path (names are interned once per call site, module
 * or thread), so one lock is simpler than a lock-free table and costs
 * nothing measurable. Readers of definitions (the streamer building a
 * chunk, the crash handler) never take the lock: a list entry is complete
 * before the release store that makes its id countable.
 */
#include "agent/strings.h"

#include <errno.h>
#include <pthread.h>

#include "agent/internal.h"
#include "common/alloc.h"
#include "common/util.h"

#define SEG_BITS 10u
#define SEG_SIZE (1u << SEG_BITS)
#define SEG_COUNT 4096u /* up to 4M distinct strings */

struct str_entry {
    const char *s;
    uint32_t len;
    uint32_t hash;
};

static struct str_entry *_Atomic log_seg[SEG_COUNT];
static _Atomic uint32_t log_count;

static pthread_mutex_t intern_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t *table;      /* ids, 0 = empty slot */
static uint32_t table_cap;   /* power of two */

static uint32_t hash_bytes(const char *s, size_t len)
{
    uint64_t h = gt__fnv1a64(GT__FNV64_INIT, s, len);

    return (uint32_t)(h ^ (h >> 32));
}

static struct str_entry *entry(uint32_t id)
{
    struct str_entry *seg =
        atomic_load_explicit(&log_seg[(id - 1) >> SEG_BITS], memory_order_acquire);

    return seg ? &seg[(id - 1) & (SEG_SIZE - 1)] : NULL;
}

uint32_t gt__strings_count(void)
{
    return atomic_load_explicit(&log_count, memory_order_acquire);
}

int gt__strings_get(uint32_t id, const char **s, uint32_t *len)
{
    struct str_entry *e;

    if (id == 0 || id > gt__strings_count())
        return -ENOENT;
    e = entry(id);
    if (!e)
        return -ENOENT;
    *s = e->s;
    *len = e->len;
    return 0;
}

int gt__strings_record(uint32_t id, uint8_t *out, uint32_t room)
{
    struct gt_r_string r;
    const char *s;
    uint32_t len;

    if (gt__strings_get(id, &s, &len) < 0)
        return -ENOENT;
    if (sizeof(r) + len > room)
        return 0;
    r.h.type = GT_R_STRING;
    r.h.size = (uint16_t)(sizeof(r) + len);
    r.id = id;
    memcpy(out, &r, sizeof(r));
    memcpy(out + sizeof(r), s, len);
    return (int)(sizeof(r) + len);
}

/* Called with the lock held. @return 0 or -ENOMEM. */
static int table_grow(void)
{
    uint32_t ncap = table_cap ? table_cap * 2 : 1024;
    uint32_t *nt = gt__calloc(ncap, sizeof(*nt));
    uint32_t n = atomic_load_explicit(&log_count, memory_order_relaxed);

    if (!nt)
        return -ENOMEM;
    for (uint32_t id = 1; id <= n; id++) {
        uint32_t i = entry(id)->hash & (ncap - 1);
        while (nt[i])
            i = (i + 1) & (ncap - 1);
        nt[i] = id;
    }
    gt__free(table);
    table = nt;
    table_cap = ncap;
    return 0;
}

/* Called with the lock held. @return the new id, or 0. */
static uint32_t log_append(const char *s, size_t len, uint32_t hash)
{
    uint32_t id = atomic_load_explicit(&log_count, memory_order_relaxed) + 1;
    uint32_t seg = (id - 1) >> SEG_BITS;
    struct str_entry *e;
    char *copy;

    if (seg >= SEG_COUNT)
        return 0;
    if (!atomic_load_explicit(&log_seg[seg], memory_order_relaxed)) {
        struct str_entry *m = gt__calloc(SEG_SIZE, sizeof(*m));
        if (!m)
            return 0;
        atomic_store_explicit(&log_seg[seg], m, memory_order_release);
    }
    copy = gt__malloc(len + 1);
    if (!copy)
        return 0;
    memcpy(copy, s, len);
    copy[len] = '\0';
    e = entry(id);
    e->s = copy;
    e->len = (uint32_t)len;
    e->hash = hash;
    atomic_store_explicit(&log_count, id, memory_order_release);
    return id;
}

uint32_t gt__intern(const char *s, size_t len)
{
    uint32_t hash, id = 0, i;

    if (!s)
        return 0;
    if (len > GT_STRING_MAX)
        len = GT_STRING_MAX;
    hash = hash_bytes(s, len);
    pthread_mutex_lock(&intern_lock);
    if ((atomic_load_explicit(&log_count, memory_order_relaxed) + 1) * 2 >= table_cap &&
        table_grow() < 0)
        goto out_unlock;
    for (i = hash & (table_cap - 1); table[i]; i = (i + 1) & (table_cap - 1)) {
        struct str_entry *e = entry(table[i]);
        if (e->hash == hash && e->len == len && memcmp(e->s, s, len) == 0) {
            id = table[i];
            goto out_unlock;
        }
    }
    id = log_append(s, len, hash);
    if (id)
        table[i] = id;
out_unlock:
    pthread_mutex_unlock(&intern_lock);
    return id;
}

void gt__strings_fork_prepare(void)
{
    pthread_mutex_lock(&intern_lock);
}

void gt__strings_fork_parent(void)
{
    pthread_mutex_unlock(&intern_lock);
}

void gt__strings_fork_child(void)
{
    pthread_mutex_unlock(&intern_lock);
}
