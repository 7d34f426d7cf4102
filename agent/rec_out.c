/*
 * The hooks' record output (agent/rec_out.h): by default the agent's
 * buffers, string table, clock and warnings. In the base role, below
 * every hook that writes through it.
 */
#include "agent/rec_out.h"

#include "agent/internal.h"

static uint64_t agent_now(void)
{
    return gt__now();
}

static const struct gt__rec_out agent_out = {
    .emit = gt__emit,
    .intern = gt__intern,
    .now = agent_now,
    .warn = gt__warn_once,
};

const struct gt__rec_out *gt__rec_out = &agent_out;

void gt__rec_out_set(const struct gt__rec_out *out)
{
    gt__rec_out = out ? out : &agent_out;
}
