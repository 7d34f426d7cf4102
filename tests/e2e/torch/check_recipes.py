"""Compares the agent's .gtr of a recipe with the truth recipes.py wrote.

Usage: check_recipes.py TRUTH.json TRACE.gtr [--window LAYER CALLS_PER_ITERATION]

Every node and every call is compared, printing each difference and
exiting 1 on any:
  - creation: every NODE_CREATED whose (fwd_tid, seq) torch's profiler
    saw created is attributed to the same layer call ("path#k": the k-th
    call of that module path on the thread) as torch says, including
    nodes created in a recomputed forward and second-order nodes; a node
    torch saw no op create (GraphRoot) has no layer; per fwd_tid the
    recorded sequence numbers have no gap (no creation was missed);
  - the backward node open on the thread when a node was created is the
    one torch's evaluate_function event around its creating op names
    (fwd_tid, seq), or none on both sides;
  - backward nodes: the numbered ones are exactly torch's, by (fwd_tid,
    seq, name), and every begin has its end;
  - module calls: the same calls as torch's ranges, and a call carries
    GT_SCOPE_F_RECOMPUTE exactly when torch ran it inside a backward
    node, on its begin and its end alike;
  - AccumulateGrad: as many as torch ran; each one whose hook scope names
    a parameter "<owner>|<name>" is followed by one BWD_NODE_LAYER with
    exactly that owner and name; input leaves ("leaf|" or no hook) get
    none, and no other node gets one;
  - no warning in the trace.
With --window (a trigger-only capture), see check_window.
"""

import collections
import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import gtr  # noqa: E402

U64 = gtr.SEQ_UNKNOWN


def walk(t):
    """One pass over each thread's records in stream order."""
    calls = []        # [tid, path, begin_flags, end_flags, begin, end]
    created = []      # dicts: key, layer, ts, tid, open_bwd
    bwd = []          # dicts: name, seq, fwd_tid, layer rec, user scopes
    errors = []
    mods = collections.defaultdict(list)
    nodes = collections.defaultdict(list)
    last = {}
    for e in t.events:
        tid, typ = e["tid"], e["type"]
        if typ == gtr.T_SCOPE_BEGIN and e["kind"] == gtr.SCOPE_MODULE:
            c = [tid, t.s(e["name"]), e["flags"], None, e["ts"], None]
            mods[tid].append(c)
            calls.append(c)
        elif typ == gtr.T_SCOPE_END and e["kind"] == gtr.SCOPE_MODULE:
            if mods[tid]:
                c = mods[tid].pop()
                c[3], c[5] = e["flags"], e["ts"]
        elif typ == gtr.T_SCOPE_BEGIN and e["kind"] == gtr.SCOPE_USER:
            if nodes[tid]:
                nodes[tid][-1]["user"].append(t.s(e["name"]))
        elif typ == gtr.T_NODE_CREATED:
            top = nodes[tid][-1] if nodes[tid] else None
            created.append(dict(
                key=(e["fwd_tid"], e["seq"]), layer=t.s(e["layer"]),
                ts=e["ts"], tid=tid,
                open_bwd=(top["fwd_tid"], top["seq"]) if top else None))
        elif typ == gtr.T_BWD_BEGIN:
            n = dict(name=t.s(e["name"]), seq=e["seq"], fwd_tid=e["fwd_tid"],
                     layer=[], user=[], ended=False)
            nodes[tid].append(n)
            bwd.append(n)
        elif typ == gtr.T_BWD_NODE_LAYER:
            prev = last.get(tid)
            if prev is None or prev["type"] != gtr.T_BWD_BEGIN:
                errors.append("BWD_NODE_LAYER not right after a node begin")
            elif nodes[tid]:
                nodes[tid][-1]["layer"].append(
                    (t.s(e["layer"]), t.s(e["param"])))
        elif typ == gtr.T_BWD_END:
            if nodes[tid]:
                nodes[tid].pop()["ended"] = True
        last[tid] = e
    return calls, created, bwd, errors


def label_creations(calls, created):
    """layer call label "path#k" of each creation (k per thread and path)."""
    by = collections.defaultdict(list)
    for c in sorted(calls, key=lambda c: c[4]):
        by[(c[0], c[1])].append(c)
    for n in created:
        n["label"] = ""
        if not n["layer"]:
            continue
        n["label"] = n["layer"] + "#?"
        for k, c in enumerate(by.get((n["tid"], n["layer"]), []), 1):
            if c[4] <= n["ts"] and (c[5] is None or n["ts"] <= c[5]):
                n["label"] = "%s#%d" % (n["layer"], k)  # innermost: last
    return by


def check_creations(truth, created, errors):
    want = {(c[0], c[1]): c for c in truth["creators"]}
    ran = {(b[0], b[1]) for b in truth["backward"]}
    seen = set()
    per_tid = collections.defaultdict(set)
    second_order = 0
    for n in created:
        key = n["key"]
        seen.add(key)
        per_tid[key[0]].add(key[1])
        w = want.get(key)
        if w is None:
            if n["label"]:
                errors.append("node %s: layer %s, torch saw no op create it"
                              % (key, n["label"]))
            continue
        if n["label"] != w[2]:
            errors.append("node %s: layer %r, torch says %r"
                          % (key, n["label"], w[2]))
        tb = None if w[3] < 0 and w[4] < 0 else (w[3], w[4])
        ob = n["open_bwd"]
        if ob is not None and ob[1] == U64:
            ob = (ob[0], -1)
        if ob != tb:
            errors.append("node %s: created inside backward node %s, torch "
                          "says %s" % (key, ob, tb))
        if tb is not None:
            second_order += 1
    for key in sorted(ran - seen):
        errors.append("node %s ran backward but has no NODE_CREATED" % (key,))
    for tid, seqs in per_tid.items():
        gaps = set(range(min(seqs), max(seqs) + 1)) - seqs
        if gaps:
            errors.append("fwd_tid %d: creations missing for seq %s"
                          % (tid, sorted(gaps)[:10]))
    return second_order


def check_calls(truth, by, errors):
    tids = sorted({k[0] for k in by})
    tmap = {}
    # Threads are matched by order of first call (one thread per recipe).
    truth_tids = sorted({int(k.split(":", 1)[0]) for k in truth["calls"]})
    for a, b in zip(tids, truth_tids):
        tmap[a] = b
    got = {}
    for (tid, path), cs in by.items():
        for k, c in enumerate(cs, 1):
            lab = "%d:%s#%d" % (tmap.get(tid, -1), path, k)
            if c[2] != c[3]:
                errors.append("call %s: begin flags %s, end flags %s"
                              % (lab, c[2], c[3]))
            got[lab] = bool(c[2] & gtr.SCOPE_F_RECOMPUTE)
    want = truth["calls"]
    for lab in sorted(set(got) | set(want)):
        if lab not in got:
            errors.append("call %s: torch only" % lab)
        elif lab not in want:
            errors.append("call %s: trace only" % lab)
        elif got[lab] != want[lab]:
            errors.append("call %s: recompute flag %s, torch says %s"
                          % (lab, got[lab], want[lab]))
    return sum(want.values())


def check_backward(truth, bwd, errors):
    got = collections.Counter((n["fwd_tid"], n["seq"], n["name"])
                              for n in bwd if n["seq"] != U64)
    want = collections.Counter(tuple(b) for b in truth["backward"])
    for k in sorted((got - want).keys()):
        errors.append("backward node %s: trace only" % (k,))
    for k in sorted((want - got).keys()):
        errors.append("backward node %s: torch only" % (k,))
    if any(not n["ended"] for n in bwd):
        errors.append("a backward node has no end")
    acc = [n for n in bwd if "AccumulateGrad" in n["name"]]
    if len(acc) != truth["acc_total"]:
        errors.append("%d AccumulateGrad nodes, torch ran %d"
                      % (len(acc), truth["acc_total"]))
    params = leaves = 0
    for n in bwd:
        hooks = [u for u in n["user"] if "|" in u]
        if "AccumulateGrad" not in n["name"]:
            if n["layer"]:
                errors.append("%s carries BWD_NODE_LAYER %s"
                              % (n["name"], n["layer"]))
            continue
        want_l = [tuple(h.split("|", 1)) for h in hooks if h != "leaf|"]
        if want_l:
            params += 1
        else:
            leaves += 1
        if n["layer"] != want_l:
            errors.append("AccumulateGrad of %s: BWD_NODE_LAYER %s"
                          % (hooks or "an unhooked leaf", n["layer"]))
    return params, leaves


def check_window(truth, t, layer, calls_per_iter):
    """A trigger-only capture (layer=LAYER,phase=backward): one window,
    whose numbered backward nodes are exactly the nodes torch says the
    recomputed call of LAYER (or of a module under it) in the window's
    iteration created, and that ran backward. LAYER is called
    calls_per_iter times per iteration, the recompute last."""
    errors = []
    wins = t.of(gtr.T_WINDOW_BEGIN)
    it = wins[0]["iteration"] if wins else 0
    call = calls_per_iter * (it + 1)
    under = lambda lab: lab.rsplit("#", 1)[1] == str(call) and (
        lab.rsplit("#", 1)[0] == layer or
        lab.rsplit("#", 1)[0].startswith(layer + "."))
    ran = {(b[0], b[1]) for b in truth["backward"]}
    want = {(c[0], c[1]) for c in truth["creators"]
            if c[2] and under(c[2])} & ran
    got = {(n["fwd_tid"], n["seq"]) for n in t.backward_nodes()
           if n["seq"] != U64}
    if t.counts[gtr.T_WINDOW_BEGIN] < 1:
        errors.append("no window opened")
    if got != want:
        errors.append("window nodes: trace only %s, torch only %s"
                      % (sorted(got - want), sorted(want - got)))
    print("window %s, iteration %d (call %d): %d backward nodes (torch %d)"
          % (layer, it, call, len(got), len(want)))
    return errors


def main():
    truth = json.load(open(sys.argv[1]))
    t = gtr.Trace(sys.argv[2])
    if len(sys.argv) > 3 and sys.argv[3] == "--window":
        errors = check_window(truth, t, sys.argv[4], int(sys.argv[5]))
        for e in errors:
            print("  MISMATCH", e)
        sys.exit(1 if errors else 0)
    calls, created, bwd, errors = walk(t)
    by = label_creations(calls, created)
    if t.warnings:
        errors.append("warnings: %s" % t.warning_texts())
    second = check_creations(truth, created, errors)
    recomputed = check_calls(truth, by, errors)
    params, leaves = check_backward(truth, bwd, errors)
    print("%s (torch %s): %d nodes created (%d inside backward nodes), "
          "%d backward nodes, %d module calls (%d recomputed), "
          "AccumulateGrad %d of parameters + %d of other leaves"
          % (truth["case"], truth["torch"], len(created), second, len(bwd),
             len(calls), recomputed, params, leaves))
    for e in errors[:60]:
        print("  MISMATCH", e)
    if len(errors) > 60:
        print("  ... %d more" % (len(errors) - 60))
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
