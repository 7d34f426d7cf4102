#!/usr/bin/env bash
# gradtrace convert on a generated stream (tests/progs/gen_gtr): every file
# passes the structural validator, and the events in the trace are exactly
# what the generator put in (scopes, backward nodes, kernels, API calls,
# both kinds of flows, per-layer backward spans, iterations), across
# rotated files; the summary goes to stderr, nothing to stdout.
set -eu
B=$ROOT/$BUILD
PY=${PYTHON:-/usr/bin/python3}
for f in "$B/gradtrace" "$B/progs/gen_gtr"; do
  [ -x "$f" ] || { echo "missing $f (run make)" >&2; exit 1; }
done
T=$E2E_TMP

"$B/progs/gen_gtr" -o "$T/run.gtr" --iterations 40 --layers 4 --worker \
  --gpu --steps --ops --chunk-kb 16 >"$T/expect.json"
"$B/gradtrace" convert "$T/run.gtr" -o "$T/run.json" --max-file-events 3000 \
  >"$T/stdout" 2>"$T/stderr"
cat "$T/stderr"
[ ! -s "$T/stdout" ] || { echo "convert wrote to stdout"; exit 1; }
grep -q "events from" "$T/stderr"
ls "$T"/run*.json >"$T/files"
[ "$(wc -l <"$T/files")" -ge 3 ] || { echo "expected rotation"; exit 1; }
"$PY" "$ROOT/tests/tools/validate_trace.py" $(cat "$T/files")

"$PY" - "$T/expect.json" $(cat "$T/files") <<'PY'
import json, sys
want = json.load(open(sys.argv[1]))
files = sys.argv[2:]
count = {}
indexes = set()
for f in files:
    d = json.load(open(f))
    g = d["gradtrace"]
    assert g["file_count"] == len(files), (f, g["file_count"])
    indexes.add(g["file_index"])
    # Counts as of each file's end: the generator's LOST record is last.
    last = g["file_index"] == len(files) - 1
    assert g["lost"]["events"] == (7 if last else 0), (f, g["lost"])
    assert g["stream"]["complete"] == last, (f, g["stream"])
    assert not any(g["anomalies"].values()), g["anomalies"]
    for e in d["traceEvents"]:
        k = (e["ph"], e.get("cat"))
        count[k] = count.get(k, 0) + 1
assert indexes == set(range(len(files))), indexes
it = want["iterations"]
checks = {
    ("X", "module"): want["module_scopes"],
    ("X", "layer_forward"): want["module_scopes"],
    ("X", "backward"): want["nodes"],
    ("s", "fwdbwd"): want["nodes"],
    ("f", "fwdbwd"): want["nodes"],
    ("X", "kernel"): want["kernels"],
    ("X", "cuda_runtime"): want["api_calls"],
    ("s", "ac2g"): want["kernels"],
    ("f", "ac2g"): want["kernels"],
    ("X", "layer_backward"): it * want["layer_spans_per_pass"],
    ("X", "backward_pass"): it,
    ("X", "user_annotation"): it,
    ("X", "cpu_op"): want["ops"],
}
bad = {k: (count.get(k, 0), v) for k, v in checks.items() if count.get(k, 0) != v}
assert not bad, "got, want: %r" % bad
print("counts match:", {"%s/%s" % k: v for k, v in checks.items()})
PY

echo "== default output name, --quiet"
cp "$T/run.gtr" "$T/other.gtr"
"$B/gradtrace" convert "$T/other.gtr" --quiet 2>"$T/q.err"
[ ! -s "$T/q.err" ] || { echo "--quiet printed:"; cat "$T/q.err"; exit 1; }
"$PY" "$ROOT/tests/tools/validate_trace.py" "$T/other.pt.trace.json"

echo "== the validator's flow rule: an arrow off its slice is refused"
"$PY" - "$T/other.pt.trace.json" "$T/moved.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"]
s = next(e for e in ev if e.get("ph") == "s" and e.get("cat") == "fwdbwd")
s["ts"] = min(e["ts"] for e in ev if e.get("ph") == "X") / 2  # before every slice
json.dump(d, open(sys.argv[2], "w"))
PY
if "$PY" "$ROOT/tests/tools/validate_trace.py" "$T/moved.json" 2>"$T/moved.err"; then
  echo "a flow start outside any slice passed the validator"; exit 1
fi
grep -q "is in no slice of its track" "$T/moved.err"
