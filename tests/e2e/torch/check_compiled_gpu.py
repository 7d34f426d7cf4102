#!/usr/bin/env python3
"""The CUDA case of issue 26 for scripts/gpu-check.sh: compiled_models.py
trained on the GPU (GT_DEVICE=cuda, inductor's Triton kernels) once
plainly (compiled_plain.out) and once under `gradtrace record --raw`
(compiled.out, compiled/). Prints one gpu-check row per line
("name<TAB>PASS|FAIL|SKIP<TAB>detail"):
  - losses bit-identical with and without gradtrace;
  - every Triton kernel that ran inside a compiled region is joined to its
    map (a layer, or an explicit fused / unowned mark), none unmatched,
    forward and backward both seen;
  - each kernel has one launch on the host (a driver-API launch is not
    also reported as a runtime one);
  - the report ranks the MLP's heavy blocks.2 first by its backward GPU
    time, and gives the compiled backward's shares (one layer / fused /
    nothing) by GPU time.
Usage: check_compiled_gpu.py OUTDIR GRADTRACE CASE..."""
import glob
import json
import os
import re
import subprocess
import sys

OUT, GT, CASES = sys.argv[1], sys.argv[2], sys.argv[3:]
STEPS = 6


def row(name, ok, detail):
    res = "PASS" if ok is True else "FAIL" if ok is False else ok
    print("compiled gpu: %s\t%s\t%s" % (name, res, detail))


def losses(name):
    out = {}
    try:
        with open(os.path.join(OUT, name)) as f:
            for line in f:
                if line.startswith("loss "):
                    _, case, rest = line.split(" ", 2)
                    out[case] = rest.split()
    except OSError:
        pass
    return out


plain, rec = losses("compiled_plain.out"), losses("compiled.out")
same = [c for c in CASES if c in plain and plain[c] == rec.get(c)]
row("losses bit-identical", len(same) == len(CASES),
    "%d of %d cases (%s)" % (len(same), len(CASES),
                             ", ".join(c for c in CASES if c not in same) or "all"))

mains = [p for p in glob.glob(os.path.join(OUT, "compiled", "compiled_models-pid*.pt.trace.json"))
         if re.search(r"-pid[0-9]+\.pt\.trace\.json$", p)]
if len(mains) != 1:
    row("trace", False, "expected one main trace, got %d (see compiled.err)" % len(mains))
    sys.exit(0)
main = mains[0]
with open(main) as f:
    doc = json.load(f)
ev = doc["traceEvents"]
an = doc["gradtrace"]["anomalies"]
bad = {k: an.get(k) for k in ("compiled_unmatched", "compiled_dropped") if an.get(k)}
row("no unmatched or dropped calls", not bad, str(bad or "none"))

regions = [e for e in ev if e.get("cat") == "compiled" and e.get("ph") == "X"]
kern = [e for e in ev if e.get("cat") == "kernel" and e.get("ph") == "X"]
triton = [e for e in kern if e["name"].startswith("triton")]
joined = [e for e in triton if e.get("args", {}).get("mark") in ("module", "fused", "unowned")]
nolayer = [e for e in joined if e["args"]["mark"] != "unowned" and not e["args"].get("layer")]
row("Triton kernels joined to the map", bool(triton) and len(joined) == len(triton) and not nolayer,
    "%d of %d Triton kernels joined (%d regions, %d without a layer)"
    % (len(joined), len(triton), len(regions), len(nolayer)))
phases = sorted({e["args"].get("phase") for e in joined})
row("Triton kernel phases", {"forward", "backward"} <= set(phases), "phases %s" % phases)

# One launch per kernel: API spans by correlation id.
api = {}
for e in ev:
    if e.get("cat") == "cuda_runtime" and e.get("ph") == "X":
        c = e.get("args", {}).get("correlation")
        if c:
            api.setdefault(c, []).append(e["name"])
two = [c for c in (e.get("args", {}).get("correlation") for e in kern) if len(api.get(c, [])) > 1]
drv = sum(1 for names in api.values() for n in names if n.startswith("cuLaunch"))
nolaunch = sum(1 for e in triton if not api.get(e.get("args", {}).get("correlation")))
row("one host launch per kernel", not two and nolaunch == 0,
    "%d kernels with two launches, %d Triton kernels without one; %d driver launches"
    % (len(two), nolaunch, drv))


def report(i):
    a = i * STEPS + 1  # the compiling step left out
    r = subprocess.run([GT, "report", "--format", "json", "--iterations",
                        "%d-%d" % (a, i * STEPS + STEPS - 1), main],
                       capture_output=True, text=True)
    return json.loads(r.stdout) if r.returncode == 0 else None


for i, c in enumerate(CASES):
    j = report(i)
    if j is None:
        row("%s report" % c, False, "gradtrace report --iterations failed")
        continue
    rows = {l["path"]: l for l in j["layers"]}
    blocks = sorted(p for p in rows if p.count(".") == 1 and p.startswith("blocks.")
                    and rows[p]["fwd_calls"] > 0)
    if c.startswith("mlp:") and blocks:
        g = {p: rows[p].get("gpu_bwd_ms", 0) for p in blocks}
        top = max(blocks, key=lambda p: g[p])
        row("%s ranks by GPU backward" % c, top == "blocks.2",
            "gpu_bwd_ms %s" % {p: round(v, 3) for p, v in g.items()})
    b = (j.get("compiled") or {}).get("backward") or {}
    if c.endswith(":eager"):
        continue
    if not b.get("runs"):
        row("%s compiled backward" % c, False, "no compiled backward runs in the report")
        continue
    tot = b["region_ms"] or 1e-9
    row("%s compiled backward shares" % c, b["unmatched_ms"] == 0,
        "%.3f ms: one layer %.1f %%, fused %.1f %%, nothing %.1f %% (unmatched %.3f ms)"
        % (tot, 100 * b["one_layer_ms"] / tot, 100 * b["fused_ms"] / tot,
           100 * (b["unowned_ms"] + b["unmatched_ms"]) / tot, b["unmatched_ms"]))
