#!/usr/bin/env python3
"""Checks capture-window trace files against what the trigger asked for.

usage: check_window.py CHECK [options] FILE...

Checks (each exits 1 with a reason on the first violation):
  backward  --layer GLOB --iteration N [--full FULL.json] [--ratio R] FILES
      one window file; its metadata names the phase, iteration and layer;
      every backward node with a sequence number is attributed to a layer
      matching GLOB or a child of one; with --full, the (name, seq) set of
      those nodes equals the full capture's for the same backward pass, and
      the window file is at most 1/R of the full trace's size
  forward   --layer GLOB --iteration N [--segments K] FILES
      one window file with module forward spans only of matching layers
      (and their children), every matching layer's forward present
  both      --layer GLOB --iteration N FILES
      one window file with both the matching forward spans and backward nodes
  count     --layer GLOB --count K FILES
      K window files for K consecutive iterations of one trigger
  ranks     --ranks R1,R2 FILES
      one window file per rank, all for the same iteration, with
      baseTimeNanoseconds within one second of each other
"""

import argparse
import fnmatch
import json
import os
import sys


def fail(msg):
    sys.exit("check_window: " + msg)


def load(path):
    with open(path) as f:
        return json.load(f)


def meta(doc):
    w = doc.get("gradtrace", {}).get("window")
    if not isinstance(w, dict):
        fail("no gradtrace.window metadata")
    return w


def matches(glob, layer, children=True):
    """layer is glob's match or (with children) a descendant of one."""
    if not layer:
        return False
    if fnmatch.fnmatchcase(layer, glob):
        return True
    parts = layer.split(".")
    return children and any(fnmatch.fnmatchcase(".".join(parts[:i]), glob)
                            for i in range(1, len(parts)))


def bwd_nodes(doc, lo=None, hi=None):
    """(name, seq, layer) of backward nodes with a sequence number."""
    out = []
    for e in doc["traceEvents"]:
        if e.get("ph") != "X" or e.get("cat") != "backward":
            continue
        a = e.get("args", {})
        if "seq" not in a:
            continue
        if lo is not None and not (lo <= e["ts"] <= hi):
            continue
        out.append((e["name"], a["seq"], a.get("layer")))
    return out


def fwd_layers(doc):
    """Layer paths of the module forward spans (one entry per call)."""
    out = []
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") == "module":
            out.append(e["name"])
    return out


def pass_span(doc, iteration):
    for e in doc["traceEvents"]:
        if e.get("cat") == "backward_pass" and e.get("args", {}).get("pass") == iteration:
            return e["ts"], e["ts"] + e["dur"]
    fail("full capture has no backward pass %d" % iteration)


def one_window(files, phase, iteration, layer):
    if len(files) != 1:
        fail("expected exactly one window file, got %d: %s" % (len(files), files))
    doc = load(files[0])
    m = meta(doc)
    want = {"phase": phase, "iteration": iteration, "layer": layer, "state": "done"}
    for k, v in want.items():
        if m.get(k) != v:
            fail("%s: window %s is %r, want %r" % (files[0], k, m.get(k), v))
    if ("phase=%s" % phase) not in m.get("spec", ""):
        fail("spec %r does not say the phase" % m.get("spec"))
    return doc


def check_backward_nodes(doc, glob, what):
    nodes = bwd_nodes(doc)
    if not nodes:
        fail("%s: no backward nodes" % what)
    bad = [n for n in nodes if not matches(glob, n[2])]
    if bad:
        fail("%s: %d nodes not attributed to %s, e.g. %s" % (what, len(bad), glob, bad[:3]))
    return nodes


def check_forward(doc, glob, what):
    layers = fwd_layers(doc)
    if not layers:
        fail("%s: no module forward spans" % what)
    # Span names are "<path> (<Class>) forward".
    paths = [n.split(" ")[0] for n in layers]
    bad = [p for p in paths if not matches(glob, p)]
    if bad:
        fail("%s: forward spans outside %s: %s" % (what, glob, bad[:5]))
    return paths


def cmd_backward(a):
    doc = one_window(a.files, "backward", a.iteration, a.layer)
    nodes = check_backward_nodes(doc, a.layer, a.files[0])
    if fwd_layers(doc):
        fail("a backward window holds forward spans")
    # "path (Class) backward": the class from the agent's layer info.
    spans = [e["name"] for e in doc["traceEvents"] if e.get("cat") == "layer_backward"]
    paths = [n.split(" ")[0] for n in spans if n.endswith(" backward")]
    for want in set(n[2] for n in nodes):
        if paths.count(want) != 1:
            fail("layer %s: %d backward spans, want 1 (%s)" % (want, paths.count(want), spans))
    noclass = [n for n in spans if " (" not in n]
    if noclass:
        fail("backward spans without their layer's class: %s" % noclass[:3])
    if a.full:
        full = load(a.full)
        lo, hi = pass_span(full, a.iteration)
        ref = set((n, s) for n, s, l in bwd_nodes(full, lo, hi) if matches(a.layer, l))
        got = set((n, s) for n, s, _ in nodes)
        if not ref:
            fail("full capture has no %s nodes in pass %d" % (a.layer, a.iteration))
        if got != ref:
            fail("window nodes differ from the full capture: missing %s, extra %s"
                 % (sorted(ref - got)[:5], sorted(got - ref)[:5]))
        ws, fs = os.path.getsize(a.files[0]), os.path.getsize(a.full)
        if ws * a.ratio > fs:
            fail("window file %d bytes is more than 1/%d of the full trace (%d)" % (ws, a.ratio, fs))
        print("backward: %d nodes match the full capture; window %d bytes, full %d (1/%.0f)"
              % (len(got), ws, fs, fs / ws))
    else:
        print("backward: %d nodes, all in %s" % (len(nodes), a.layer))


def cmd_forward(a):
    doc = one_window(a.files, "forward", a.iteration, a.layer)
    paths = check_forward(doc, a.layer, a.files[0])
    if bwd_nodes(doc):
        fail("a forward window holds backward nodes")
    tops = sorted(set(p for p in paths if fnmatch.fnmatchcase(p, a.layer)))
    if a.expect and tops != sorted(a.expect.split(",")):
        fail("forward spans of %s, want %s" % (tops, a.expect))
    for t in tops:
        if paths.count(t) != 1:
            fail("%s forward %d times in one iteration" % (t, paths.count(t)))
    if a.segments and meta(doc).get("segments") != a.segments:
        fail("segments %r, want %d" % (meta(doc).get("segments"), a.segments))
    print("forward: %d spans of %s" % (len(paths), tops))


def cmd_both(a):
    doc = one_window(a.files, "both", a.iteration, a.layer)
    paths = check_forward(doc, a.layer, a.files[0])
    nodes = check_backward_nodes(doc, a.layer, a.files[0])
    print("both: %d forward spans, %d backward nodes" % (len(paths), len(nodes)))


def cmd_count(a):
    if len(a.files) != a.count:
        fail("expected %d window files, got %d: %s" % (a.count, len(a.files), a.files))
    its, ids = [], set()
    for f in a.files:
        doc = load(f)
        m = meta(doc)
        if m.get("state") != "done" or m.get("layer") != a.layer:
            fail("%s: %s" % (f, m))
        its.append(m["iteration"])
        ids.add(m["id"])
        if m["phase"] in ("backward", "both"):
            check_backward_nodes(doc, a.layer, f)
        if m["phase"] in ("forward", "both"):
            check_forward(doc, a.layer, f)
    its.sort()
    if its != list(range(its[0], its[0] + a.count)) or len(ids) != a.count:
        fail("iterations %s / window ids %s are not %d consecutive windows" % (its, ids, a.count))
    print("count: windows for iterations %s" % its)


def cmd_ranks(a):
    want = sorted(int(r) for r in a.ranks.split(","))
    got, its, bases = [], set(), []
    for f in a.files:
        doc = load(f)
        m = meta(doc)
        got.append(doc["gradtrace"]["rank"])
        its.add(m["iteration"])
        bases.append(doc["baseTimeNanoseconds"])
        check_backward_nodes(doc, m["layer"], f)
    if sorted(got) != want:
        fail("ranks of the window files %s, want %s" % (sorted(got), want))
    if len(its) != 1:
        fail("windows of different iterations: %s" % its)
    if max(bases) - min(bases) >= 1e9:
        fail("baseTimeNanoseconds %s are not within one second" % bases)
    print("ranks: %s, iteration %s, bases %.3f ms apart" % (got, its.pop(), (max(bases) - min(bases)) / 1e6))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("check", choices=["backward", "forward", "both", "count", "ranks"])
    ap.add_argument("--layer")
    ap.add_argument("--iteration", type=int)
    ap.add_argument("--full")
    ap.add_argument("--ratio", type=int, default=40)
    ap.add_argument("--count", type=int)
    ap.add_argument("--segments", type=int)
    ap.add_argument("--expect")
    ap.add_argument("--ranks")
    ap.add_argument("files", nargs="*")
    a = ap.parse_intermixed_args()
    {"backward": cmd_backward, "forward": cmd_forward, "both": cmd_both,
     "count": cmd_count, "ranks": cmd_ranks}[a.check](a)


if __name__ == "__main__":
    main()
