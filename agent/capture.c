/*
 * The one writer of the capture state (agent/capture.h): capture on/off
 * with its epoch, the trigger-armed bit, and the backward-pass count of
 * the current capture.
 *
 * Every change is one compare-and-swap of the whole word, so two threads
 * turning capture on at once (the application, the daemon's control
 * message on the streamer, a trigger window) make exactly one transition
 * and one new epoch, and a hook's single load always sees an on bit with
 * the epoch that belongs to it.
 */
#include "agent/capture.h"

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
    GT__LOG(on ? "capture on" : "capture off");
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
