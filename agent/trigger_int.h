/*
 * The trigger engine's shared state (agent/trigger.c: arming, windows,
 * forward and iteration hooks; agent/trigger_bwd.c: the backward node
 * hooks). Internal to the trigger role: only those two files include it.
 */
#ifndef GT_AGENT_TRIGGER_INT_H
#define GT_AGENT_TRIGGER_INT_H

#include <pthread.h>
#include <stdint.h>

#include "agent/trigger.h"

/* One armed trigger and the state of its window for the target
 * iteration. Fields are changed under gt__trig_lock (the atomics are
 * also read without it). */
struct gt__trig_slot {
    int used;
    struct gt__trigger s;
    uint32_t spec_id;
    uint64_t target;                  /* iteration the window is for */
    uint32_t fired;                   /* windows completed */
    int count_valid;                  /* armed before target's forward */
    uint32_t win_id;                  /* window of target, 0 until opened */
    _Atomic uint64_t expected;        /* matching nodes created in forward */
    _Atomic uint64_t seen;            /* matching nodes ended in backward */
    _Atomic int fwd_depth;            /* open calls of matching modules */
    _Atomic int rc_depth;             /* open recomputes of them (backward) */
    _Atomic int rc_count;             /* the open recompute's nodes count */
    _Atomic int rng_depth;            /* open backward ranges of its layers */
    int rng_own;                      /* the open segment is the range's */
    int node_seg;                     /* the open segment is its nodes' */
    _Atomic int in_nodes;             /* its nodes running now (all threads) */
    int bwd_closed;                   /* backward segment finished */
    int rank_wait;                    /* ranks= given, this rank unknown */
};

extern pthread_mutex_t gt__trig_lock;
extern struct gt__trig_slot gt__trig_tab[GT__TRIG_MAX];
/* The trigger owning the open segment, -1 when none (written under the
 * lock, read relaxed without it). */
extern int gt__trig_open_i;
extern _Atomic int gt__trig_pass_depth;  /* passes open now, all threads */
extern _Atomic uint32_t gt__trig_pass_seq; /* outermost passes begun */

/* Under gt__trig_lock: opens a segment of trigger i's window (nothing
 * when one is open), closes trigger i's open segment. */
void gt__trig_segment_open(int i, uint32_t layer);
void gt__trig_segment_close(int i);
/* Triggers whose target is the current iteration and whose phase has
 * phase (GT__TRIG_FORWARD, GT__TRIG_BACKWARD). */
uint32_t gt__trig_live_mask(int phase);
/* Triggers whose glob matches layer id's path or one of its ancestors
 * (cached per id and trigger set). */
uint32_t gt__trig_anc_mask(uint32_t id);

#endif
