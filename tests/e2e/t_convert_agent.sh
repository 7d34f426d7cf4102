#!/usr/bin/env bash
# The real agent's files convert: 4 threads x 20000 scope events recorded
# with GRADTRACE_FILE become exactly 10000 complete events per thread, on
# that thread's own track, named as recorded, in a trace that validates.
set -eu
B=$ROOT/$BUILD
PY=${PYTHON:-/usr/bin/python3}
for f in "$B/libgradtrace.so" "$B/progs/agent_threads" "$B/gradtrace"; do
  [ -e "$f" ] || { echo "missing $f (run make)" >&2; exit 1; }
done
T=$E2E_TMP
GRADTRACE_FILE=$T/a.gtr GRADTRACE_BUFFER_KB=1024 GRADTRACE_BUFFER_BLOCKS=8 \
  LD_PRELOAD=$B/libgradtrace.so "$B/progs/agent_threads" 4 20000
"$B/gradtrace" convert "$T/a.gtr" -o "$T/a.json"
"$PY" "$ROOT/tests/tools/validate_trace.py" "$T/a.json"
"$PY" - "$T/a.json" <<'PY'
import json, re, sys, collections
d = json.load(open(sys.argv[1]))
g = d["gradtrace"]
lost = g["lost"]["events"]
per_tid = collections.Counter()
names = collections.defaultdict(set)
for e in d["traceEvents"]:
    if e["ph"] == "X" and e["cat"] == "user":
        m = re.match(r"t(\d+)\.s\d+$", e["name"])
        assert m, e["name"]
        per_tid[e["tid"]] += 1
        names[e["tid"]].add(m.group(1))
print("scopes per thread:", dict(per_tid), "lost:", lost)
assert len(per_tid) == 4, per_tid
for tid, n in per_tid.items():
    assert len(names[tid]) == 1, "one recording thread per track"
    assert n == 10000 or lost > 0, (tid, n)
assert sum(per_tid.values()) == 40000 or lost > 0
assert g["pid"] > 0 and g["stream"]["complete"]
PY
