#!/usr/bin/env bash
# A real PyTorch run (Debian torch 1.13, the demo model) recorded by the
# agent and converted: the trace validates, and every per-layer backward
# span is exactly [first start, last end] of the backward nodes attributed
# to that layer or a descendant in that pass; nodes carry seq/fwd_tid and
# each node with a known creation has its fwdbwd arrow.
set -eu
B=$ROOT/$BUILD
PY=${PYTHON:-/usr/bin/python3}
[ -e "$B/libgradtrace.so" ] && [ -x "$B/gradtrace" ] || { echo "run make" >&2; exit 1; }
"$PY" -c 'import torch' 2>/dev/null || { echo "skip: $PY has no torch"; exit 77; }
T=$E2E_TMP
env LD_PRELOAD="$B/libgradtrace.so" GRADTRACE_FILE="$T/t.gtr" \
  PYTHONPATH="$ROOT/python" "$PY" "$ROOT/examples/train_small.py" >"$T/out" 2>&1 \
  || { cat "$T/out"; exit 1; }
"$B/gradtrace" convert "$T/t.gtr" -o "$T/t.json"
"$PY" "$ROOT/tests/tools/validate_trace.py" "$T/t.json"
"$PY" - "$T/t.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"]
ns = lambda v: int(round(v * 1000))
passes = [e for e in ev if e.get("cat") == "backward_pass"]
nodes = [e for e in ev if e.get("cat") == "backward"]
spans = [e for e in ev if e.get("cat") == "layer_backward"]
assert passes and nodes and spans, (len(passes), len(nodes), len(spans))
flows = sum(1 for e in ev if e["ph"] == "s" and e["cat"] == "fwdbwd")
with_seq = [n for n in nodes if "seq" in n["args"]]
# Every node with a sequence number has its arrow unless counted missing.
missing = d["gradtrace"]["anomalies"]["nodes_without_creation"]
assert flows > 0 and flows == len(with_seq) - missing, (flows, len(with_seq), missing)
checked = 0
for p in passes:
    lo, hi = ns(p["ts"]), ns(p["ts"]) + ns(p["dur"])
    inpass = [n for n in nodes if lo <= ns(n["ts"]) <= hi]
    for s in (s for s in spans if s["args"]["pass"] == p["args"]["pass"]):
        L = s["args"]["layer"]
        mine = [n for n in inpass if n["args"]["layer"] is not None and
                (n["args"]["layer"] == L or n["args"]["layer"].startswith(L + "."))]
        if not mine:  # the root: credited through module nesting, not path
            mine = [n for n in inpass if n["args"]["layer"] is not None]
        first = min(ns(n["ts"]) for n in mine)
        last = max(ns(n["ts"]) + ns(n["dur"]) for n in mine)
        assert (ns(s["ts"]), ns(s["ts"]) + ns(s["dur"])) == (first, last), \
            (s["name"], ns(s["ts"]), ns(s["dur"]), first, last)
        assert s["args"]["nodes"] == len(mine), (s["name"], s["args"], len(mine))
        checked += 1
names = {s["name"] for s in spans}
for want in ("blocks.0 (Block) backward", "blocks.1.fc2 (Linear) backward"):
    assert want in names, (want, sorted(names))
print("checked %d layer spans over %d passes, %d nodes, %d arrows"
      % (checked, len(passes), len(nodes), flows))
PY
