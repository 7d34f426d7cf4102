"""Communication inside backward, checked on a trace and its report
(tests/e2e/t_torch_comm.sh, t_torch2_fsdp.sh):

  check_comm.py ddp   TRACE REPORT.json REPORT.txt
  check_comm.py tp    TRACE REPORT.json REPORT.txt
  check_comm.py fsdp2 TRACE REPORT.json REPORT.txt
  check_comm.py fsdp1 TRACE REPORT.json REPORT.txt
  check_comm.py none  TRACE REPORT.json REPORT.txt

What every mode with communication checks, from the trace's own slices
(schema/trace-output.md, "Communication"):
  - a node's comm_us is the time of the outermost comm slices inside it
    on its thread, and no node without such a slice has comm_us;
  - a layer's backward span's comm_us is the sum of its own nodes' in the
    span; a pass group's totals' comm_us is its nodes' plus the comm
    slices in its passes outside any node;
  - the report's rows: a row's comm_ms > 0 exactly where the mode expects
    communication, the total is at least the rows' sum, the text table
    has its column, and no accumulate-grad hint blames parameter
    gradients for communication.
Per mode:
  ddp:   every AccumulateGrad node of a parameter holds one "DDP reducer"
         slice; one "DDP all-reduce wait" per synchronised pass, in the
         pass, in no node; half the passes synchronise (no_sync);
  tp:    every AllReduceGradBackward node holds one "all_reduce" slice;
         the rows of par.0 and par.1 alone have communication;
  fsdp2: post-backward nodes hold reduce-scatter slices; the rows of the
         sharded units alone have communication (blocks.1 and blocks.2 at
         least), the rest (the end-of-backward callback's) is unattributed;
  fsdp1: every unit's reduce-scatter runs in its flat parameter's
         AccumulateGrad (FSDP1's post-backward hook): each block's row has
         communication, and only the units' rows (the root holds head's);
  none:  no comm slice, no comm column, comm_ms 0 everywhere.
"""

import collections
import json
import sys

EPS = 0.0015  # us: ts and dur are written with three decimals


def inside(a, b):
    """Slice a lies within slice b (same pid/tid)."""
    return (a["pid"] == b["pid"] and a["tid"] == b["tid"] and
            a["ts"] >= b["ts"] - EPS and
            a["ts"] + a["dur"] <= b["ts"] + b["dur"] + EPS)


def outermost(slices):
    """The slices not inside another of the list."""
    out = []
    for s in sorted(slices, key=lambda e: (e["pid"], e["tid"], e["ts"], -e["dur"])):
        if out and inside(s, out[-1]):
            continue
        out.append(s)
    return out


def check_trace(ev, mode):
    comm = [e for e in ev if e.get("cat") == "comm" and e.get("ph") == "X"]
    nodes = [e for e in ev if e.get("cat") == "backward" and e.get("ph") == "X"]
    passes = [e for e in ev if e.get("cat") == "backward_pass"]
    if mode == "none":
        assert not comm, collections.Counter(e["name"] for e in comm)
        assert not any("comm_us" in e.get("args", {}) for e in ev)
        return
    assert comm, "no comm slice"
    by_thread = collections.defaultdict(list)
    for n in nodes:
        by_thread[(n["pid"], n["tid"])].append(n)
    top = outermost(comm)
    # Each outermost comm slice belongs to the innermost node holding it.
    node_comm = collections.defaultdict(float)
    held = collections.defaultdict(list)
    free = []
    for s in top:
        holders = [n for n in by_thread[(s["pid"], s["tid"])] if inside(s, n)]
        if holders:
            n = min(holders, key=lambda n: n["dur"])
            node_comm[id(n)] += s["dur"]
            held[id(n)].append(s)
        else:
            free.append(s)
    for n in nodes:
        got = n["args"].get("comm_us", 0)
        want = node_comm.get(id(n), 0)
        assert abs(got - want) <= EPS * (1 + len(held[id(n)])) * 2, (n, want)
    # Layer spans: their own nodes' communication.
    for sp in (e for e in ev if e.get("cat") == "layer_backward" and e.get("ph") == "X"):
        lay = sp["args"]["layer"]
        want = sum(n["args"].get("comm_us", 0) for n in nodes
                   if n["args"].get("layer") == lay and
                   n["ts"] >= sp["ts"] - EPS and n["ts"] + n["dur"] <= sp["ts"] + sp["dur"] + EPS)
        got = sp["args"].get("comm_us", 0)
        assert abs(got - want) <= 0.01 + 1e-6 * want, (sp, want)
    # Forward module calls: the comm slices inside them (theirs and their
    # sub-modules'), outside every pass.
    def in_a_pass(s):
        return any(s["ts"] >= p["ts"] - EPS and s["ts"] + s["dur"] <= p["ts"] + p["dur"] + EPS
                   for p in passes)
    fwd_free = [s for s in free if not in_a_pass(s)]
    for m in (e for e in ev if e.get("cat") == "module" and e.get("ph") == "X"
              and "phase" not in e.get("args", {})):
        want = sum(s["dur"] for s in fwd_free if inside(s, m))
        got = m.get("args", {}).get("comm_us", 0)
        assert abs(got - want) <= 0.01, (m, want)
    # Pass groups: totals at each group's end.
    totals = sorted((e for e in ev if e.get("name") == "backward totals"),
                    key=lambda e: e["ts"])
    in_pass = [s for s in free if any(
        s["ts"] >= p["ts"] - EPS and s["ts"] + s["dur"] <= p["ts"] + p["dur"] + EPS
        for p in passes)]
    want_all = sum(n["args"].get("comm_us", 0) for n in nodes) + \
        sum(s["dur"] for s in in_pass)
    got_all = sum(t["args"].get("comm_us", 0) for t in totals)
    assert abs(got_all - want_all) <= 0.01 * (1 + len(top)), (got_all, want_all)
    names = collections.Counter(s["name"] for s in top)
    print("%s: %d comm slices (%s), %d in nodes, %d in passes outside nodes, "
          "%d in forwards" % (mode, len(top), dict(names), len(top) - len(free),
                              len(in_pass), len(fwd_free)))
    if mode == "ddp":
        acc = [n for n in nodes if n["name"].endswith("AccumulateGrad") and
               n["args"].get("param")]
        assert acc
        for n in acc:
            assert [s["name"] for s in held[id(n)]] == ["DDP reducer"], (n, held[id(n)])
        waits = [s for s in top if s["name"] == "DDP all-reduce wait"]
        assert waits and all(s in in_pass for s in waits), waits
        assert 2 * len(waits) == len(passes), (len(waits), len(passes))
        in_nodes = [s for k in held for s in held[k]]
        assert all(s["name"] in ("DDP reducer", "DDP all-reduce wait")
                   for s in in_nodes + in_pass), names
    elif mode == "tp":
        ar = [n for n in nodes if n["name"] == "AllReduceGradBackward"]
        assert ar
        for n in ar:
            assert [s["name"] for s in held[id(n)]] == ["all_reduce"], (n, held[id(n)])
            assert n["args"]["layer"] in ("par.0", "par.1"), n
        assert not any(s["name"].startswith("DDP") for s in top)
    elif mode in ("fsdp2", "fsdp1"):
        rs = [s for k in held for s in held[k] if "reduce_scatter" in s["name"]]
        assert rs, names


def check_report(rep, text, mode):
    rows = {r["path"]: r for r in rep["layers"]}
    total = rep["summary"]["total"]["comm_ms"] if "summary" in rep else None
    if total is None:
        total = rep["total"]["comm_ms"]
    with_comm = {p for p, r in rows.items() if r["comm_ms"] > 0}
    if mode == "none":
        assert not with_comm and total == 0, with_comm
        assert not any(r["fwd_comm_ms"] for r in rows.values())
        assert "fwd comm" not in text and "bwd comm" not in text
        return
    assert "fwd comm" in text and "bwd comm" in text, text
    assert total >= sum(r["comm_ms"] for r in rows.values()) - 1e-6
    if mode == "ddp":
        params = {"embed", "stem.conv", "stem.norm", "mix.0", "mix.2", "ln", "out"}
        assert with_comm == params, with_comm
    elif mode == "tp":
        assert with_comm == {"par.0", "par.1"}, with_comm
    elif mode == "fsdp2":
        # Each sharded unit's reduce-scatter runs in its post-backward
        # node, except the first block's and the root's (inputs need no
        # gradient: FSDP's end-of-backward callback, in no node).
        units = {"blocks.0", "blocks.1", "blocks.2", "head", "FSDPNet"}
        assert {"blocks.1", "blocks.2"} <= with_comm <= units, with_comm
        # Each unit all-gathers its parameters in its pre-forward hook.
        fwd = {p for p, r in rows.items() if r["fwd_comm_ms"] > 0}
        assert {"blocks.0", "blocks.1", "blocks.2", "FSDPNet"} <= fwd, fwd
        un = rep["unattributed"]["comm_ms"]
        assert un > 0 and abs(total - un - sum(r["comm_ms"] for r in rows.values())) < 1e-3, (total, un)
    elif mode == "fsdp1":
        blocks = {"blocks.0", "blocks.1", "blocks.2"}
        assert blocks <= with_comm <= blocks | {"Net", "head"}, with_comm
    if mode == "fsdp1":
        return  # a flat parameter's AccumulateGrad also copies: compute
    for line in text.splitlines():
        assert "[accumulate-grad]" not in line, line


def main():
    mode, trace, rep, txt = sys.argv[1:5]
    doc = json.load(open(trace))
    ev = doc["traceEvents"] if isinstance(doc, dict) else doc
    check_trace(ev, mode)
    check_report(json.load(open(rep)), open(txt).read(), mode)


if __name__ == "__main__":
    main()
