#!/usr/bin/env python3
"""Writes a gradtrace-style trace (one event per line, as the converter
writes them) of one layer, m (Attn), over iterations of given durations,
for the report's warm-up and --iterations tests.

  gen_steps.py OUT D0,D1,...  [--bwd-heavy-first]

Iteration k lasts Dk ms; m's forward takes 10% of it and its backward 20%
in 4 own nodes, the longest (BmmBackward0) 60% of that backward. With
--bwd-heavy-first, iteration 0's backward is 30x its forward (the only
such iteration) and its longest node is BigBackward0, 95% of it."""
import json
import sys


def main():
    out, durs = sys.argv[1], [float(x) for x in sys.argv[2].split(",")]
    heavy = "--bwd-heavy-first" in sys.argv
    evs, ts = [], 0.0
    for k, d in enumerate(durs):
        us = d * 1e3
        fwd, bwd = 0.1 * us, 0.2 * us
        top, top_us = "BmmBackward0", 0.6 * bwd
        if heavy and k == 0:
            fwd, bwd = 0.02 * us, 0.6 * us
            top, top_us = "BigBackward0", 0.95 * bwd
        evs.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{k}",
                    "pid": 1, "tid": 1, "ts": ts, "dur": us, "args": {"step": k}})
        evs.append({"ph": "X", "cat": "layer_forward", "name": "m (Attn) forward",
                    "pid": 1, "tid": 1, "ts": ts + 1, "dur": fwd, "args": {}})
        evs.append({"ph": "X", "cat": "layer_backward", "name": "m (Attn) backward",
                    "pid": 1, "tid": 2, "ts": ts + 2 + fwd, "dur": bwd,
                    "args": {"layer": "m", "nodes": 4, "self_nodes": 4,
                             "time_us": bwd, "self_us": bwd, "top_node": top,
                             "top_node_us": top_us, "pass": k}})
        evs.append({"ph": "i", "s": "t", "cat": "backward_totals",
                    "name": "backward totals", "pid": 1, "tid": 2,
                    "ts": ts + 3 + fwd + bwd,
                    "args": {"pass": k, "nodes": 4, "time_us": bwd,
                             "unattributed_nodes": 0, "unattributed_us": 0}})
        ts += us + 10
    with open(out, "w") as f:
        f.write('{"traceEvents":[\n')
        f.write(",\n".join(json.dumps(e, separators=(",", ":")) for e in evs))
        f.write("\n]}\n")


main()
