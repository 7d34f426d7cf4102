#!/usr/bin/env bash
# `gradtrace report`: the per-layer table of a real torch run matches the
# forward call counts the program counted itself and the sums of the
# trace computed here independently (forward: span durations; backward:
# the node-time sums each backward span carries; --include-warmup, since
# the program counted every call, warm-up included); rows add up (parent >=
# children, total = top-level rows + unattributed); the .gtr recording
# gives the same table as its JSON; bad input and usage errors exit 1 and
# 2 with a message.
set -u
B=$ROOT/$BUILD
die() { echo "FAIL: $*" >&2; exit 1; }
[ -x "$B/gradtrace" ] || die "build/gradtrace missing"
"$PYTHON" -c 'import torch' 2>/dev/null || { echo "skip: no torch under $PYTHON"; exit 77; }
cd "$E2E_TMP"
export GRADTRACE_SOCKET=$E2E_TMP/none/agent.sock GRADTRACE_CONTROL=$E2E_TMP/none/control.sock

"$B/gradtrace" record --raw -o out -- "$PYTHON" "$ROOT/tests/e2e/torch/report_model.py" calls.json 4 \
  2>rec.err || die "record failed: $(cat rec.err)"
json=$(ls out/*.json) gtr=$(ls out/*.gtr)
"$B/gradtrace" report --csv --include-warmup $json >from_json.csv || die "report on json failed"
"$B/gradtrace" report --csv --include-warmup $gtr >from_gtr.csv || die "report on gtr failed"
cmp -s from_json.csv from_gtr.csv || die "gtr and json reports differ: $(diff from_json.csv from_gtr.csv)"
"$B/gradtrace" report $json >table.txt || die "table report failed"
cat table.txt

"$PYTHON" - "$json" calls.json from_json.csv <<'PY' || exit 1
import csv, json, sys, collections
trace, calls, table = sys.argv[1:]
calls = json.load(open(calls))
allrows = list(csv.DictReader(open(table)))
rows = {r["layer"]: r for r in allrows if not r["layer"].startswith("(")}
extra = {r["layer"]: r for r in allrows if r["layer"].startswith("(")}
fwd = collections.defaultdict(lambda: [0, 0.0])
bwd = collections.defaultdict(lambda: [0, 0.0, 0])
for ev in json.load(open(trace))["traceEvents"]:
    if ev.get("cat") == "layer_forward":
        path = ev["name"].rsplit(" forward", 1)[0].split(" (")[0]
        fwd[path][0] += 1; fwd[path][1] += ev["dur"]
    elif ev.get("cat") == "layer_backward":
        b = bwd[ev["args"]["layer"]]
        b[0] += 1; b[1] += ev["args"]["time_us"]; b[2] += ev["args"]["nodes"]
err = []
for path, n in calls.items():
    if path == "Twice":
        path = "Twice"
    r = rows.get(path)
    if r is None:
        err.append(f"{path}: ran {n} times, no row"); continue
    if int(r["fwd_calls"]) != n:
        err.append(f"{path}: fwd_calls {r['fwd_calls']} != {n} counted by the program")
if "unused" in rows:
    err.append("unused: a module that never ran has a row")
if int(rows["shared"]["fwd_calls"]) != 2 * int(rows["seq"]["fwd_calls"]):
    err.append("shared is called twice per forward")
for path, r in rows.items():
    f = fwd.get(path, [0, 0.0]); b = bwd.get(path, [0, 0.0, 0])
    if abs(float(r["fwd_ms"]) - f[1] / 1e3) > 0.002 or abs(float(r["bwd_ms"]) - b[1] / 1e3) > 0.002:
        err.append(f"{path}: times {r['fwd_ms']}/{r['bwd_ms']} ms != trace sums {f[1]/1e3:.3f}/{b[1]/1e3:.3f}")
    if int(r["bwd_spans"]) != b[0] or int(r["bwd_nodes"]) != b[2]:
        err.append(f"{path}: backward {r['bwd_spans']} spans/{r['bwd_nodes']} nodes != {b[0]}/{b[2]}")
for path in ("shared", "seq.0", "seq.2"):
    if int(rows[path]["bwd_nodes"]) == 0:
        err.append(f"{path}: no backward nodes attributed")
for path, r in rows.items():
    kids = [k for k in rows.values() if k["parent"] == path]
    if float(r["bwd_ms"]) + 0.002 < sum(float(k["bwd_ms"]) for k in kids):
        err.append(f"{path}: bwd_ms {r['bwd_ms']} < its children's sum")
top = sum(float(r["bwd_ms"]) for r in rows.values() if not r["parent"])
total = float(extra["(total)"]["bwd_ms"])
if abs(top + float(extra["(unattributed)"]["bwd_ms"]) - total) > 0.002 * (len(rows) + 1):
    err.append(f"total {total} != top-level rows {top} + unattributed")
if err:
    print("FAIL: " + "; ".join(err), file=sys.stderr); sys.exit(1)
print(f"report matches: {len(rows)} rows")
PY

# Errors: a missing file and a JSON file without layer spans exit 1 with a
# one-line reason; usage errors exit 2.
"$B/gradtrace" report nonexistent.json 2>err.txt; rc=$?
[ $rc -eq 1 ] && grep -q "nonexistent.json" err.txt || die "missing file: rc $rc, $(cat err.txt)"
echo '{"traceEvents":[{"ph":"X","name":"x","ts":0,"dur":1,"pid":1,"tid":1}]}' >plain.json
"$B/gradtrace" report plain.json 2>err.txt; rc=$?
[ $rc -eq 1 ] && grep -q "no per-layer spans" err.txt || die "no spans: rc $rc, $(cat err.txt)"
"$B/gradtrace" report 2>/dev/null; [ $? -eq 2 ] || die "no argument must be a usage error"
"$B/gradtrace" report --sort nope $json 2>/dev/null; [ $? -eq 2 ] || die "bad --sort must be a usage error"
"$B/gradtrace" report --help | grep -q "usage: gradtrace report" || die "--help"
echo ok
