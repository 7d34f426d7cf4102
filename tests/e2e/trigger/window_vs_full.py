#!/usr/bin/env python3
"""A backward window against the full trace of the same run (capture on
and a trigger armed: the window's records are copies of the main trace's,
so the same node has the same name, layer and timestamps in both).

For window file W (phase backward, layer glob L, iteration N) and main
trace F, checks:
  - W's backward nodes are exactly F's nodes of iteration N (its
    ProfilerStep#N span) whose layer is L's match or a descendant of one,
    AccumulateGrad nodes included, compared by (name, layer, ts), besides
    the CompiledFunctionBackward nodes of compiled graphs that hold L
    (F's too, with their own layer);
  - no node in W lacks a layer;
  - `gradtrace report --format json` of W gives, for every row of L's
    layers, the same node counts and times as the report of F restricted
    to iteration N (`--iterations N-N`), the same classes, in the same
    (model) order.
Prints one line of figures ("window: K of M nodes, ...") and exits 1 on
any difference, naming it.

usage: window_vs_full.py GRADTRACE FULL.json WINDOW.json
"""
import collections
import fnmatch
import json
import re
import subprocess
import sys

FIELDS = ("bwd_nodes", "bwd_self_nodes", "bwd_ms", "bwd_self_ms",
          "accumulate_grad_ms")


def load(p):
    with open(p) as f:
        return json.load(f)


def literal_indices(glob):
    """The agent's rule (agent/trigger_glob.c): "[3]" or "[*]" right after
    a name character is an application index, literal."""
    return re.sub(r"(?<=[A-Za-z0-9_])\[(\d+|\*)\]",
                  lambda m: "[[]" + m.group(1) + "[]]", glob)


def matches(glob, layer):
    if not layer:
        return False
    parts = layer.split(".")
    g = literal_indices(glob)
    return any(fnmatch.fnmatchcase(".".join(parts[:i]), g)
               for i in range(1, len(parts) + 1))


def nodes(doc, lo=None, hi=None):
    out = []
    for e in doc["traceEvents"]:
        if e.get("ph") != "X" or e.get("cat") != "backward":
            continue
        if lo is not None and not lo <= e["ts"] <= hi:
            continue
        out.append((e["name"], e.get("args", {}).get("layer"), e["ts"]))
    return out


def report(gt, path, it=None):
    cmd = [gt, "report", "--format", "json", path]
    if it is not None:
        cmd[2:2] = ["--iterations", "%d-%d" % (it, it)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("FAIL: %s: %s" % (" ".join(cmd), r.stderr.strip()))
    return {l["path"]: l for l in json.loads(r.stdout)["layers"]}


def main():
    gt, full_p, win_p = sys.argv[1:4]
    full, win = load(full_p), load(win_p)
    m = win["gradtrace"]["window"]
    glob, it = m["layer"], m["iteration"]
    if m.get("phase") != "backward" or m.get("state") != "done":
        sys.exit("FAIL: %s is not a finished backward window: %s" % (win_p, m))
    steps = [e for e in full["traceEvents"]
             if e.get("ph") == "X" and e.get("name") == "ProfilerStep#%d" % it]
    if len(steps) != 1:
        sys.exit("FAIL: %s has %d ProfilerStep#%d spans" % (full_p, len(steps), it))
    lo, hi = steps[0]["ts"], steps[0]["ts"] + steps[0]["dur"]
    step = nodes(full, lo, hi)
    want = collections.Counter(n for n in step if matches(glob, n[1]))
    got = collections.Counter(nodes(win))
    # A compiled graph's backward node runs the layer's kernels (a window
    # on a layer inside the graph spans it); it keeps its own layer.
    hosts = collections.Counter(n for n in got if n[0] == "CompiledFunctionBackward"
                                and n in step and not matches(glob, n[1]))
    got -= hosts
    bad = []
    unlabelled = sum(c for n, c in got.items() if not n[1])
    if unlabelled:
        bad.append("%d window nodes without a layer" % unlabelled)
    missing, extra = want - got, got - want
    if missing:
        bad.append("%d of the full trace's nodes missing, e.g. %s"
                   % (sum(missing.values()), sorted(missing)[:3]))
    if extra:
        bad.append("%d nodes not the full trace's for %s, e.g. %s"
                   % (sum(extra.values()), glob, sorted(extra)[:3]))
    acc = sum(c for n, c in want.items() if n[0].endswith("AccumulateGrad"))
    rows_f, rows_w = report(gt, full_p, it), report(gt, win_p)
    rows = sorted(p for p in rows_f if matches(glob, p) and rows_f[p]["bwd_nodes"])
    if not rows:
        bad.append("the full trace's report has no rows of %s" % glob)
    differ = set()
    for p in rows:
        w = rows_w.get(p)
        if w is None:
            bad.append("row %s missing from the window's report" % p)
            differ.add(p)
            continue
        for k in FIELDS:
            if abs((w.get(k) or 0) - (rows_f[p].get(k) or 0)) > 1e-6:
                bad.append("row %s: %s %s in the window, %s in the full trace"
                           % (p, k, w.get(k), rows_f[p].get(k)))
                differ.add(p)
    # The window's table reads as the full one: classes, and model order.
    for p in rows:
        if p in rows_w and rows_w[p].get("class") != rows_f[p].get("class"):
            bad.append("row %s: class %r in the window, %r in the full trace"
                       % (p, rows_w[p].get("class"), rows_f[p].get("class")))
    order_w = [p for p in rows_w if p in rows]
    if order_w != [p for p in rows_f if p in rows and p in rows_w]:
        bad.append("window rows in another order: %s, full trace %s"
                   % (order_w, [p for p in rows_f if p in rows]))
    print("window %s it%d: %d of %d nodes (%d AccumulateGrad), %d unlabelled, "
          "%d extra, %d compiled graphs' nodes, %d segments; %d rows equal the "
          "full trace's"
          % (glob, it, sum((got & want).values()), sum(want.values()), acc,
             unlabelled, sum(extra.values()), sum(hosts.values()), m.get("segments", 0),
             len(rows) - len(differ)))
    for b in bad[:12]:
        print("FAIL: " + b)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
