/*
 * Which module owns the parameter an AccumulateGrad node accumulates into?
 *
 * AccumulateGrad (torch::autograd::AccumulateGrad) has no sequence number:
 * it is created lazily per leaf, not by a forward op, so the creation-time
 * layer of the other nodes says nothing about it. What it does keep is the
 * leaf itself: a member `Variable variable` (an at::Tensor, i.e. one
 * TensorImpl* word) after the Node base. So:
 *
 *   - the Python package registers every parameter of every model it maps
 *     (gt_torch_param: TensorImpl* -> module path id, parameter name id);
 *   - the agent learns, at run time, at which word of an AccumulateGrad
 *     node that TensorImpl* sits (+392 on Debian's 1.13, +464 on PyPI's
 *     2.15, x86-64; nothing promises the next release), and from then on
 *     reads one word and probes the table for each AccumulateGrad node.
 *
 * Learning (gt__acc_learn, a pure function the unit tests drive): each
 * AccumulateGrad node seen while the offset is unknown is scanned, from
 * word 1 up, for the first word that holds a registered TensorImpl*. The
 * Node base holds no tensor pointer and `variable` is the last member, so
 * in a parameter's node that first word is the variable. The candidate is the
 * lowest first word seen; a node is reported while learning only when its
 * first word is the candidate, and GT__ACC_SETTLE such nodes since the
 * candidate was last set settle the offset. A registered pointer below an agreed candidate
 * contradicts it (start over); GT__ACC_GIVE_UP contradictions, or
 * GT__ACC_NO_HIT nodes without any registered pointer while parameters
 * are registered, end learning with one warning (0x7404) and no
 * BWD_NODE_LAYER records afterwards.
 *
 * A word counts only if it holds a registered TensorImpl* whose autograd
 * metadata points back to this node (its grad_accumulator_), so a
 * neighbour's parameter read past the end of a leaf's node is no evidence.
 * The scan reads up to GT__ACC_WORDS words, past the end of a small node,
 * and follows two pointers; it goes through process_vm_readv on our own
 * pid, which returns what is readable instead of faulting. Where that
 * syscall is refused (seccomp), the scan reads the node in place, stops at
 * the first registered pointer (for a parameter's node its own variable,
 * inside the object) and skips the back-pointer check. Either way this
 * happens only for the first few AccumulateGrad nodes.
 *
 * The table: open addressing over GT__PARAM_SLOTS keys (TensorImpl*), each
 * with one 64-bit value (module id << 32 | name id). Registration is cold
 * and takes a mutex; lookups are lock-free (two relaxed/acquire loads per
 * probe), allocate nothing, and may run on any thread. A key is never
 * removed (a value of 0 means "no longer a parameter"), so a reader never
 * sees a slot change keys under it. Memory: 256 KiB of zero pages.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "agent/internal.h"
#include "agent/ring.h"
#include "agent/torch.h"

#define GT__PARAM_SLOTS 16384u       /* power of two */
#define GT__PARAM_MAX (GT__PARAM_SLOTS / 2) /* keep probes short */

static struct {
    _Atomic uint64_t key;
    _Atomic uint64_t val;
} slots[GT__PARAM_SLOTS];

static pthread_mutex_t param_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint32_t param_count; /* keys in use (values may be 0) */
static _Atomic uint32_t param_live;  /* registrations with a module */

static inline size_t slot_of(uint64_t key)
{
    return (size_t)((key >> 4) * 0x9e3779b97f4a7c15ull >> 50) &
           (GT__PARAM_SLOTS - 1);
}

int gt__torch_param_set(uint64_t impl, uint32_t module, uint32_t name)
{
    int rc = -ENOSPC;

    if (impl == 0)
        return -EINVAL;
    uint64_t val = ((uint64_t)module << 32) | name;
    if (module == 0)
        val = 0;
    pthread_mutex_lock(&param_lock);
    for (size_t i = slot_of(impl), n = 0; n < GT__PARAM_SLOTS;
         n++, i = (i + 1) & (GT__PARAM_SLOTS - 1)) {
        uint64_t k = atomic_load_explicit(&slots[i].key, memory_order_relaxed);
        if (k == impl) {
            uint64_t old = atomic_exchange_explicit(&slots[i].val, val,
                                                    memory_order_release);
            if (old && !val)
                atomic_fetch_sub(&param_live, 1);
            else if (!old && val)
                atomic_fetch_add(&param_live, 1);
            rc = 0;
            break;
        }
        if (k == 0) {
            if (!val) {
                rc = 0; /* forgetting an unknown key: nothing to do */
                break;
            }
            if (atomic_load_explicit(&param_count, memory_order_relaxed) >=
                GT__PARAM_MAX)
                break;
            /* Value first: a reader that finds the key finds its value. */
            atomic_store_explicit(&slots[i].val, val, memory_order_relaxed);
            atomic_store_explicit(&slots[i].key, impl, memory_order_release);
            atomic_fetch_add(&param_count, 1);
            atomic_fetch_add(&param_live, 1);
            rc = 0;
            break;
        }
    }
    pthread_mutex_unlock(&param_lock);
    return rc;
}

int gt__torch_param_find(uint64_t impl, uint32_t *module, uint32_t *name)
{
    if (impl == 0)
        return 0;
    for (size_t i = slot_of(impl), n = 0; n < GT__PARAM_SLOTS;
         n++, i = (i + 1) & (GT__PARAM_SLOTS - 1)) {
        uint64_t k = atomic_load_explicit(&slots[i].key, memory_order_acquire);
        if (k == 0)
            return 0;
        if (k == impl) {
            uint64_t v = atomic_load_explicit(&slots[i].val,
                                              memory_order_acquire);
            if (!v)
                return 0;
            *module = (uint32_t)(v >> 32);
            *name = (uint32_t)v;
            return 1;
        }
    }
    return 0;
}

int gt__torch_params_any(void)
{
    return atomic_load_explicit(&param_live, memory_order_relaxed) != 0;
}

GT_API void gt_torch_param(uint64_t tensor_impl, uint32_t module,
                           uint32_t name)
{
    if (gt__torch_param_set(tensor_impl, module, name) == -ENOSPC)
        gt__warn_once(GT__TORCH_WARN_PARAMS,
                      "torch: parameter table full; some AccumulateGrad "
                      "nodes stay without a layer");
}

/* ------------------------------------------------------------ learner */

int gt__acc_learn(struct gt__acc_learner *l, const uint64_t *w, int n,
                  int (*is_param)(uint64_t, const void *), const void *ctx)
{
    int first = -1;

    if (l->state != GT__ACC_LEARNING)
        return l->state == GT__ACC_SETTLED ? l->word : -1;
    if (n > GT__ACC_WORDS)
        n = GT__ACC_WORDS;
    for (int i = 1; i < n && first < 0; i++) /* word 0: the vtable */
        if (is_param(w[i], ctx))
            first = i;
    if (first < 0) {
        if (l->agree == 0 && ++l->misses >= GT__ACC_NO_HIT)
            l->state = GT__ACC_FAILED;
        return -1;
    }
    if (l->agree == 0 || first < l->word) {
        /* A pointer below the candidate: the candidate was wrong. */
        if (l->agree > 0 && ++l->contradictions >= GT__ACC_GIVE_UP) {
            l->state = GT__ACC_FAILED;
            return -1;
        }
        l->word = first;
        l->agree = 0;
    }
    if (first > l->word)
        return -1; /* an unregistered leaf; the pointer lies beyond it */
    if (++l->agree >= GT__ACC_SETTLE)
        l->state = GT__ACC_SETTLED;
    return first;
}

static struct gt__acc_learner learner;
static pthread_mutex_t learn_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int acc_state = GT__ACC_LEARNING;
static int acc_word = -1;                /* published by acc_state */

/*
 * Copies n words at addr into w without faulting (process_vm_readv on our
 * own pid returns what is readable).
 * @return the number of words copied, or -1 when the call is refused.
 */
static int safe_words(const void *addr, uint64_t *w, int n)
{
    struct iovec local = {w, (size_t)n * sizeof(uint64_t)};
    struct iovec remote = {(void *)addr, (size_t)n * sizeof(uint64_t)};
    ssize_t got = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
    if (got < 0)
        return errno == EFAULT ? 0 : -1;
    return (int)(got / (ssize_t)sizeof(uint64_t));
}

static int user_pointer(uint64_t q)
{
    return q >= 0x10000 && q < (1ull << 47) && (q & 7) == 0;
}

/*
 * A parameter's TensorImpl points to its AutogradMeta (an early member),
 * whose grad_accumulator_ points back to this very node (words 4 -> 8 on
 * 1.13, 3 -> 7 on 2.15). A registered pointer that does not point back
 * belongs to another node: a neighbour in memory, read past the end of
 * an input leaf's node.
 */
static int points_back(uint64_t impl, const void *node)
{
    uint64_t t[GT__ACC_IMPL_WORDS], m[GT__ACC_META_WORDS];
    int nt = safe_words((const void *)(uintptr_t)impl, t, GT__ACC_IMPL_WORDS);
    for (int i = 1; i < nt; i++) {
        if (!user_pointer(t[i]))
            continue;
        int nm = safe_words((const void *)(uintptr_t)t[i], m,
                            GT__ACC_META_WORDS);
        for (int j = 0; j < nm; j++)
            if (m[j] == (uint64_t)(uintptr_t)node)
                return 1;
    }
    return 0;
}

static int is_param_of(uint64_t w, const void *node)
{
    uint32_t m, n;
    return gt__torch_param_find(w, &m, &n) && points_back(w, node);
}

static int is_registered(uint64_t w, const void *node)
{
    uint32_t m, n;
    (void)node;
    return gt__torch_param_find(w, &m, &n);
}

/*
 * Safe reads refused (seccomp): in place, up to the first registered
 * pointer, which in a parameter's node is its own variable, inside the
 * object; no back-pointer check (it would dereference unknown words).
 */
static int inplace_words(const void *node, uint64_t *w)
{
    const uint64_t *p = node;
    int n = 0;
    while (n < GT__ACC_WORDS) {
        memcpy(&w[n], &p[n], sizeof(uint64_t));
        if (n++ > 0 && is_registered(w[n - 1], node))
            break;
    }
    return n;
}

/* Cold: one AccumulateGrad node while the offset is unknown. */
static int learn_node(const void *node)
{
    uint64_t w[GT__ACC_WORDS];
    int ret = -1;

    if (pthread_mutex_trylock(&learn_lock) != 0)
        return -1; /* another thread learns; this node goes unreported */
    if (atomic_load_explicit(&acc_state, memory_order_relaxed) !=
        GT__ACC_LEARNING)
        goto out_unlock;
    int n = safe_words(node, w, GT__ACC_WORDS);
    if (n >= 0)
        ret = gt__acc_learn(&learner, w, n, is_param_of, node);
    else
        ret = gt__acc_learn(&learner, w, inplace_words(node, w),
                            is_registered, node);
    if (learner.state == GT__ACC_SETTLED) {
        acc_word = learner.word;
        atomic_store_explicit(&acc_state, GT__ACC_SETTLED,
                              memory_order_release);
        GT__DIAG("torch: AccumulateGrad variable at +%d", 8 * acc_word);
    } else if (learner.state == GT__ACC_FAILED) {
        atomic_store_explicit(&acc_state, GT__ACC_FAILED,
                              memory_order_release);
        gt__warn_once(GT__TORCH_WARN_ACC,
                      "torch: AccumulateGrad variable not found; parameter "
                      "gradients stay without a layer");
    }
out_unlock:
    pthread_mutex_unlock(&learn_lock);
    return ret;
}

int gt__torch_acc_lookup(const void *node, uint32_t *module, uint32_t *name)
{
    int st = atomic_load_explicit(&acc_state, memory_order_acquire);
    uint64_t v;

    if (GT__LIKELY(st == GT__ACC_SETTLED)) {
        memcpy(&v, (const uint64_t *)node + acc_word, sizeof(v));
        return gt__torch_param_find(v, module, name);
    }
    if (st == GT__ACC_FAILED || !node || !gt__torch_params_any())
        return 0;
    int word = learn_node(node);
    if (word < 0)
        return 0;
    memcpy(&v, (const uint64_t *)node + word, sizeof(v));
    return gt__torch_param_find(v, module, name);
}

int gt__torch_acc_word(void)
{
    return atomic_load_explicit(&acc_state, memory_order_acquire) ==
                   GT__ACC_SETTLED
               ? acc_word
               : -1;
}

void gt__torch_bwd_node_layer(uint32_t layer, uint32_t param)
{
    struct gt_r_bwd_node_layer *r =
        gt__reserve_inline(sizeof(struct gt_r_bwd_node_layer));
    if (GT__UNLIKELY(r == NULL))
        return;
    r->h.type = GT_R_BWD_NODE_LAYER;
    r->h.size = sizeof(struct gt_r_bwd_node_layer);
    r->layer = layer;
    r->param = param;
    r->flags = 0;
    r->ts = gt__now();
    gt__commit_inline(sizeof(struct gt_r_bwd_node_layer));
}
