/*
 * The one writer of the capture state (agent/capture.h): capture on/off
 * with its epoch, the trigger-armed bit, the backward-pass count of
 * the current capture, and the captures the daemon asks for, which begin
 * and end at iteration boundaries.
 *
 * Every change is one compare-and-swap of the whole word, so two threads
 * turning capture on at once (the application, the daemon's control
 * message on the streamer, a trigger window) make exactly one transition
 * and one new epoch, and a hook's single load always sees an on bit with
 * the epoch that belongs to it.
 */
#include "agent/capture.h"

#include <pthread.h>

#include "agent/internal.h"

#define EPOCH_MASK ((UINT32_C(1) << (32 - GT__CAP_EPOCH_SHIFT)) - 1)

_Atomic uint32_t gt__capture_word;
/* Backward passes begun since the capture started. */
static _Atomic uint64_t bwd_pass_count;
static void (*_Atomic flush_fn)(void);
static void (*_Atomic started_fn)(void);

/* The word with capture on and the next epoch (0 is skipped: it means
 * "recorded in no capture" to the scope stacks). */
static uint32_t word_on(uint32_t old)
{
    uint32_t epoch = (gt__capture_epoch_of(old) + 1) & EPOCH_MASK;

    if (!epoch)
        epoch = 1;
    return (old & GT__CAP_TRIGGERS) | GT__CAP_ON | epoch << GT__CAP_EPOCH_SHIFT;
}

/* @return 1 when this call made the transition, 0 when it already held. */
static int capture_switch(int on)
{
    uint32_t old = atomic_load(&gt__capture_word), next;

    do {
        if (!(old & GT__CAP_ON) == !on)
            return 0;
        /* The count restarts before the on bit is visible: a pass begun
         * once a hook reads "on" counts from 0. */
        if (on)
            atomic_store(&bwd_pass_count, 0);
        next = on ? word_on(old) : (old & ~GT__CAP_ON);
    } while (!atomic_compare_exchange_weak(&gt__capture_word, &old, next));
    return 1;
}

void gt__capture_set(int on, int flush)
{
    if (!capture_switch(on))
        return;
    GT__DIAG(on ? "capture on" : "capture off");
    if (!on && flush)
        gt__capture_flush();
}

void gt__capture_set_flush(void (*fn)(void))
{
    atomic_store(&flush_fn, fn);
}

void gt__capture_flush(void)
{
    void (*fn)(void) = atomic_load(&flush_fn);

    if (fn)
        fn();
}

void gt__capture_set_started(void (*fn)(void))
{
    atomic_store(&started_fn, fn);
}

void gt__capture_started(void)
{
    void (*fn)(void) = atomic_load(&started_fn);

    if (fn)
        fn();
}

void gt__capture_init(int on)
{
    if (on)
        (void)capture_switch(1);
}

void gt__capture_arm(int armed)
{
    if (armed)
        atomic_fetch_or(&gt__capture_word, GT__CAP_TRIGGERS);
    else
        atomic_fetch_and(&gt__capture_word, ~GT__CAP_TRIGGERS);
}

uint64_t gt__capture_pass_next(void)
{
    return atomic_fetch_add(&bwd_pass_count, 1);
}

uint64_t gt__capture_passes(void)
{
    return atomic_load(&bwd_pass_count);
}

/* ------------------------------------------------------------ requests */

/*
 * A capture the daemon asked for (GT_CTL_CAPTURE_ON) waits for the
 * program's next iteration boundary, so that its first iteration is
 * whole: the Python package puts its module hooks in at that boundary
 * too, before the next forward (schema/torch.md). With a count it then
 * ends by itself at the boundary that completes that many iterations.
 *
 * Boundaries come from the program's threads (gt__capture_boundary, once
 * per step or counted pass), the overdue check from the streamer
 * (gt__capture_tick); the state is under req_lock, which neither path
 * takes while no request is open (one relaxed load of req_state).
 */
enum { REQ_NONE, REQ_PENDING, REQ_COUNTING };

static pthread_mutex_t req_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int req_state;
static uint64_t req_iters;      /* iterations to capture; 0: until stopped */
static uint64_t req_left;       /* REQ_COUNTING: boundaries still to come */
static uint64_t req_at;         /* the iteration number at the last boundary */
static uint64_t req_ns;         /* when the request came */
/* The module hooks' side (the Python package) asks gt_hooks_wanted; it
 * has seen the waiting request once it was told "wanted" for it. */
static _Atomic int hooks_asker, req_seen;
/* A request it has not seen this long begins anyway (a stuck watcher). */
#define UNSEEN_MAX_NS 1000000000ull
/* The streamer's view of the boundaries (gt__capture_tick only). */
static uint64_t tick_iter, tick_ns, tick_gap_ns;

#define OVERDUE_MIN_NS 2000000000ull

/* req_lock held: capture on now (from a boundary or the streamer). */
static int req_begin(uint64_t iteration)
{
    int switched = capture_switch(1);

    if (switched)
        GT__DIAG("capture on (at iteration %llu)", (unsigned long long)iteration);
    req_at = iteration;
    req_left = req_iters;
    atomic_store(&req_state, req_iters ? REQ_COUNTING : REQ_NONE);
    return switched;
}

void gt__capture_request(uint64_t iterations, uint64_t iteration, int now)
{
    pthread_mutex_lock(&req_lock);
    req_iters = iterations;
    req_at = iteration;
    req_ns = gt__mono_ns();
    atomic_store(&req_seen, 0);
    if (now) {
        (void)req_begin(iteration);
    } else {
        atomic_store(&req_state, REQ_PENDING);
        GT__DIAG("capture asked for (%llu iterations): from the next boundary",
                 (unsigned long long)iterations);
    }
    pthread_mutex_unlock(&req_lock);
}

void gt__capture_request_cancel(void)
{
    if (!atomic_load(&req_state))
        return;
    pthread_mutex_lock(&req_lock);
    atomic_store(&req_state, REQ_NONE);
    pthread_mutex_unlock(&req_lock);
}

int gt__capture_pending(void)
{
    return atomic_load_explicit(&req_state, memory_order_relaxed) == REQ_PENDING;
}

int gt__capture_hooks_ask(void)
{
    if (GT__UNLIKELY(!atomic_load_explicit(&hooks_asker, memory_order_relaxed)))
        atomic_store(&hooks_asker, 1);
    if (GT__LIKELY(!gt__capture_pending()))
        return 0;
    atomic_store(&req_seen, 1);
    return 1;
}

/* req_lock held: whether a waiting request may begin at this boundary.
 * Where module hooks follow gt_hooks_wanted, once their side has been
 * told (a watcher thread puts them in at once where no optimizer steps;
 * where one does, the step hook right after this boundary does), so the
 * iteration after the boundary has its layers from its first module. */
static int req_ready(void)
{
    return !atomic_load(&hooks_asker) || atomic_load(&req_seen) ||
           gt__mono_ns() - req_ns > UNSEEN_MAX_NS;
}

void gt__capture_boundary(uint64_t iteration)
{
    int started = 0, stop = 0;

    if (GT__LIKELY(!atomic_load_explicit(&req_state, memory_order_relaxed)))
        return;
    pthread_mutex_lock(&req_lock);
    if (iteration != req_at) {
        uint64_t done = iteration - req_at;

        switch (atomic_load(&req_state)) {
        case REQ_PENDING:
            if (req_ready())
                started = req_begin(iteration);
            else
                req_at = iteration;
            break;
        case REQ_COUNTING:
            req_at = iteration;
            req_left = done < req_left ? req_left - done : 0;
            if (!req_left) {
                atomic_store(&req_state, REQ_NONE);
                stop = 1;
            }
            break;
        default:
            break;
        }
    }
    pthread_mutex_unlock(&req_lock);
    /* Outside the lock: the flush may take a while (CUDA's buffers). */
    if (started)
        gt__capture_started();
    if (stop) {
        GT__DIAG("capture off: %llu iterations done", (unsigned long long)req_iters);
        gt__capture_set(0, 1);
    }
}

void gt__capture_tick(uint64_t now_ns, uint64_t iteration)
{
    uint64_t wait;

    if (iteration != tick_iter) {
        if (tick_ns && iteration > tick_iter)
            tick_gap_ns = (now_ns - tick_ns) / (iteration - tick_iter);
        tick_iter = iteration;
        tick_ns = now_ns;
    }
    if (GT__LIKELY(atomic_load_explicit(&req_state, memory_order_relaxed) != REQ_PENDING))
        return;
    /* No boundary for max(2 s, three iterations) since the request (or
     * since the last one): the program has stopped iterating (an
     * evaluation loop, the end of training); the capture starts now. */
    wait = 3 * tick_gap_ns > OVERDUE_MIN_NS ? 3 * tick_gap_ns : OVERDUE_MIN_NS;
    pthread_mutex_lock(&req_lock);
    if (atomic_load(&req_state) == REQ_PENDING &&
        now_ns - (tick_ns > req_ns ? tick_ns : req_ns) > wait) {
        GT__DIAG("no iteration boundary for %llu ms: capture starts now",
                 (unsigned long long)(wait / 1000000));
        (void)req_begin(iteration);
    }
    pthread_mutex_unlock(&req_lock);
}
