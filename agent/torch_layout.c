/*
 * Where does a torch::autograd::Node keep its sequence number and the id of
 * the thread that created it?
 *
 * Both are plain uint64_t members (sequence_nr_, thread_id_) whose offsets
 * depend on the torch version and build (24 and 48 on 1.13 and 2.x for
 * x86-64 today, but nothing promises that). Reading a guessed offset would
 * put garbage in the trace, so the offsets are learned and validated at run
 * time against ground truth the agent sees anyway:
 *
 *   - every node creation goes through the get_and_increment hook, which
 *     knows the sequence number it hands out and the torch thread id of the
 *     creating thread (the node stores exactly that pair);
 *   - every backward node goes through the evaluate_function hook with the
 *     node's address.
 *
 * While learning, creations are noted in a fixed lock-free set of
 * (seq, tid) keys, and each backward node is one observation: for every
 * pair of candidate word offsets (s, t) in the node's first 128 bytes (all
 * Node subclasses are larger), the pair survives only if the words at s and
 * t form a key that was created (seq = UINT64_MAX is neutral: AccumulateGrad
 * has no number). Small integers are common in a node (topological number,
 * a bool's word), so a single match proves little; but the first node of
 * every pass is one nobody points to (has_parent_ false) and deep nodes have
 * large topological numbers, so wrong pairs die quickly while the true pair
 * matches every single node. The layout settles at the end of a backward
 * pass when exactly one pair survived with at least GT_LAYOUT_MIN_SUPPORT
 * matches. When no pair survives three passes in a row (or several keep
 * surviving for six), learning stops, one warning goes into the trace, and
 * backward nodes carry seq = UINT64_MAX from then on: less detail, never
 * wrong detail.
 *
 * Before the layout settles, a node's values are still reported when the
 * preferred surviving pair matched a created key for that very node, so
 * the first pass is not lost.
 *
 * Costs: learning is a few hundred hash probes per backward node for the
 * first pass or two; afterwards a read is two loads, creation noting is one
 * relaxed load and a branch. Memory: 512 KiB of zero pages, touched only
 * while learning.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "agent/internal.h"
#include "agent/torch.h"

#define GT_LAYOUT_WORDS 16          /* candidate words: offsets 8 .. 120 */
#define GT_LAYOUT_FIRST 1           /* word 0 is the vtable pointer */
#define GT_LAYOUT_MIN_SUPPORT 8     /* matches needed to settle */
#define GT_LAYOUT_FAIL_PASSES 3     /* passes with no survivor: give up */
#define GT_LAYOUT_AMBIG_PASSES 6    /* passes with several survivors */
#define GT_LAYOUT_BUCKETS 16384     /* x 4 slots = 64 Ki created keys */
#define GT_LAYOUT_WAYS 4
#define GT_LAYOUT_TID_LIMIT 0x10000u
#define GT_LAYOUT_SEQ_LIMIT (1ull << 40)

/* Offsets torch 1.13 and 2.x use; preferred among equally good survivors. */
#define GT_LAYOUT_PRIOR_SEQ 3
#define GT_LAYOUT_PRIOR_TID 6

enum { LEARNING = 0, SETTLED = 1, FAILED = 2 };

static _Atomic int state = LEARNING;
static int seq_word = -1, tid_word = -1;   /* published by state=SETTLED */

static _Atomic uint64_t created[GT_LAYOUT_BUCKETS][GT_LAYOUT_WAYS];

/* Candidate bookkeeping, only touched under learn_lock. */
static pthread_mutex_t learn_lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t dead[GT_LAYOUT_WORDS][GT_LAYOUT_WORDS];
static uint32_t support[GT_LAYOUT_WORDS][GT_LAYOUT_WORDS];
static unsigned failed_passes, ambiguous_passes;
/* Largest value each tid word showed in a match: a bool's word never
 * exceeds 1, a thread id does once a second thread creates nodes. */
static uint64_t tid_max[GT_LAYOUT_WORDS][GT_LAYOUT_WORDS];
/* Lock-free copy of !dead[prior]: lets a node seen while another thread
 * holds learn_lock still be validated (against the prior layout). */
static _Atomic int prior_alive_flag = 1;
/*
 * (pair, key) combinations seen in the current pass. A node runs once per
 * pass, so the true (seq, tid) pair never shows the same key twice in one;
 * counters shared by many nodes (topological number, flags, zeroes)
 * repeat at once. Keyed per pair, not per word, because two threads'
 * forwards hand out the same sequence numbers.
 */
#define GT_LAYOUT_SEEN 16384
static uint64_t seen[GT_LAYOUT_SEEN];
static unsigned seen_n;

/* A key is never 0 (0 marks an empty slot): tid >= 1 in torch, plus 1. */
static inline uint64_t make_key(uint64_t seq, uint64_t tid)
{
    return ((seq << 16) | tid) + 1;
}

static inline _Atomic uint64_t *bucket_of(uint64_t key)
{
    uint64_t h = key * 0x9e3779b97f4a7c15ull;
    return created[(h >> 40) & (GT_LAYOUT_BUCKETS - 1)];
}

int gt__torch_layout_learning(void)
{
    return atomic_load_explicit(&state, memory_order_relaxed) == LEARNING;
}

void gt__torch_layout_note_created(uint64_t seq, uint64_t tid)
{
    if (atomic_load_explicit(&state, memory_order_relaxed) != LEARNING)
        return;
    if (seq >= GT_LAYOUT_SEQ_LIMIT || tid == 0 || tid >= GT_LAYOUT_TID_LIMIT)
        return;
    uint64_t key = make_key(seq, tid);
    _Atomic uint64_t *b = bucket_of(key);
    for (int i = 0; i < GT_LAYOUT_WAYS; i++) {
        uint64_t expect = 0;
        if (atomic_compare_exchange_strong_explicit(
                &b[i], &expect, key, memory_order_relaxed,
                memory_order_relaxed) || expect == key)
            return;
    }
    /*
     * Bucket full: overwrite one slot. The evicted key's node can then kill
     * the true pair, which costs at most a retry on the next pass; with 64 Ki
     * keys this needs a forward creating tens of thousands of nodes.
     */
    atomic_store_explicit(&b[key & (GT_LAYOUT_WAYS - 1)], key,
                          memory_order_relaxed);
}

static int was_created(uint64_t seq, uint64_t tid)
{
    if (seq >= GT_LAYOUT_SEQ_LIMIT || tid == 0 || tid >= GT_LAYOUT_TID_LIMIT)
        return 0;
    uint64_t key = make_key(seq, tid);
    _Atomic uint64_t *b = bucket_of(key);
    for (int i = 0; i < GT_LAYOUT_WAYS; i++)
        if (atomic_load_explicit(&b[i], memory_order_relaxed) == key)
            return 1;
    return 0;
}

/* Under learn_lock: the surviving pair reads are taken from, or -1. */
static int preferred_pair(int *s_out, int *t_out)
{
    int bs = -1, bt = -1;
    uint32_t best = 0;
    if (!dead[GT_LAYOUT_PRIOR_SEQ][GT_LAYOUT_PRIOR_TID] &&
        support[GT_LAYOUT_PRIOR_SEQ][GT_LAYOUT_PRIOR_TID] > 0) {
        *s_out = GT_LAYOUT_PRIOR_SEQ;
        *t_out = GT_LAYOUT_PRIOR_TID;
        return GT_LAYOUT_PRIOR_SEQ;
    }
    for (int s = GT_LAYOUT_FIRST; s < GT_LAYOUT_WORDS; s++)
        for (int t = GT_LAYOUT_FIRST; t < GT_LAYOUT_WORDS; t++)
            if (s != t && !dead[s][t] && support[s][t] > best) {
                best = support[s][t];
                bs = s;
                bt = t;
            }
    *s_out = bs;
    *t_out = bt;
    return bs;
}

/*
 * Under learn_lock: notes that pair (s, t) read `key` in this pass.
 * @return 1 when it already read that key in this pass.
 */
static int seen_before(int s, int t, uint64_t key)
{
    /* key < 2^56 (seq < 2^40), so this is injective; splitmix64's
     * finaliser is a bijection, so fingerprints never collide. */
    uint64_t x = (key << 8) | (uint64_t)(s << 4) | (uint64_t)t;
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    if (x == 0)
        x = 1; /* 0 marks an empty slot */
    if (seen_n >= GT_LAYOUT_SEEN / 2)
        return 0; /* a big pass: enough evidence already, stop tracking */
    for (size_t i = (size_t)(x >> 50) & (GT_LAYOUT_SEEN - 1);;
         i = (i + 1) & (GT_LAYOUT_SEEN - 1)) {
        if (seen[i] == x)
            return 1;
        if (seen[i] == 0) {
            seen[i] = x;
            seen_n++;
            return 0;
        }
    }
}

/* Under learn_lock: one backward node observed. */
static void observe(const uint64_t *w)
{
    for (int s = GT_LAYOUT_FIRST; s < GT_LAYOUT_WORDS; s++) {
        if (w[s] == UINT64_MAX)
            continue; /* AccumulateGrad and friends: no sequence number */
        for (int t = GT_LAYOUT_FIRST; t < GT_LAYOUT_WORDS; t++) {
            if (s == t || dead[s][t])
                continue;
            if (was_created(w[s], w[t]) &&
                !seen_before(s, t, make_key(w[s], w[t]))) {
                support[s][t]++;
                if (w[t] > tid_max[s][t])
                    tid_max[s][t] = w[t];
            } else {
                dead[s][t] = 1;
            }
        }
    }
}

static void reset_pass(void)
{
    memset(seen, 0, sizeof(seen));
    seen_n = 0;
}

static void reset_candidates(void)
{
    atomic_store_explicit(&prior_alive_flag, 1, memory_order_relaxed);
    memset(dead, 0, sizeof(dead));
    memset(support, 0, sizeof(support));
    memset(tid_max, 0, sizeof(tid_max));
}

static void settle(int s, int t)
{
    seq_word = s;
    tid_word = t;
    atomic_store_explicit(&state, SETTLED, memory_order_release);
    GT_LOG("torch: node layout settled: seq at +%d, thread id at +%d",
           8 * seq_word, 8 * tid_word);
}

int gt__torch_layout_read(const void *node, uint64_t *seq, uint64_t *tid)
{
    int st = atomic_load_explicit(&state, memory_order_acquire);
    const unsigned char *p = node;

    *seq = UINT64_MAX;
    *tid = 0;
    if (GT_LIKELY(st == SETTLED)) {
        memcpy(seq, p + 8 * seq_word, sizeof(*seq));
        memcpy(tid, p + 8 * tid_word, sizeof(*tid));
        return 1;
    }
    if (st == FAILED || !node)
        return 0;

    uint64_t w[GT_LAYOUT_WORDS];
    memcpy(w, p, sizeof(w));
    /*
     * Never wait. A node seen while another thread learns is validated
     * alone against the prior layout (still sound: the pair it reads must
     * be one that was created), or stays unknown.
     */
    if (pthread_mutex_trylock(&learn_lock) != 0) {
        if (atomic_load_explicit(&prior_alive_flag, memory_order_relaxed) &&
            was_created(w[GT_LAYOUT_PRIOR_SEQ], w[GT_LAYOUT_PRIOR_TID])) {
            *seq = w[GT_LAYOUT_PRIOR_SEQ];
            *tid = w[GT_LAYOUT_PRIOR_TID];
            return 1;
        }
        return 0;
    }
    int ok = 0;
    if (atomic_load_explicit(&state, memory_order_relaxed) == LEARNING) {
        observe(w);
        atomic_store_explicit(&prior_alive_flag,
                              !dead[GT_LAYOUT_PRIOR_SEQ][GT_LAYOUT_PRIOR_TID],
                              memory_order_relaxed);
        int s, t;
        if (preferred_pair(&s, &t) >= 0 && was_created(w[s], w[t])) {
            *seq = w[s];
            *tid = w[t];
            ok = 1;
        }
    }
    pthread_mutex_unlock(&learn_lock);
    return ok;
}

void gt__torch_layout_pass_done(void)
{
    if (atomic_load_explicit(&state, memory_order_relaxed) != LEARNING)
        return;
    if (pthread_mutex_trylock(&learn_lock) != 0)
        return;
    if (atomic_load_explicit(&state, memory_order_relaxed) != LEARNING)
        goto out_unlock;

    int survivors = 0, s_best = -1, t_best = -1, one_seq_word = 1;
    int big_tid = 0, s_big = -1, t_big = -1;
    for (int s = GT_LAYOUT_FIRST; s < GT_LAYOUT_WORDS; s++)
        for (int t = GT_LAYOUT_FIRST; t < GT_LAYOUT_WORDS; t++)
            if (s != t && !dead[s][t] &&
                support[s][t] >= GT_LAYOUT_MIN_SUPPORT) {
                if (survivors++ && s != s_best)
                    one_seq_word = 0;
                s_best = s;
                t_best = t;
                if (tid_max[s][t] > 1) {
                    big_tid++;
                    s_big = s;
                    t_big = t;
                }
            }
    reset_pass();
    int prior_alive = !dead[GT_LAYOUT_PRIOR_SEQ][GT_LAYOUT_PRIOR_TID] &&
                      support[GT_LAYOUT_PRIOR_SEQ][GT_LAYOUT_PRIOR_TID] >=
                          GT_LAYOUT_MIN_SUPPORT;

    if (survivors == 1) {
        settle(s_best, t_best);
        goto out_unlock;
    }
    if (survivors > 1) {
        /*
         * Typical single-threaded case: the sequence word is certain, but
         * with one forward thread (id 1) any word holding 1 (has_parent_)
         * matches as well as thread_id_. The known layout decides; an
         * unknown one needs a second thread's nodes (an id above 1), or
         * gives up after a few passes rather than guess.
         */
        if (one_seq_word && prior_alive) {
            settle(GT_LAYOUT_PRIOR_SEQ, GT_LAYOUT_PRIOR_TID);
        } else if (one_seq_word && big_tid == 1) {
            settle(s_big, t_big);
        } else if (++ambiguous_passes >= GT_LAYOUT_AMBIG_PASSES) {
            goto out_fail;
        }
        goto out_unlock;
    }
    /*
     * Nobody survived with enough matches: either the pass was too small
     * (keep the evidence) or everything died (start over, the set may have
     * evicted keys).
     */
    int any_alive = 0;
    for (int s = GT_LAYOUT_FIRST; s < GT_LAYOUT_WORDS && !any_alive; s++)
        for (int t = GT_LAYOUT_FIRST; t < GT_LAYOUT_WORDS; t++)
            if (s != t && !dead[s][t]) {
                any_alive = 1;
                break;
            }
    if (!any_alive) {
        if (++failed_passes >= GT_LAYOUT_FAIL_PASSES)
            goto out_fail;
        reset_candidates();
    }
    goto out_unlock;

out_fail:
    atomic_store_explicit(&state, FAILED, memory_order_release);
    gt__warn_once(GT_TORCH_WARN_LAYOUT,
                  "torch: could not locate sequence_nr/thread_id in "
                  "autograd nodes; backward nodes carry no sequence numbers");
out_unlock:
    pthread_mutex_unlock(&learn_lock);
}

int gt__torch_layout_offsets(int *seq_off, int *tid_off)
{
    if (atomic_load_explicit(&state, memory_order_acquire) != SETTLED) {
        *seq_off = *tid_off = -1;
        return -1;
    }
    *seq_off = 8 * seq_word;
    *tid_off = 8 * tid_word;
    return 0;
}
