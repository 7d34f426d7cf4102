/*
 * The trigger engine's node table (agent/trigger_nodes.c), for
 * agent/trigger.c only: (forward thread id, sequence number) -> the mask
 * of armed triggers whose layer created the node, with the creation's
 * layer and time. Lock-free: one CAS per insert, loads per lookup; no
 * allocation once mapped.
 */
#ifndef GRADTRACE_AGENT_TRIGGER_NODES_H
#define GRADTRACE_AGENT_TRIGGER_NODES_H

#include <stdint.h>

#include "agent/trigger.h"

/* Beside the trigger bits of a mask: the creation was recorded inside a
 * segment (a forward one), so the window already holds its
 * GT_R_NODE_CREATED. */
#define GT__TRIG_NODE_RECORDED (1u << GT__TRIG_MAX)

struct gt__trig_node {
    uint32_t mask;   /* trigger bits and GT__TRIG_NODE_RECORDED */
    uint32_t layer;  /* the creation's layer */
    uint64_t ts;     /* the creation's time */
};

/* Maps the table once (the first trigger armed; under the arming lock).
 * @return 0 or -ENOMEM. */
int gt__trig_nodes_alloc(void);

/* A node of mask's triggers was created (layer: its innermost module).
 * Any thread; a no-op before the table exists or once it is 3/4 full
 * (then gt__trig_nodes_full says so until cleared). */
void gt__trig_node_put(uint64_t seq, uint64_t tid, uint32_t mask, uint32_t layer);

/* @return the node's trigger mask without GT__TRIG_NODE_RECORDED (0: not
 * a node of a matching layer), *info filled when found. Any thread. */
uint32_t gt__trig_node_get(uint64_t seq, uint64_t tid, struct gt__trig_node *info);

/* Forgets every node (the iteration is done). Under the engine's lock. */
void gt__trig_nodes_clear(void);

/* 1 when inserts stopped for this iteration (its windows then close at
 * the pass end instead of by count). */
int gt__trig_nodes_full(void);

#endif /* GRADTRACE_AGENT_TRIGGER_NODES_H */
