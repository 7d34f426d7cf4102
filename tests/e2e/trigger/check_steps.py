#!/usr/bin/env python3
"""Checks that iterations are training steps (schema/control.md, "Iterations").

usage: check_steps.py steps FULL.json --steps S [--passes K]
         the full capture has exactly ProfilerStep#0..#S-1, in time order,
         each holding exactly K backward passes (the "backward pass #N"
         spans, whose pass number is the step's)
       check_steps.py window FULL.json --layer L --iteration N --segments K
                     [--pass P] FILE...
         exactly one window file, for iteration N, done, with at least K
         segments (one per pass of the layer; a pass may give more: a
         parameter's AccumulateGrad after the layer's last counted node
         resumes the window, another layer's node pauses it);
         its backward nodes of L (with sequence numbers) are exactly the
         full capture's nodes of L inside ProfilerStep#N (with --pass,
         inside the step's P-th backward pass); the runs are
         deterministic: same nodes, same sequence numbers
Exits 1 with the reason on the first violation.
"""

import argparse
import fnmatch
import json
import sys


def fail(msg):
    sys.exit("check_steps: " + msg)


def load(path):
    with open(path) as f:
        return json.load(f)


def steps(doc):
    # ProfilerStep#N: cat user_annotation on the stepping thread, or
    # iteration on the Iterations track (schema/trace-output.md).
    out = [e for e in doc["traceEvents"]
           if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#")
           and e.get("cat") in ("iteration", "user_annotation")]
    out.sort(key=lambda e: e["ts"])
    return out


def passes(doc):
    return [e for e in doc["traceEvents"]
            if e.get("ph") == "X" and e.get("cat") == "backward_pass"]


def inside(e, span):
    return span["ts"] <= e["ts"] and e["ts"] + e.get("dur", 0) <= span["ts"] + span["dur"] + 1e-3


def layer_of(glob, layer):
    if not layer:
        return False
    parts = layer.split(".")
    return any(fnmatch.fnmatchcase(".".join(parts[:i]), glob)
               for i in range(1, len(parts) + 1))


def nodes(doc, glob, span=None):
    out = set()
    for e in doc["traceEvents"]:
        if e.get("ph") != "X" or e.get("cat") != "backward":
            continue
        a = e.get("args", {})
        if "seq" not in a or not layer_of(glob, a.get("layer")):
            continue
        if span is not None and not inside(e, span):
            continue
        out.add((e["name"], a["seq"]))
    return out


def cmd_steps(a):
    doc = load(a.full)
    st = steps(doc)
    names = [e["name"] for e in st]
    want = ["ProfilerStep#%d" % i for i in range(a.steps)]
    if names != want:
        fail("iterations %s, want %s" % (names, want))
    ps = passes(doc)
    for i, s in enumerate(st):
        mine = [p for p in ps if inside(p, s)]
        if a.passes is not None and len(mine) != a.passes:
            fail("%s holds %d backward passes, want %d" % (s["name"], len(mine), a.passes))
        bad = [p["args"].get("pass") for p in mine if p["args"].get("pass") != i]
        if bad:
            fail("%s holds passes numbered %s" % (s["name"], bad))
    print("steps: %s, %s passes each" % (names, a.passes))


def cmd_window(a):
    if len(a.files) != 1:
        fail("expected one window file, got %s" % a.files)
    doc = load(a.files[0])
    m = doc.get("gradtrace", {}).get("window") or {}
    for k, v in (("iteration", a.iteration), ("state", "done"), ("layer", a.layer)):
        if m.get(k) != v:
            fail("%s: window %s is %r, want %r" % (a.files[0], k, m.get(k), v))
    if (m.get("segments") or 0) < a.segments:
        fail("%s: window segments is %r, want at least %d"
             % (a.files[0], m.get("segments"), a.segments))
    full = load(a.full)
    span = [s for s in steps(full) if s["name"] == "ProfilerStep#%d" % a.iteration]
    if len(span) != 1:
        fail("full capture has %d ProfilerStep#%d" % (len(span), a.iteration))
    ref = nodes(full, a.layer, span[0])
    got = nodes(doc, a.layer)
    if not ref:
        fail("full capture has no %s nodes in step %d" % (a.layer, a.iteration))
    if a.pass_ is not None:
        # One pass of the step: the nodes of its pass_-th backward pass.
        ps = sorted((p for p in passes(full) if inside(p, span[0])),
                    key=lambda p: p["ts"])
        if a.pass_ >= len(ps):
            fail("step %d has %d passes" % (a.iteration, len(ps)))
        ref = nodes(full, a.layer, ps[a.pass_])
    if got != ref:
        fail("window nodes differ from step %d's: missing %s, extra %s"
             % (a.iteration, sorted(ref - got)[:4], sorted(got - ref)[:4]))
    print("window: iteration %d, %d segments, %d %s nodes of the step"
          % (a.iteration, m.get("segments"), len(got), a.layer))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("check", choices=["steps", "window"])
    ap.add_argument("full")
    ap.add_argument("files", nargs="*")
    ap.add_argument("--steps", type=int)
    ap.add_argument("--passes", type=int)
    ap.add_argument("--layer")
    ap.add_argument("--iteration", type=int)
    ap.add_argument("--segments", type=int)
    ap.add_argument("--pass", dest="pass_", type=int)
    a = ap.parse_intermixed_args()
    (cmd_steps if a.check == "steps" else cmd_window)(a)


if __name__ == "__main__":
    main()
