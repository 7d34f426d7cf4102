"""Checks a trace of tests/e2e/torch/ops_model.py for its operators
(agent/ops.c, schema/trace-output.md "Events"): every aten operator as a
cpu_op on its thread, Linear's aten::addmm (aten::linear) inside its
module's forward, each forward->backward arrow starting on the operator
that created its node (innermost slice at the arrow's start), that
operator carrying the node's Sequence number, each of libtorch's
"autograd::engine::evaluate_function: X" operators around the backward
node X it ran (its name is built per node, in a reused buffer), and
launches of none (CPU). With --none: no cpu_op at all (GRADTRACE_OPS=0).

  check_ops.py TRACE [--none]
"""
import bisect
import collections
import json
import sys


def fail(msg):
    sys.exit("check_ops: " + msg)


def main(argv):
    d = json.load(open(argv[1]))
    ev = d["traceEvents"]
    ops = [e for e in ev if e.get("cat") == "cpu_op"]
    if "--none" in argv:
        if ops:
            fail("GRADTRACE_OPS=0 but %d cpu_op events" % len(ops))
        print("ops: none, as asked")
        return 0
    if not ops:
        fail("no cpu_op events")
    names = collections.Counter(e["name"] for e in ops)
    steps = [e for e in ev if e.get("name", "").startswith("ProfilerStep#")]
    if not steps:
        fail("no steps")
    # The model: 4 Linear per iteration, each an addmm under its module.
    mods = [e for e in ev if e.get("cat") == "module" and "(Linear) forward" in e["name"]]
    addmm = [e for e in ops if e["name"] == "aten::addmm"]
    inside = 0
    for a in addmm:
        if any(m["tid"] == a["tid"] and m["ts"] <= a["ts"] and
               a["ts"] + a["dur"] <= m["ts"] + m["dur"] for m in mods):
            inside += 1
    if len(mods) < 4 or inside != len(mods):
        fail("%d Linear forwards, %d aten::addmm inside one (want one each)"
             % (len(mods), inside))
    # Every Linear forward's own aten::linear, the capture's very first
    # (it runs before any autograd node exists) included.
    first = min(mods, key=lambda m: m["ts"])
    lin = [e for e in ops if e["name"] == "aten::linear"]
    if len(lin) != len(mods):
        fail("%d Linear forwards, %d aten::linear" % (len(mods), len(lin)))
    if not any(first["ts"] <= e["ts"] < first["ts"] + first["dur"] for e in lin):
        fail("the first Linear forward's aten::linear is missing")
    ids = [e["args"]["External id"] for e in ops]
    if len(set(ids)) != len(ids):
        fail("External ids repeat")
    # Innermost slice at each fwdbwd start, on its track.
    by_track = collections.defaultdict(list)
    for e in ev:
        if e.get("ph") == "X":
            by_track[(e["pid"], e["tid"])].append(e)
    seqs = {e["args"]["Sequence number"] for e in ops if "Sequence number" in e["args"]}
    starts = [e for e in ev if e.get("ph") == "s" and e.get("cat") == "fwdbwd"]
    on_op = 0
    for s in starts:
        around = [x for x in by_track[(s["pid"], s["tid"])]
                  if x["ts"] <= s["ts"] < x["ts"] + x["dur"]]
        inner = max(around, key=lambda x: (x["ts"], -x["dur"]), default=None)
        if inner is None:
            fail("fwdbwd at %s starts in no slice" % s["ts"])
        on_op += inner.get("cat") == "cpu_op"
    nodes = [e for e in ev if e.get("cat") == "backward" and "seq" in e.get("args", {})]
    have = sum(1 for n in nodes if n["args"]["seq"] in seqs)
    # The operators before the first node creation are missed (the
    # callback is registered there, agent/ops.c): one iteration's worth
    # at most.
    if on_op < len(starts) - len(starts) // len(steps) or not starts:
        fail("%d of %d arrows start on an operator" % (on_op, len(starts)))
    if have < len(nodes) - len(nodes) // len(steps):
        fail("%d of %d backward nodes have their operator's Sequence number"
             % (have, len(nodes)))
    # libtorch's engine names one FUNCTION-scope RecordFunction per node
    # it runs "autograd::engine::evaluate_function: <node name>"; the
    # node's own backward event (on the backward track) lies inside it.
    # Matched by time only (a backward track is not the thread's), so
    # where engine threads run nodes at once (GPU), another thread's
    # node may lie inside too: one of them must be the named one.
    prefix = "autograd::engine::evaluate_function: "
    evf = [e for e in ops if e["name"].startswith(prefix)]
    bwd = sorted((e for e in ev if e.get("cat") == "backward"),
                 key=lambda e: e["ts"])
    bts = [e["ts"] for e in bwd]
    named = 0
    for f in evf:
        lo = bisect.bisect_left(bts, f["ts"])
        hi = bisect.bisect_right(bts, f["ts"] + f["dur"])
        inner = [b for b in bwd[lo:hi] if b["pid"] == f["pid"] and
                 b["ts"] + b["dur"] <= f["ts"] + f["dur"]]
        if not inner:
            continue
        if not any(b["name"] == f["name"][len(prefix):] for b in inner):
            fail("%r holds backward nodes %s, not its own"
                 % (f["name"], sorted({b["name"] for b in inner})))
        named += 1
    if nodes and named < len(nodes) - len(nodes) // len(steps):
        fail("%d of %d backward nodes inside their evaluate_function operator"
             % (named, len(nodes)))
    print("ops: %d cpu_op (%d names), %d Linear with their addmm, %d/%d arrows "
          "from operators, %d/%d nodes matched by Sequence number, %d "
          "evaluate_function operators named after their node"
          % (len(ops), len(names), inside, on_op, len(starts), have,
             len(nodes), named))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
