/*
 * Where does a torch::autograd::Node keep its sequence number and the id of
 * the thread that created it?
 *
 * Both are plain uint64_t members (sequence_nr_, thread_id_) whose offsets
 * depend on the torch version and build: +24/+48 on Debian's 1.13, +16/+40
 * on PyPI's 2.15 (x86-64), and nothing promises the next release. Reading
 * a guessed offset would put garbage in the trace, so the offsets are
 * learned and validated at run time against ground truth the agent sees
 * anyway:
 *
 *   - every node creation goes through the get_and_increment hook, which
 *     knows the sequence number it hands out and the torch thread id of the
 *     creating thread (the node stores exactly that pair);
 *   - every backward node goes through the evaluate_function hook with the
 *     node's address.
 *
 * While learning, creations are noted in a fixed lock-free set of
 * (seq, tid) keys, and each backward node is one observation: every pair
 * of candidate word offsets (s, t) in the node's first 128 bytes (all Node
 * subclasses are larger) stays alive only if the words at s and t form a
 * key that was created, and not one this pair already read in the current
 * pass (a node runs once per pass; seq = UINT64_MAX is neutral:
 * AccumulateGrad has no number). Counters shared by many nodes
 * (topological number, flags, zeroes) repeat within a pass and die; so do
 * pointers and anything else that is not a created key.
 *
 * What is reported while learning must already be right, so a node's
 * values are reported only when every live pair reads the same (seq, tid)
 * from it: the true pair is always alive, so agreement means the value is
 * the true one. (Early in the first pass, a topological number can equal
 * the sequence number along a chain; unanimity just waits for them to
 * disagree.)
 *
 * The fastest evidence comes from the forward: the agent also interposes
 * torch::autograd::impl::set_gradient_edge (which attaches a freshly
 * created node to its output tensor), so it sees each new node right after
 * get_and_increment handed out its number on that thread. The pair that
 * holds exactly that (seq, tid) in nearly every fresh node, with no rival
 * close, is the layout, usually settled within the first forward, before
 * any backward node has to be reported; a known layout (below) that holds
 * in every fresh node settles as soon as every rival has failed once.
 *
 * From backward nodes alone, the layout settles at the end of a pass when
 * exactly one pair survived with at least GT__LAYOUT_MIN_SUPPORT matches. One ambiguity is
 * structural: with a single forward thread (torch id 1), a word holding a
 * bool that is true (has_parent_) matches as well as thread_id_. It is
 * resolved by a known layout among the survivors, or by a thread id above 1
 * once a second thread creates nodes. When nothing can be decided (no
 * survivor for three passes, or ambiguity for six), learning stops, one
 * warning goes into the trace, and backward nodes carry seq = UINT64_MAX
 * from then on: less detail, never wrong detail.
 *
 * Costs: learning is a few hundred hash probes per backward node for the
 * first pass or two; afterwards a read is two loads, creation noting is one
 * relaxed load and a branch. Memory: about 650 KiB of zero pages, touched
 * only while learning.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "agent/internal.h"
#include "agent/torch.h"

#define GT__LAYOUT_WORDS 16          /* candidate words: offsets 8 .. 120 */
#define GT__LAYOUT_FIRST 1           /* word 0 is the vtable pointer */
#define GT__LAYOUT_MIN_SUPPORT 8     /* matches needed to settle */
#define GT__LAYOUT_FAIL_PASSES 3     /* passes with no survivor: give up */
#define GT__LAYOUT_AMBIG_PASSES 6    /* passes with several survivors */
#define GT__LAYOUT_BUCKETS 16384     /* x 4 slots = 64 Ki created keys */
#define GT__LAYOUT_WAYS 4
#define GT__LAYOUT_TID_LIMIT 0x10000u
#define GT__LAYOUT_SEQ_LIMIT (1ull << 40)

/* Known layouts (word indices: seq, tid), x86-64: 1.13 and 2.15. They
 * only break the has_parent_/thread_id_ tie among survivors. */
static const int known[][2] = {{3, 6}, {2, 5}};
#define GT__LAYOUT_KNOWN (int)(sizeof(known) / sizeof(known[0]))

enum { LEARNING = 0, SETTLED = 1, FAILED = 2 };

static _Atomic int state = LEARNING;
static int seq_word = -1, tid_word = -1;   /* published by state=SETTLED */

static _Atomic uint64_t created[GT__LAYOUT_BUCKETS][GT__LAYOUT_WAYS];

/* Candidate bookkeeping, only touched under learn_lock. */
static pthread_mutex_t learn_lock = PTHREAD_MUTEX_INITIALIZER;
/*
 * Creation-time evidence (gt__torch_layout_note_edge): how often each pair
 * held exactly the (seq, tid) just handed out on the creating thread, out
 * of edge_obs freshly created nodes.
 */
static uint32_t edge_hits[GT__LAYOUT_WORDS][GT__LAYOUT_WORDS];
static uint32_t edge_obs;
#define GT__LAYOUT_EDGE_OBS 12       /* fresh nodes before deciding */

/* Written under learn_lock, read lock-free by unanimous(). */
static _Atomic uint8_t dead[GT__LAYOUT_WORDS][GT__LAYOUT_WORDS];
static uint32_t support[GT__LAYOUT_WORDS][GT__LAYOUT_WORDS];
static unsigned failed_passes, ambiguous_passes;
/* Largest value each tid word showed in a match: a bool's word never
 * exceeds 1, a thread id does once a second thread creates nodes. */
static uint64_t tid_max[GT__LAYOUT_WORDS][GT__LAYOUT_WORDS];
/*
 * (pair, key) combinations seen in the current pass. A node runs once per
 * pass, so the true (seq, tid) pair never shows the same key twice in one;
 * counters shared by many nodes (topological number, flags, zeroes)
 * repeat at once. Keyed per pair, not per word, because two threads'
 * forwards hand out the same sequence numbers.
 */
#define GT__LAYOUT_SEEN 16384
static uint64_t seen[GT__LAYOUT_SEEN];
static unsigned seen_n;

/* A key is never 0 (0 marks an empty slot): tid >= 1 in torch, plus 1. */
static inline uint64_t make_key(uint64_t seq, uint64_t tid)
{
    return ((seq << 16) | tid) + 1;
}

static inline _Atomic uint64_t *bucket_of(uint64_t key)
{
    uint64_t h = key * 0x9e3779b97f4a7c15ull;
    return created[(h >> 40) & (GT__LAYOUT_BUCKETS - 1)];
}

int gt__torch_layout_learning(void)
{
    return atomic_load_explicit(&state, memory_order_relaxed) == LEARNING;
}

void gt__torch_layout_note_created(uint64_t seq, uint64_t tid)
{
    if (atomic_load_explicit(&state, memory_order_relaxed) != LEARNING)
        return;
    if (seq >= GT__LAYOUT_SEQ_LIMIT || tid == 0 || tid >= GT__LAYOUT_TID_LIMIT)
        return;
    uint64_t key = make_key(seq, tid);
    _Atomic uint64_t *b = bucket_of(key);
    for (int i = 0; i < GT__LAYOUT_WAYS; i++) {
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
    atomic_store_explicit(&b[key & (GT__LAYOUT_WAYS - 1)], key,
                          memory_order_relaxed);
}

static int was_created(uint64_t seq, uint64_t tid)
{
    if (seq >= GT__LAYOUT_SEQ_LIMIT || tid == 0 || tid >= GT__LAYOUT_TID_LIMIT)
        return 0;
    uint64_t key = make_key(seq, tid);
    _Atomic uint64_t *b = bucket_of(key);
    for (int i = 0; i < GT__LAYOUT_WAYS; i++)
        if (atomic_load_explicit(&b[i], memory_order_relaxed) == key)
            return 1;
    return 0;
}

static inline int is_dead(int s, int t)
{
    return atomic_load_explicit(&dead[s][t], memory_order_relaxed);
}

static inline void kill(int s, int t)
{
    atomic_store_explicit(&dead[s][t], 1, memory_order_relaxed);
}

/*
 * The (seq, tid) every live pair reads from the node's words w, if they
 * all agree on one that was created. Lock-free: any thread, any time.
 * @return 1 with *seq/ *tid set, else 0.
 */
static int unanimous(const uint64_t *w, uint64_t *seq, uint64_t *tid)
{
    int any = 0;
    uint64_t vs = 0, vt = 0;
    for (int s = GT__LAYOUT_FIRST; s < GT__LAYOUT_WORDS; s++)
        for (int t = GT__LAYOUT_FIRST; t < GT__LAYOUT_WORDS; t++) {
            if (s == t || is_dead(s, t))
                continue;
            if (!any) {
                vs = w[s];
                vt = w[t];
                any = 1;
            } else if (w[s] != vs || w[t] != vt) {
                return 0;
            }
        }
    if (!any || vs == UINT64_MAX || !was_created(vs, vt))
        return 0;
    *seq = vs;
    *tid = vt;
    return 1;
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
    if (seen_n >= GT__LAYOUT_SEEN / 2)
        return 0; /* a big pass: enough evidence already, stop tracking */
    for (size_t i = (size_t)(x >> 50) & (GT__LAYOUT_SEEN - 1);;
         i = (i + 1) & (GT__LAYOUT_SEEN - 1)) {
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
    for (int s = GT__LAYOUT_FIRST; s < GT__LAYOUT_WORDS; s++) {
        if (w[s] == UINT64_MAX)
            continue; /* AccumulateGrad and friends: no sequence number */
        for (int t = GT__LAYOUT_FIRST; t < GT__LAYOUT_WORDS; t++) {
            if (s == t || is_dead(s, t))
                continue;
            if (was_created(w[s], w[t]) &&
                !seen_before(s, t, make_key(w[s], w[t]))) {
                support[s][t]++;
                if (w[t] > tid_max[s][t])
                    tid_max[s][t] = w[t];
            } else {
                kill(s, t);
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
    for (int s = 0; s < GT__LAYOUT_WORDS; s++)
        for (int t = 0; t < GT__LAYOUT_WORDS; t++)
            atomic_store_explicit(&dead[s][t], 0, memory_order_relaxed);
    memset(support, 0, sizeof(support));
    memset(tid_max, 0, sizeof(tid_max));
}

static void settle(int s, int t)
{
    seq_word = s;
    tid_word = t;
    atomic_store_explicit(&state, SETTLED, memory_order_release);
    GT__DIAG("torch: node layout settled: seq at +%d, thread id at +%d",
             8 * seq_word, 8 * tid_word);
}

int gt__torch_layout_read(const void *node, uint64_t *seq, uint64_t *tid)
{
    int st = atomic_load_explicit(&state, memory_order_acquire);
    const unsigned char *p = node;

    *seq = UINT64_MAX;
    *tid = 0;
    if (GT__LIKELY(st == SETTLED)) {
        memcpy(seq, p + 8 * seq_word, sizeof(*seq));
        memcpy(tid, p + 8 * tid_word, sizeof(*tid));
        return 1;
    }
    if (st == FAILED || !node)
        return 0;

    uint64_t w[GT__LAYOUT_WORDS];
    memcpy(w, p, sizeof(w));
    /*
     * Never wait: a node seen while another thread holds the lock is not an
     * observation, but can still be reported when the live pairs agree.
     */
    if (pthread_mutex_trylock(&learn_lock) == 0) {
        if (atomic_load_explicit(&state, memory_order_relaxed) == LEARNING)
            observe(w);
        pthread_mutex_unlock(&learn_lock);
    }
    return unanimous(w, seq, tid);
}

/*
 * Under learn_lock: settles from creation-time evidence when it is clear.
 * The true pair holds the fresh (seq, tid) for nearly every node (an op
 * that creates a second node before attaching the first is the
 * exception); a topological number equals the sequence number only by
 * coincidence, and has_parent_ is still false on a fresh node. Normally
 * one pair must be near-perfect with no rival close; at the first backward
 * pass (urgent), a tiny forward's few fresh nodes must all agree.
 */
static int is_known(int s, int t);

static void decide_from_edges(int urgent)
{
    int best_s = -1, best_t = -1;
    uint32_t best = 0, second = 0;
    for (int s = GT__LAYOUT_FIRST; s < GT__LAYOUT_WORDS; s++)
        for (int t = GT__LAYOUT_FIRST; t < GT__LAYOUT_WORDS; t++) {
            uint32_t h = edge_hits[s][t];
            if (h > best) {
                second = best;
                best = h;
                best_s = s;
                best_t = t;
            } else if (h > second) {
                second = h;
            }
        }
    if (!urgent && best >= edge_obs - edge_obs / 10 &&
        second <= edge_obs / 2)
        settle(best_s, best_t);
    else if (!urgent && best == edge_obs && second < best &&
             is_known(best_s, best_t))
        /* A known layout that held in every fresh node, against a rival
         * that failed once: a topological number that is 1, like the
         * forward thread's id, in a model whose nodes mostly take leaves
         * (FSDP2's first forward). */
        settle(best_s, best_t);
    else if (urgent && edge_obs >= 4 && best == edge_obs &&
             second <= edge_obs / 2)
        settle(best_s, best_t);
}

void gt__torch_layout_pass_begin(void)
{
    if (atomic_load_explicit(&state, memory_order_relaxed) != LEARNING)
        return;
    if (pthread_mutex_trylock(&learn_lock) != 0)
        return;
    if (atomic_load_explicit(&state, memory_order_relaxed) == LEARNING)
        decide_from_edges(1);
    pthread_mutex_unlock(&learn_lock);
}

void gt__torch_layout_note_edge(const void *node, uint64_t seq, uint64_t tid)
{
    if (atomic_load_explicit(&state, memory_order_relaxed) != LEARNING ||
        !node)
        return;
    uint64_t w[GT__LAYOUT_WORDS];
    memcpy(w, node, sizeof(w));
    if (pthread_mutex_trylock(&learn_lock) != 0)
        return;
    if (atomic_load_explicit(&state, memory_order_relaxed) != LEARNING)
        goto out_unlock;
    edge_obs++;
    for (int s = GT__LAYOUT_FIRST; s < GT__LAYOUT_WORDS; s++)
        for (int t = GT__LAYOUT_FIRST; t < GT__LAYOUT_WORDS; t++)
            if (s != t && w[s] == seq && w[t] == tid)
                edge_hits[s][t]++;
    if (edge_obs >= GT__LAYOUT_EDGE_OBS)
        decide_from_edges(0);
    if (edge_obs >= 8 * GT__LAYOUT_EDGE_OBS) {
        /* Undecided after many: start a fresh window of evidence. */
        edge_obs = 0;
        memset(edge_hits, 0, sizeof(edge_hits));
    }
out_unlock:
    pthread_mutex_unlock(&learn_lock);
}

static int is_known(int s, int t)
{
    for (int i = 0; i < GT__LAYOUT_KNOWN; i++)
        if (known[i][0] == s && known[i][1] == t)
            return 1;
    return 0;
}

void gt__torch_layout_pass_done(void)
{
    if (atomic_load_explicit(&state, memory_order_relaxed) != LEARNING)
        return;
    if (pthread_mutex_trylock(&learn_lock) != 0)
        return;
    if (atomic_load_explicit(&state, memory_order_relaxed) != LEARNING)
        goto out_unlock;

    int survivors = 0, any_alive = 0, one_seq_word = 1;
    int s_best = -1, t_best = -1;
    int n_known = 0, s_known = -1, t_known = -1;
    int n_big = 0, s_big = -1, t_big = -1;
    for (int s = GT__LAYOUT_FIRST; s < GT__LAYOUT_WORDS; s++)
        for (int t = GT__LAYOUT_FIRST; t < GT__LAYOUT_WORDS; t++) {
            if (s == t || is_dead(s, t))
                continue;
            any_alive = 1;
            if (support[s][t] < GT__LAYOUT_MIN_SUPPORT)
                continue;
            if (survivors++ && s != s_best)
                one_seq_word = 0;
            s_best = s;
            t_best = t;
            if (is_known(s, t)) {
                n_known++;
                s_known = s;
                t_known = t;
            }
            if (tid_max[s][t] > 1) {
                n_big++;
                s_big = s;
                t_big = t;
            }
        }
    reset_pass();

    if (survivors == 1) {
        settle(s_best, t_best);
    } else if (survivors > 1) {
        /* See the top of the file: has_parent_ against thread_id_. */
        if (one_seq_word && n_big == 1)
            settle(s_big, t_big);
        else if (one_seq_word && n_known == 1)
            settle(s_known, t_known);
        else if (++ambiguous_passes >= GT__LAYOUT_AMBIG_PASSES)
            goto out_fail;
    } else if (!any_alive) {
        /* Everything died (evicted keys, a pathological pass): retry. */
        if (++failed_passes >= GT__LAYOUT_FAIL_PASSES)
            goto out_fail;
        reset_candidates();
    }
    /* else: passes too small to count as evidence yet; keep learning. */
    goto out_unlock;

out_fail:
    atomic_store_explicit(&state, FAILED, memory_order_release);
    gt__warn_once(GT__TORCH_WARN_LAYOUT,
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
