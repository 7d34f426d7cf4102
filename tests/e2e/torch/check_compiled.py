#!/usr/bin/env python3
"""Checks of tests/e2e/t_torch2_compiled.sh (see there) on its directory:
plain.out, rec.out (losses), rec/ (the recorded run's traces and .gtr),
report.txt. Prints, per compiled case, the share of its compiled
backward time in one layer / fused ancestors / nothing (the issue's
figures). Exit 1 on any failure, each one line."""
import glob
import re
import json
import os
import subprocess
import sys

D = sys.argv[1]
ROOT = os.environ.get("ROOT", os.path.join(os.path.dirname(__file__), "..", "..", ".."))
GT = os.path.join(ROOT, os.environ.get("BUILD", "build"), "gradtrace")
CASES = ["mlp:whole", "mlp:block", "decoder:whole", "ckpt:whole", "brk:whole",
         "mlp:eager"]
STEPS = 6
bad = []


def fail(msg):
    bad.append(msg)
    print("FAIL " + msg)


def losses(name):
    out = {}
    with open(os.path.join(D, name)) as f:
        for line in f:
            if line.startswith("loss "):
                _, case, rest = line.split(" ", 2)
                out[case] = rest.split()
    return out


plain, rec = losses("plain.out"), losses("rec.out")
for c in CASES:
    if c not in plain or c not in rec:
        fail("%s: no losses (plain %s, recorded %s)" % (c, c in plain, c in rec))
    elif plain[c] != rec[c]:
        fail("%s: losses differ under gradtrace: %s vs %s" % (c, rec[c], plain[c]))

mains = [p for p in glob.glob(os.path.join(D, "rec", "compiled_models-pid*.pt.trace.json"))
         if re.search(r"-pid[0-9]+\.pt\.trace\.json$", p)]
if len(mains) != 1:
    fail("expected one main trace of the training process, got %s" % mains)
    sys.exit(1)
main = mains[0]
with open(main) as f:
    doc = json.load(f)
ev = doc["traceEvents"]
an = doc["gradtrace"]["anomalies"]
for k in ("compiled_unmatched", "compiled_dropped", "overlap_dropped"):
    if an.get(k):
        fail("anomaly %s = %d" % (k, an[k]))

# Every operator a region ran directly carries its call: a kernel's
# profiling scope (graph_<id>_...) always does.
regions = [e for e in ev if e.get("cat") == "compiled" and e.get("ph") == "X"]
if not regions:
    fail("no compiled regions in the trace")
kern = [e for e in ev if e.get("cat") == "cpu_op" and e["name"].startswith("graph_")]
if not kern:
    fail("no compiled kernel scopes in the trace")
for e in kern:
    a = e.get("args", {})
    if a.get("mark") not in ("module", "fused", "unowned") or \
            (a.get("mark") != "unowned" and not a.get("layer")):
        fail("kernel %s at %.3f has no layer or mark: %s" % (e["name"], e["ts"], a))
        break
phases = {e.get("args", {}).get("phase") for e in kern}
if not {"forward", "backward"} <= phases:
    fail("kernel phases seen: %s" % phases)
rc = [e for e in ev if e.get("cat") == "cpu_op" and
      e.get("args", {}).get("phase") == "recompute"]
print("recompute calls (ckpt:whole's checkpointed block): %d" % len(rc))


def report(case_i, path):
    a = case_i * STEPS + 1  # the compiling step left out
    r = subprocess.run([GT, "report", "--format", "json", "--iterations",
                        "%d-%d" % (a, case_i * STEPS + STEPS - 1), path],
                       capture_output=True, text=True)
    if r.returncode != 0:
        fail("report --iterations for case %d: %s" % (case_i, r.stderr.strip()))
        return None
    return json.loads(r.stdout)


# The training process's recording (inductor's compile workers run the
# same script name and record too).
gtr = [main[:-len(".pt.trace.json")] + ".gtr"]
if not os.path.exists(gtr[0]):
    fail("no %s (--raw)" % gtr[0])
    gtr = []
for i, c in enumerate(CASES):
    j = report(i, main)
    if j is None:
        continue
    if gtr:
        jg = report(i, gtr[0])
        if jg is not None and jg["layers"] != j["layers"]:
            fail("%s: report of the .gtr differs from the trace's" % c)
    rows = {l["path"]: l for l in j["layers"]}
    # Rows of this case only (the table names every layer of the run).
    blocks = sorted(p for p in rows if p.count(".") == 1 and
                    p.startswith("blocks.") and rows[p]["fwd_calls"] > 0)
    if not blocks:
        fail("%s: no block rows: %s" % (c, sorted(rows)))
        continue
    for p in blocks:
        if rows[p]["bwd_ms"] <= rows[p]["accumulate_grad_ms"] + 1e-9:
            fail("%s: %s has no backward but its AccumulateGrad" % (c, p))
        if not rows[p]["class"]:
            fail("%s: %s has no class" % (c, p))
    if c.startswith("mlp"):
        # Per-iteration medians: one slow iteration on a loaded machine
        # must not decide the ranking.
        # Per-block graphs' forward is mostly each block's wrapper and
        # guards at this size (blocks.0's first), so only their backward
        # ranks by the work.
        for k in (("bwd",) if c == "mlp:block" else ("fwd", "bwd")):
            med = {p: (rows[p]["per_iteration"] or {}).get(k, {}).get("p50_ms")
                   for p in blocks}
            top = max(blocks, key=lambda p: med[p] or 0)
            print("%-14s %s p50 ms: %s" % (c, k, {p: round(v or 0, 3) for p, v in med.items()}))
            if top != "blocks.2":
                fail("%s: %s ranks %s first, not the heavy blocks.2" % (c, k, top))
        for p in ("blocks.2.up", "blocks.2.down"):
            if p not in rows or rows[p]["bwd_ms"] <= rows[p]["accumulate_grad_ms"]:
                fail("%s: no backward of its own for %s" % (c, p))
    if c.endswith(":eager"):
        continue
    cp = j.get("compiled", {})
    b = cp.get("backward", {})
    if not b.get("runs"):
        fail("%s: no compiled backward runs in the report" % c)
        continue
    tot = b["region_ms"]
    print("%-14s compiled backward %.3f ms: one layer %.1f %%, fused ancestors "
          "%.1f %%, nothing %.1f %% (unowned %.1f, unmatched %.1f), between "
          "kernels %.1f %%" % (
              c, tot, 100 * b["one_layer_ms"] / tot, 100 * b["fused_ms"] / tot,
              100 * (b["unowned_ms"] + b["unmatched_ms"]) / tot,
              100 * b["unowned_ms"] / tot, 100 * b["unmatched_ms"] / tot,
              100 * (tot - b["one_layer_ms"] - b["fused_ms"] - b["unowned_ms"]
                     - b["unmatched_ms"]) / tot))
    if b["unmatched_ms"] > 0:
        fail("%s: %.3f ms of compiled backward unmatched" % (c, b["unmatched_ms"]))

txt = open(os.path.join(D, "report.txt")).read()
for ph in ("forward", "backward"):
    if "torch.compile %s:" % ph not in txt:
        fail("report has no torch.compile %s line" % ph)

# The windows: blocks.1's backward inside mlp:whole's graph, and
# blocks.2.up's forward inside mlp:block's per-block graph.
wins = [p for p in glob.glob(os.path.join(D, "rec", "compiled_models-pid*-w*.json"))
        if p not in mains]
want = {"backward": "blocks.1", "forward": "blocks.2.up"}
for ph, layer in want.items():
    got = None
    for w in wins:
        with open(w) as f:
            wd = json.load(f)
        ops = [e for e in wd["traceEvents"] if e.get("cat") == "cpu_op" and
               e.get("args", {}).get("phase") == ph and
               (e.get("args", {}).get("layer") or "").startswith(layer)]
        if ops:
            got = (w, len(ops))
    if not got:
        fail("no window with %s's %s kernels among %s" % (layer, ph, wins))
    else:
        print("window %s: %d %s kernels of %s" % (os.path.basename(got[0]), got[1], ph, layer))

sys.exit(1 if bad else 0)
