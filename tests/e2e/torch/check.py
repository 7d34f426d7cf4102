"""Compares the agent's .gtr with torch's ground truth written by attrib.py.

Usage: check.py TRUTH.json TRACE.gtr [--no-modules]

Checks, printing every difference and exiting 1 on any:
  - every backward node torch saw (fwd_tid, seq) is in the trace, with a
    known sequence number and torch's name for it, and the trace has no
    numbered backward node torch did not see;
  - (unless --no-modules) for every layer call "path#k", the set of
    backward nodes the trace attributes to it equals torch's set: the
    trace's attribution is the node's creation record (its layer) plus the
    module call on that thread whose span contains the creation time;
  - no layout warning, and every backward node begin has its end;
  - case specifics: nograd has no node created inside the no_grad region;
    custom names the PyNode after the Python class.
With --no-modules (agent without the Python module) nodes must still carry
sequence numbers, and no module scopes or layers may appear.
"""

import bisect
import collections
import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import gtr  # noqa: E402


def trace_layers(t):
    """{"path#k": set((fwd_tid, seq))} from the trace."""
    calls = collections.defaultdict(list)  # (tid, path) -> [(begin, end)]
    for tid, path, _cls, b, e in t.module_calls():
        calls[(tid, path)].append((b, e))
    for v in calls.values():
        v.sort()
    starts = {k: [b for b, _ in v] for k, v in calls.items()}
    where = {}
    for e in t.of(gtr.T_NODE_CREATED):
        path = t.s(e["layer"])
        label = ""
        if path:
            key = (e["tid"], path)
            v = calls.get(key, [])
            i = bisect.bisect_right(starts.get(key, []), e["ts"]) - 1
            if i >= 0 and v[i][0] <= e["ts"] <= v[i][1]:
                label = "%s#%d" % (path, i + 1)
            else:
                label = path + "#?"
        where[(e["fwd_tid"], e["seq"])] = label
    out = collections.defaultdict(set)
    for n in t.backward_nodes():
        if n["seq"] == gtr.SEQ_UNKNOWN:
            continue
        key = (n["fwd_tid"], n["seq"])
        out[where.get(key, "<no creation record>")].add(key)
    return out


def main():
    truth_path, trace_path = sys.argv[1], sys.argv[2]
    no_modules = "--no-modules" in sys.argv[3:]
    truth = json.load(open(truth_path))
    t = gtr.Trace(trace_path)
    errors = []

    nodes = t.backward_nodes()
    begins = len(t.of(gtr.T_BWD_BEGIN))
    if begins != len(nodes):
        errors.append("%d backward begins, %d matched ends" % (begins, len(nodes)))
    by_key = {}
    for n in nodes:
        if n["seq"] != gtr.SEQ_UNKNOWN:
            by_key[(n["fwd_tid"], n["seq"])] = n
    unknown = [n["name"] for n in nodes if n["seq"] == gtr.SEQ_UNKNOWN
               and "AccumulateGrad" not in n["name"]]
    if unknown:
        errors.append("%d backward nodes without sequence number: %s"
                      % (len(unknown), sorted(set(unknown))[:8]))

    truth_keys = {}
    for ftid, seq, name in truth["backward"]:
        truth_keys[(ftid, seq)] = name
    for key, name in sorted(truth_keys.items()):
        n = by_key.get(key)
        if n is None:
            errors.append("torch's backward node %s %s missing" % (name, key))
        elif n["name"] != name:
            errors.append("node %s named %r, torch says %r" % (key, n["name"], name))
    for key in sorted(set(by_key) - set(truth_keys)):
        errors.append("trace has backward node %s %s torch did not run"
                      % (by_key[key]["name"], key))

    warnings = [w for w in t.warning_texts() if w.startswith("torch:")]
    if warnings:
        errors.append("torch warnings in trace: %s" % warnings)

    if no_modules:
        if t.module_calls():
            errors.append("module scopes present without the Python module")
        if any(t.s(e["layer"]) for e in t.of(gtr.T_NODE_CREATED)):
            errors.append("layers present without the Python module")
    else:
        mine = trace_layers(t)
        theirs = {k: set(map(tuple, v)) for k, v in truth["layers"].items()}
        for layer in sorted(set(mine) | set(theirs)):
            a, b = mine.get(layer, set()), theirs.get(layer, set())
            if a != b:
                errors.append("layer %r: trace-only %s, torch-only %s"
                              % (layer, sorted(a - b)[:6], sorted(b - a)[:6]))

    case = truth["case"]
    if case == "nograd":
        region = [e for e in t.of(gtr.T_SCOPE_BEGIN)
                  if e["kind"] == 0 and t.s(e["name"]) == "no_grad_region"]
        ends = [e for e in t.of(gtr.T_SCOPE_END) if e["kind"] == 0]
        if not region or not ends:
            errors.append("no_grad region scope missing")
        else:
            lo, hi = region[0]["ts"], ends[0]["ts"]
            inside = [e for e in t.of(gtr.T_NODE_CREATED)
                      if e["tid"] == region[0]["tid"] and lo <= e["ts"] <= hi]
            if inside:
                errors.append("%d nodes created under no_grad" % len(inside))
            fwd = [c for c in t.module_calls() if lo <= c[3] <= hi]
            if len(fwd) < 2:
                errors.append("module scopes missing inside the no_grad region")
    if truth["extra"].get("custom_name"):
        want = truth["extra"]["custom_name"]
        if not any(want in n["name"] for n in nodes):
            errors.append("no backward node named after %s" % want)

    n_layers = len([k for k in truth["layers"] if k])
    print("%s: %d backward nodes (torch %d), %d layer calls compared, "
          "%d module scopes, %d chunks" % (case, len(nodes), len(truth_keys),
                                           n_layers, len(t.module_calls()),
                                           t.chunks))
    if len(truth_keys) < 4:
        errors.append("torch saw only %d backward nodes: test is vacuous"
                      % len(truth_keys))
    for e in errors:
        print("  MISMATCH " + e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
