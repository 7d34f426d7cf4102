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
#define GT_LAYOUT_SEQ_LIMIT (1ull << 47)

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
        bs = GT_LAYOUT_PRIOR_SEQ;
        bt = GT_LAYOUT_PRIOR_TID;
        best = support[bs][bt];
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

/* Under learn_lock: one backward node observed. */
static void observe(const uint64_t *w)
{
    for (int s = GT_LAYOUT_FIRST; s < GT_LAYOUT_WORDS; s++) {
        if (w[s] == UINT64_MAX)
            continue; /* AccumulateGrad and friends: no sequence number */
        for (int t = GT_LAYOUT_FIRST; t < GT_LAYOUT_WORDS; t++) {
            if (s == t || dead[s][t])
                continue;
            if (was_created(w[s], w[t]))
                support[s][t]++;
            else
                dead[s][t] = 1;
        }
    }
}

static void reset_candidates(void)
{
    memset(dead, 0, sizeof(dead));
    memset(support, 0, sizeof(support));
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
    /* Never wait: a node seen while another thread learns is just unknown. */
    if (pthread_mutex_trylock(&learn_lock) != 0)
        return 0;
    int ok = 0;
    if (atomic_load_explicit(&state, memory_order_relaxed) == LEARNING) {
        observe(w);
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

    int survivors = 0, s_best = -1, t_best = -1;
    for (int s = GT_LAYOUT_FIRST; s < GT_LAYOUT_WORDS; s++)
        for (int t = GT_LAYOUT_FIRST; t < GT_LAYOUT_WORDS; t++)
            if (s != t && !dead[s][t] &&
                support[s][t] >= GT_LAYOUT_MIN_SUPPORT) {
                survivors++;
                s_best = s;
                t_best = t;
            }

    if (survivors == 1) {
        seq_word = s_best;
        tid_word = t_best;
        atomic_store_explicit(&state, SETTLED, memory_order_release);
        GT_LOG("torch: node layout settled: seq at +%d, thread id at +%d",
               8 * seq_word, 8 * tid_word);
        goto out_unlock;
    }
    if (survivors > 1) {
        /* Too little discriminating evidence yet (tiny graphs): keep going. */
        if (++ambiguous_passes >= GT_LAYOUT_AMBIG_PASSES &&
            !dead[GT_LAYOUT_PRIOR_SEQ][GT_LAYOUT_PRIOR_TID] &&
            support[GT_LAYOUT_PRIOR_SEQ][GT_LAYOUT_PRIOR_TID] >=
                GT_LAYOUT_MIN_SUPPORT) {
            seq_word = GT_LAYOUT_PRIOR_SEQ;
            tid_word = GT_LAYOUT_PRIOR_TID;
            atomic_store_explicit(&state, SETTLED, memory_order_release);
        } else if (ambiguous_passes >= GT_LAYOUT_AMBIG_PASSES) {
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
