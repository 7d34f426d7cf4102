/*
 * Trigger engine: capture windows that open and close inside a layer's
 * forward or backward, evaluated at the agent's hooks with no round trip.
 *
 * Iterations are training steps (schema/control.md, "Iterations"). Once
 * the program says it steps an optimizer (gt_step_expect, which the
 * Python package calls when an optimizer is created, or its first
 * gt_step), iteration k is the k-th optimizer step (from 0): everything
 * from the end of step k-1 to gt_step, with any number of backward passes
 * in it (gradient accumulation). Until then, iteration k is the k-th
 * counted outermost backward pass (gt__trig_pass_begin/end, also while
 * nothing is armed; passes are autograd's Engine::execute,
 * gt_bwd_pass_begin/end, and an NVTX `backward` phase range when NVTX
 * ranges are layers) and the forward before it. Extra passes are never
 * iterations: torch.autograd.grad (torch.compile's compile-time backward
 * is one), and a pass with no forward since the last counted one (a second
 * backward over a retained graph); agent/torch.c tells them apart. Nested
 * passes (checkpointing, autograd.grad inside backward) and passes of
 * several threads at once count as one while any is open. iteration=N
 * means "the first iteration >= N in which the layer runs"; iteration=next
 * the first one after the current. pass=K keeps only the K-th counted
 * pass of the step (from 0) and the forward before it.
 *
 * Attribution. A backward node belongs to a layer when it was created
 * while that layer's forward was running on the creating thread (the
 * layer itself or any module it called): at creation the agent ORs the
 * match masks of every module on the thread's layer stack and remembers
 * the node (fwd thread id, sequence number) -> mask in a small open-
 * addressing table (agent/trigger_nodes.c) filled only during the target
 * iteration's forward.
 *
 * Windows. One window per trigger and iteration, with one or more
 * segments (GT_R_WINDOW_BEGIN/END pairs carrying the same id), then
 * GT_R_WINDOW_DONE; capture is on exactly inside segments.
 *   backward: a segment opens at the first backward node of a matching
 *     layer and closes after the last one: the agent counted the matching
 *     nodes created in the forward, and closes when that many have ended
 *     (nodes never executed, or a trigger armed after the forward began,
 *     close it at the end of the pass instead). It pauses at another
 *     layer's node that begins while none of its own runs (a glob's
 *     layers with others between them), and resumes at its next node;
 *     an AccumulateGrad of one of the layer's parameters (torch.c finds
 *     the module) resumes it even after the count, and it then stays open
 *     until another layer's node or the pass end. A node created inside a
 *     running node of the layer outside any module (a double backward)
 *     is the layer's: it joins the count for the step's later passes;
 *   forward: a segment per outermost call of a matching module, entry to
 *     exit (a glob matching several layers gives several segments of one
 *     window: one file spanning them, holding only their calls);
 *     A module entered during a backward pass is a recompute (activation
 *     checkpointing runs the segment's forward again inside its backward
 *     node, before the segment's nodes run): a matching one opens the
 *     backward segment there, or a new segment of the same window if the
 *     count had closed it; when no counted node is still to run (the
 *     forward ran under no_grad: reentrant checkpointing) the nodes it
 *     creates join the count, which closes the segment after the last of
 *     them (a non-reentrant recompute's nodes never run: there the
 *     forward's nodes close it). The window holds the recompute and the
 *     backward, one per pass;
 *   backward, layers with backward ranges (agent/nvtx.c: a program that
 *     marks its own backward per layer, without autograd nodes): a
 *     segment per outermost backward range of a matching layer, begin to
 *     end, as forward segments are per call; a range inside an open
 *     node-counted segment only nests in it;
 *   both: the forward segments and the backward segment, one window.
 * The window is done at the end of the iteration: its step's gt_step, or
 * without steps its backward pass. Every counted pass of a step starts a
 * new count of the layer's nodes, so a step of four micro-batches gives a
 * window of four backward segments (with pass=K, one). With count=N the
 * trigger then re-arms for the next iteration, N times.
 * One segment is open at a time: a trigger whose layer starts while
 * another trigger's segment is open waits for it to close.
 *
 * Costs. Hooks test the capture state first (one load and a branch when
 * nothing is armed). With a trigger armed, per event: a cached mask
 * lookup (one atomic load) and, for matching nodes, one table insert or
 * probe. Opening or closing a segment takes a mutex (a few per window).
 */
#include "agent/trigger.h"
#include "agent/trigger_int.h"
#include "agent/trigger_nodes.h"

#include <errno.h>
#include <fnmatch.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/capture.h"
#include "agent/internal.h"
#include "agent/strings.h"

static _Atomic uint64_t g_iter;       /* completed iterations (steps, passes) */
_Atomic int gt__trig_pass_depth;      /* passes open now, all threads */
_Atomic uint32_t gt__trig_pass_seq;   /* outermost passes begun */
static _Atomic int g_steps;           /* iterations are optimizer steps */
static _Atomic uint32_t g_step_pass;  /* counted passes ended in this step */
static _Atomic int g_pass_extra;      /* the open outermost pass is extra */
static _Atomic int32_t g_rank = -1;   /* gt__trig_set_rank; -1 unknown */
static _Atomic int32_t g_env_rank = -1; /* gt__trig_env_rank; -1 unset */
_Atomic int gt__trig_begun;


pthread_mutex_t gt__trig_lock = PTHREAD_MUTEX_INITIALIZER;
struct gt__trig_slot gt__trig_tab[GT__TRIG_MAX];
static _Atomic uint32_t g_gen = 1;    /* bumps when the trigger set changes */
int gt__trig_open_i = -1;               /* trigger owning the open segment */
static uint32_t g_win_seq;            /* last window id */
static unsigned g_windows_done;
static int g_capture_ours;            /* the open segment turned capture on */
static _Atomic int g_open_ops;        /* the open segment's trigger has ops=1 */
static _Atomic int g_ops_asked;       /* a trigger with ops=1 was ever armed */

/* ------------------------------------------------------------ matching */

/* ------------------------------------------------------------ match cache */

/*
 * layer id -> bitmask of triggers whose glob matches the layer's path,
 * direct-mapped, one atomic word per slot: id (32) | gen (20) | mask (12).
 * A stale generation or another id is a miss, recomputed from the string.
 */
#define MASK_SLOTS 4096u
static _Atomic uint64_t g_mask_cache[MASK_SLOTS];
/* The same with ancestors: a parameter's module -> triggers on it or on a
 * module above it (its AccumulateGrad belongs to their windows). */
static _Atomic uint64_t g_anc_cache[MASK_SLOTS];

_Static_assert(GT__TRIG_MAX <= 12, "a trigger mask fits 12 bits");

static uint32_t mask_cached(_Atomic uint64_t *cache, uint32_t id, int with_ancestors)
{
    uint32_t gen = atomic_load_explicit(&g_gen, memory_order_acquire) & 0xfffff;
    _Atomic uint64_t *slot = &cache[id & (MASK_SLOTS - 1)];
    uint64_t v = atomic_load_explicit(slot, memory_order_relaxed);
    const char *s;
    uint32_t len, mask = 0;

    if (!id)
        return 0;
    if ((uint32_t)(v >> 32) == id && ((v >> 12) & 0xfffff) == gen)
        return (uint32_t)v & 0xfff;
    if (gt__strings_get(id, &s, &len) != 0)
        return 0;
    /* Trigger globs only change under gt__trig_lock with a new generation; a
     * racing re-arm at worst caches a mask under the old generation. */
    for (int i = 0; i < GT__TRIG_MAX; i++)
        if (gt__trig_tab[i].used &&
            gt__trig_glob_match(gt__trig_tab[i].s.layer, s, len, with_ancestors))
            mask |= 1u << i;
    atomic_store_explicit(slot, (uint64_t)id << 32 | (uint64_t)gen << 12 | mask,
                          memory_order_relaxed);
    return mask;
}

uint32_t gt__trig_layer_mask(uint32_t id)
{
    return mask_cached(g_mask_cache, id, 0);
}

uint32_t gt__trig_anc_mask(uint32_t id)
{
    return mask_cached(g_anc_cache, id, 1);
}

uint32_t gt__trig_gen(void)
{
    return atomic_load_explicit(&g_gen, memory_order_acquire);
}

uint32_t gt__trig_path_mask(const char *path, size_t len)
{
    uint32_t mask = 0;
    for (int i = 0; i < GT__TRIG_MAX; i++)
        if (gt__trig_tab[i].used && gt__trig_glob_match(gt__trig_tab[i].s.layer, path, len, 1))
            mask |= 1u << i;
    return mask;
}

/* ------------------------------------------------------------ windows */

static void window_record(uint16_t type, struct gt__trig_slot *t, uint32_t layer)
{
    struct gt_r_window w;

    w.h.type = type;
    w.h.size = sizeof(w);
    w.id = t->win_id;
    w.spec = t->spec_id;
    w.layer = layer;
    w.ts = gt__now();
    w.iteration = t->target;
    (void)gt__emit(&w, sizeof(w));
}

/* gt__trig_lock held. Opens a segment of t's window for its target iteration. */
void gt__trig_segment_open(int i, uint32_t layer)
{
    struct gt__trig_slot *t = &gt__trig_tab[i];

    if (gt__trig_open_i >= 0)
        return;
    if (!t->win_id)
        t->win_id = ++g_win_seq;
    __atomic_store_n(&gt__trig_open_i, i, __ATOMIC_RELAXED);
    /* A capture already running (started by hand or by the daemon) is left
     * as it is: the main trace keeps the segment's records too (a shared
     * begin), the window file gets a copy. */
    g_capture_ours = !gt__capture_on();
    atomic_store(&g_open_ops, t->s.ops);
    window_record(g_capture_ours ? GT_R_WINDOW_BEGIN : GT_R_WINDOW_BEGIN_SHARED,
                  t, layer);
    if (g_capture_ours)
        gt__capture_set(1, 0);
    /* Resumes the operator callback when the window wants operators and a
     * capture without them paused it. */
    if (g_capture_ours || t->s.ops)
        gt__capture_started();
    GT__DIAG("window %u open (%s, iteration %llu)", t->win_id, t->s.layer,
             (unsigned long long)t->target);
}

/* gt__trig_lock held. */
void gt__trig_segment_close(int i)
{
    struct gt__trig_slot *t = &gt__trig_tab[i];

    if (gt__trig_open_i != i)
        return;
    t->node_seg = 0;
    if (g_capture_ours)
        gt__capture_set(0, 0);
    g_capture_ours = 0;
    atomic_store(&g_open_ops, 0);
    window_record(GT_R_WINDOW_END, t, 0);
    __atomic_store_n(&gt__trig_open_i, -1, __ATOMIC_RELAXED);
}

static int active_count(void)
{
    int n = 0;
    for (int i = 0; i < GT__TRIG_MAX; i++)
        n += gt__trig_tab[i].used;
    return n;
}

/* gt__trig_lock held: trigger t is ready for iteration it (counters reset). */
static void retarget(struct gt__trig_slot *t, uint64_t it, int count_valid)
{
    t->target = it;
    t->count_valid = count_valid;
    t->win_id = 0;
    t->bwd_closed = 0;
    atomic_store(&t->expected, 0);
    atomic_store(&t->seen, 0);
    atomic_store(&t->fwd_depth, 0);
    atomic_store(&t->rc_depth, 0);
    atomic_store(&t->rc_count, 0);
    atomic_store(&t->rng_depth, 0);
    atomic_store(&t->in_nodes, 0);
    t->rng_own = 0;
}

/* gt__trig_lock held: the target iteration's backward pass ended. */
static void iteration_done(int i)
{
    struct gt__trig_slot *t = &gt__trig_tab[i];

    gt__trig_segment_close(i);
    if (!t->win_id) {
        /* Did not run in that iteration: wait for the next one. */
        retarget(t, t->target + 1, 1);
        return;
    }
    window_record(GT_R_WINDOW_DONE, t, 0);
    g_windows_done++;
    t->fired++;
    GT__DIAG("window %u done (%u of %u)", t->win_id, t->fired, t->s.count);
    if (t->fired < t->s.count) {
        retarget(t, t->target + 1, 1);
    } else {
        t->used = 0;
        atomic_fetch_add(&g_gen, 1);
    }
}

/* ------------------------------------------------------------ arming */

/* The rank triggers' ranks= is matched against: the environment's (as
 * the constructor or a fork child read it: never the environment here,
 * which races the application's setenv), else what gt__trig_set_rank learnt,
 * else -1. */
static int32_t this_rank(void)
{
    int32_t rank = atomic_load(&g_env_rank);

    return rank >= 0 ? rank : atomic_load(&g_rank);
}

int gt__trig_window_ops(void)
{
    return atomic_load_explicit(&g_open_ops, memory_order_relaxed);
}

int gt__trig_ops_asked(void)
{
    return atomic_load_explicit(&g_ops_asked, memory_order_relaxed);
}

void gt__trig_env_rank(int32_t rank)
{
    atomic_store(&g_env_rank, rank);
}

static int rank_selected(const struct gt__trigger *s, int32_t rank)
{
    for (size_t i = 0; i < s->sel.nranks; i++)
        if (s->sel.ranks[i] == rank)
            return 1;
    return 0;
}

/* @return 1 for this process, 0 not, 2 for it once its rank is known. */
static int for_this_process(const struct gt__trigger *s)
{
    int32_t rank = this_rank();
    int ok;

    if (s->sel.npids) {
        ok = 0;
        for (size_t i = 0; i < s->sel.npids; i++)
            ok |= s->sel.pids[i] == (uint32_t)getpid();
        if (!ok)
            return 0;
    }
    if (s->sel.nranks) {
        if (rank < 0)
            return 2;
        return rank_selected(s, rank);
    }
    return 1;
}

int gt__trig_arm(const char *spec, size_t len)
{
    static struct gt__trigger s; /* 2 KiB: off the stack, under arm_lock */
    static pthread_mutex_t arm_lock = PTHREAD_MUTEX_INITIALIZER;
    char text[GT_CTL_MAX_SIZE + 1];
    char err[160];
    int rc, slot = -1, mine = 0;
    uint64_t it;

    if (len > GT_CTL_MAX_SIZE)
        return -EINVAL;
    memcpy(text, spec, len);
    text[len] = '\0';
    pthread_mutex_lock(&arm_lock);
    rc = gt__trigger_parse_spec(text, &s, err, sizeof(err));
    if (rc == 0 && !(mine = for_this_process(&s)))
        rc = 1;
    if (rc != 0) {
        pthread_mutex_unlock(&arm_lock);
        if (rc == 1)
            return 1;
        GT__DIAG("trigger refused: %s", err);
        gt__warn_once(0, "a trigger spec could not be parsed");
        return rc;
    }
    if (gt__trig_nodes_alloc() < 0) {
        pthread_mutex_unlock(&arm_lock);
        return -ENOMEM;
    }
    pthread_mutex_lock(&gt__trig_lock);
    for (int i = 0; i < GT__TRIG_MAX; i++)
        if (!gt__trig_tab[i].used) {
            slot = i;
            break;
        }
    if (slot < 0) {
        pthread_mutex_unlock(&gt__trig_lock);
        pthread_mutex_unlock(&arm_lock);
        gt__warn_once(0, "more than 11 triggers armed at once: extra ones ignored");
        return -ENOSPC;
    }
    memset(&gt__trig_tab[slot], 0, sizeof(gt__trig_tab[slot]));
    gt__trig_tab[slot].s = s;
    if (s.ops)
        atomic_store(&g_ops_asked, 1);
    gt__trig_tab[slot].spec_id = gt__intern(spec, len);
    it = atomic_load(&g_iter);
    /* "next", or a past iteration: the first one that starts from now on.
     * The current iteration only while its forward has not begun (armed
     * at start, or between iterations): once it has, its node count
     * would be incomplete. */
    if (s.iteration == GT__ITER_NEXT || (uint64_t)s.iteration < it ||
        ((uint64_t)s.iteration == it && atomic_load(&gt__trig_begun)))
        retarget(&gt__trig_tab[slot], it + 1, 1);
    else
        retarget(&gt__trig_tab[slot], (uint64_t)s.iteration, 1);
    gt__trig_tab[slot].rank_wait = mine == 2;
    gt__trig_tab[slot].used = 1;
    atomic_fetch_add(&g_gen, 1);
    gt__capture_arm(1);
    pthread_mutex_unlock(&gt__trig_lock);
    pthread_mutex_unlock(&arm_lock);
    GT__DIAG("trigger armed: %.*s (iteration %llu)", (int)len, spec,
             (unsigned long long)gt__trig_tab[slot].target);
    return 0;
}

void gt__trig_clear(void)
{
    pthread_mutex_lock(&gt__trig_lock);
    if (gt__trig_open_i >= 0)
        gt__trig_segment_close(gt__trig_open_i);
    for (int i = 0; i < GT__TRIG_MAX; i++)
        gt__trig_tab[i].used = 0;
    atomic_fetch_add(&g_gen, 1);
    gt__capture_arm(0);
    gt__trig_nodes_clear();
    pthread_mutex_unlock(&gt__trig_lock);
}

void gt__trig_info(struct gt__trig_info *out)
{
    pthread_mutex_lock(&gt__trig_lock);
    out->armed = (unsigned)active_count();
    out->windows = g_windows_done;
    out->open = gt__trig_open_i >= 0;
    pthread_mutex_unlock(&gt__trig_lock);
}

/* ------------------------------------------------------------ hooks */

/* Triggers whose target is the current iteration and whose phase has p. */
uint32_t gt__trig_live_mask(int phase)
{
    uint64_t it = atomic_load_explicit(&g_iter, memory_order_relaxed);
    int32_t pass = (int32_t)atomic_load_explicit(&g_step_pass, memory_order_relaxed);
    uint32_t m = 0;

    for (int i = 0; i < GT__TRIG_MAX; i++)
        if (gt__trig_tab[i].used && (gt__trig_tab[i].s.phase & phase) && gt__trig_tab[i].target == it &&
            !gt__trig_tab[i].rank_wait &&
            (gt__trig_tab[i].s.pass == GT__PASS_ALL || gt__trig_tab[i].s.pass == pass))
            m |= 1u << i;
    return m;
}

/* A matching module entered during backward: a recompute (see the top). */
static void recompute_begin(uint32_t m)
{
    pthread_mutex_lock(&gt__trig_lock);
    m &= gt__trig_live_mask(GT__TRIG_BACKWARD);
    for (int i = 0; i < GT__TRIG_MAX; i++) {
        struct gt__trig_slot *t = &gt__trig_tab[i];
        if (m & (1u << i) && atomic_fetch_add(&t->rc_depth, 1) == 0) {
            atomic_store(&t->rc_count,
                         atomic_load(&t->seen) == atomic_load(&t->expected));
            t->bwd_closed = 0;
            gt__trig_segment_open(i, 0);
        }
    }
    pthread_mutex_unlock(&gt__trig_lock);
}

static void recompute_end(uint32_t m)
{
    pthread_mutex_lock(&gt__trig_lock);
    for (int i = 0; i < GT__TRIG_MAX; i++)
        if (m & (1u << i) && atomic_load(&gt__trig_tab[i].rc_depth) > 0)
            atomic_fetch_sub(&gt__trig_tab[i].rc_depth, 1);
    pthread_mutex_unlock(&gt__trig_lock);
}

/* Forward segments of triggers m: a matching module call (layer path_id)
 * or compiled region (0) begins / ends. */
static void fwd_begin(uint32_t m, uint32_t path_id)
{
    pthread_mutex_lock(&gt__trig_lock);
    m &= gt__trig_live_mask(GT__TRIG_FORWARD);
    for (int i = 0; i < GT__TRIG_MAX; i++)
        if (m & (1u << i) && atomic_fetch_add(&gt__trig_tab[i].fwd_depth, 1) == 0)
            gt__trig_segment_open(i, path_id);
    pthread_mutex_unlock(&gt__trig_lock);
}

static void fwd_end(uint32_t m)
{
    pthread_mutex_lock(&gt__trig_lock);
    for (int i = 0; i < GT__TRIG_MAX; i++)
        if (m & (1u << i) && gt__trig_tab[i].used && atomic_load(&gt__trig_tab[i].fwd_depth) > 0 &&
            atomic_fetch_sub(&gt__trig_tab[i].fwd_depth, 1) == 1)
            gt__trig_segment_close(i);
    pthread_mutex_unlock(&gt__trig_lock);
}

void gt__trig_region_begin(uint32_t m)
{
    if (m && !atomic_load_explicit(&gt__trig_pass_depth, memory_order_relaxed))
        fwd_begin(m, 0);
}

void gt__trig_region_end(uint32_t m)
{
    if (m && !atomic_load_explicit(&gt__trig_pass_depth, memory_order_relaxed))
        fwd_end(m);
}

void gt__trig_module_begin(uint32_t path_id)
{
    uint32_t m = gt__trig_layer_mask(path_id);

    if (!m)
        return;
    if (atomic_load_explicit(&gt__trig_pass_depth, memory_order_relaxed)) {
        recompute_begin(m);
        return;
    }
    fwd_begin(m, path_id);
}

void gt__trig_module_end(uint32_t path_id)
{
    uint32_t m = gt__trig_layer_mask(path_id);

    if (!m)
        return;
    if (atomic_load_explicit(&gt__trig_pass_depth, memory_order_relaxed)) {
        recompute_end(m);
        return;
    }
    fwd_end(m);
}

/* An iteration boundary. @return the iteration that ended. */
static uint64_t iteration_next(void)
{
    atomic_store(&gt__trig_begun, 0);
    return atomic_fetch_add(&g_iter, 1);
}

void gt__trig_pass_begin(int extra)
{
    if (atomic_fetch_add(&gt__trig_pass_depth, 1) == 0) {
        atomic_store(&g_pass_extra, extra);
        atomic_fetch_add(&gt__trig_pass_seq, 1);
    }
}

/* gt__trig_lock held: the outermost pass of the current iteration ended. */
static void pass_done(int extra)
{
    uint64_t it = atomic_load(&g_iter);
    int steps = atomic_load(&g_steps);

    for (int i = 0; i < GT__TRIG_MAX; i++) {
        struct gt__trig_slot *t = &gt__trig_tab[i];
        if (!t->used || t->target != it)
            continue;
        if (!steps && !extra) {
            iteration_done(i);
            continue;
        }
        /* A step goes on (or an extra pass ends): the segment of this
         * pass closes; the next counted pass counts its nodes afresh, an
         * extra one may run the same nodes again. */
        gt__trig_segment_close(i);
        t->bwd_closed = 0;
        atomic_store(&t->in_nodes, 0);
        atomic_store(&t->seen, 0);
        atomic_store(&t->rc_depth, 0);
        atomic_store(&t->rc_count, 0);
        if (!extra)
            atomic_store(&t->expected, 0);
    }
    /* A step keeps its nodes until it ends (gt__trig_step): a second pass
     * over a retained graph after this one runs them again. */
    if (!extra && !steps)
        gt__trig_nodes_clear();
}

void gt__trig_pass_end(void)
{
    int was = atomic_fetch_sub(&gt__trig_pass_depth, 1);
    int extra = atomic_load(&g_pass_extra);
    int steps = atomic_load(&g_steps);

    if (was <= 0) {
        /* An end without a begin (hook installed mid-pass): undo. */
        atomic_fetch_add(&gt__trig_pass_depth, 1);
        return;
    }
    if (was != 1)
        return;
    if (gt__capture_triggers()) {
        pthread_mutex_lock(&gt__trig_lock);
        pass_done(extra);
        if (!extra && steps)
            atomic_fetch_add(&g_step_pass, 1);
        else if (!extra)
            iteration_next();
        if (!active_count())
            gt__capture_arm(0);
        pthread_mutex_unlock(&gt__trig_lock);
        return;
    }
    if (!extra && steps)
        atomic_fetch_add(&g_step_pass, 1);
    else if (!extra)
        iteration_next();
}

void gt__trig_step_expect(void)
{
    atomic_store(&g_steps, 1);
}

uint64_t gt__trig_step(void)
{
    uint64_t it;

    if (!atomic_exchange(&g_steps, 1)) {
        /* Steps nobody announced (gt_step_expect): the backward pass that
         * just ended was counted as an iteration and closed it already;
         * this step mark is that iteration's end, and the next ones count. */
        atomic_store(&g_step_pass, 0);
        it = atomic_load(&g_iter);
        if (it > 0 && !atomic_load(&gt__trig_pass_depth))
            return it - 1;
    }
    if (!gt__capture_triggers()) {
        atomic_store(&g_step_pass, 0);
        return iteration_next();
    }
    pthread_mutex_lock(&gt__trig_lock);
    it = atomic_load(&g_iter);
    for (int i = 0; i < GT__TRIG_MAX; i++)
        if (gt__trig_tab[i].used && gt__trig_tab[i].target == it)
            iteration_done(i);
    gt__trig_nodes_clear();
    atomic_store(&g_step_pass, 0);
    (void)iteration_next();
    if (!active_count())
        gt__capture_arm(0);
    pthread_mutex_unlock(&gt__trig_lock);
    return it;
}

uint32_t gt__trig_pass_flags(void)
{
    return (atomic_load_explicit(&g_steps, memory_order_relaxed) ? GT_MARK_F_STEPS : 0) |
           (atomic_load_explicit(&g_pass_extra, memory_order_relaxed) ? GT_MARK_F_EXTRA : 0);
}

void gt__trig_set_rank(int32_t rank)
{
    if (rank < 0)
        return;
    pthread_mutex_lock(&gt__trig_lock);
    atomic_store(&g_rank, rank);
    for (int i = 0; i < GT__TRIG_MAX; i++) {
        struct gt__trig_slot *t = &gt__trig_tab[i];
        if (!t->used || !t->rank_wait)
            continue;
        t->rank_wait = 0;
        if (rank_selected(&t->s, this_rank()))
            continue;
        if (gt__trig_open_i == i)
            gt__trig_segment_close(i);
        t->used = 0;
    }
    atomic_fetch_add(&g_gen, 1);
    if (!active_count())
        gt__capture_arm(0);
    pthread_mutex_unlock(&gt__trig_lock);
}

uint64_t gt__trig_iteration(void)
{
    return atomic_load(&g_iter);
}

int gt__trig_in_backward(void)
{
    return atomic_load_explicit(&gt__trig_pass_depth, memory_order_relaxed) > 0;
}
