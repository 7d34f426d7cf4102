#!/usr/bin/env bash
# Communication scopes from the C API (gt_comm_begin/end, issue 27) in a C
# program without Python or libtorch (tests/progs/capi_comm.c), recorded
# by the agent and converted: each pass's node holds "all_reduce" (its
# nested "inner" drawn inside it, counted once) as its comm_us and not as
# its own time; the "wait" after the node is the pass group's; a scope
# begun before capture started, and an end never begun, record nothing;
# the forward's "all_gather" is a slice and nobody's backward; the report
# has the comm column with these numbers.
set -u
. "$(dirname "$0")/layers/lib.sh"
PROG=$B/progs/capi_comm
for f in "$AGENT" "$GT" "$PROG"; do
  [ -e "$f" ] || { echo "missing $f (run make)"; exit 77; }
done
env GRADTRACE_CAPTURE=0 GRADTRACE_FILE="$T/comm.gtr" LD_PRELOAD="$AGENT" "$PROG" \
  >"$T/comm.out" 2>"$T/comm.err" || { cat "$T/comm.err"; die "capi_comm failed"; }
[ -s "$T/comm.out" ] && die "output on stdout"
"$GT" convert "$T/comm.gtr" -o "$T/comm.json" >"$T/conv.out" 2>&1 || { cat "$T/conv.out"; die "convert"; }
"$GT" report --include-warmup --format json "$T/comm.gtr" >"$T/rep.json" 2>"$T/rep.err" ||
  { cat "$T/rep.err"; die "report"; }
$VALIDATE "$T/comm.json" || die "trace invalid"
python3 - "$T/comm.json" "$T/rep.json" <<'P' || die "communication scopes"
import collections, json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
rep = json.load(open(sys.argv[2]))
comm = [e for e in ev if e.get("cat") == "comm"]
names = collections.Counter(e["name"] for e in comm)
assert names == {"all_reduce": 3, "inner": 3, "wait": 3, "all_gather": 1}, names
nodes = [e for e in ev if e.get("cat") == "backward"]
assert len(nodes) == 3, nodes
ar = sorted((e for e in comm if e["name"] == "all_reduce"), key=lambda e: e["ts"])
for n, a in zip(sorted(nodes, key=lambda e: e["ts"]), ar):
    assert a["tid"] == n["tid"] and n["ts"] <= a["ts"] and a["ts"] + a["dur"] <= n["ts"] + n["dur"] + 0.002, (n, a)
    assert abs(n["args"]["comm_us"] - a["dur"]) < 0.002, (n, a)
spans = [e for e in ev if e.get("cat") == "layer_backward"]
assert len(spans) == 3 and all(abs(s["args"]["comm_us"] - a["dur"]) < 0.002 and
    abs(s["args"]["self_us"] - (n["dur"] - a["dur"])) < 0.003
    for s, n, a in zip(sorted(spans, key=lambda e: e["ts"]), sorted(nodes, key=lambda e: e["ts"]), ar)), spans
waits = sum(e["dur"] for e in comm if e["name"] == "wait")
tot = sum(e["args"].get("comm_us", 0) for e in ev if e.get("name") == "backward totals")
assert abs(tot - waits - sum(a["dur"] for a in ar)) < 0.01, (tot, waits)
row = {r["path"]: r for r in rep["layers"]}["layer"]
assert abs(row["comm_ms"] * 1e3 - sum(a["dur"] for a in ar)) < 0.01, row
assert abs(rep["unattributed"]["comm_ms"] * 1e3 - waits) < 0.01, rep["unattributed"]
assert abs(rep["total"]["comm_ms"] * 1e3 - tot) < 0.01, rep["total"]
print("comm: %s; node comm %.3f us, waits %.3f us" % (dict(names), sum(a["dur"] for a in ar), waits))
P
echo "ok: C API communication scopes"
