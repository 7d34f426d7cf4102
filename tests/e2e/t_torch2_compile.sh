#!/usr/bin/env bash
# torch.compile under gradtrace (issue 23 item 1, torch 2.x): with the
# agent loaded, idle, capturing or with a trigger armed (gradtrace
# record --trigger), fullgraph=True compiles (whole model, per block,
# nn.Module.compile(), compiled before and after the package's hooks go
# in, capture toggled between steps, a block calling super().__call__)
# and dynamo hands the backend the same graphs, node for node, with the
# same graph breaks (none) as in a run without gradtrace
# (tests/e2e/torch/compile_same.py). Before the fix the C
# nn.Module.__call__ failed fullgraph compiles ("no traceable __call__").
set -u
. "$(dirname "$0")/torch/lib.sh"
torch2_require
GT=$ROOT/$BUILD/gradtrace
SCRIPT=$TORCH_DIR/compile_same.py
# Compiled code and caches stay in the test's directory.
export TORCHINDUCTOR_CACHE_DIR=$E2E_TMP/inductor TRITON_CACHE_DIR=$E2E_TMP/triton
rc=0
run() {  # NAME CMD...: one run of compile_same.py, its exit status kept
  local name=$1; shift
  echo "== $name"
  "$@" "$E2E_TMP/$name.json" >"$E2E_TMP/$name.out" 2>&1 || {
    echo "$name: exit $?"; grep -v "triton not found" "$E2E_TMP/$name.out" | tail -20; rc=1; }
}
run plain env -u LD_PRELOAD -u PYTHONPATH "$PY" "$SCRIPT"
run capturing env LD_PRELOAD="$AGENT" GRADTRACE_FILE="$E2E_TMP/cap.gtr" \
  GRADTRACE_CAPTURE=1 PYTHONPATH="$ROOT/python" "$PY" "$SCRIPT"
run idle env LD_PRELOAD="$AGENT" GRADTRACE_FILE="$E2E_TMP/idle.gtr" \
  GRADTRACE_CAPTURE=0 PYTHONPATH="$ROOT/python" "$PY" "$SCRIPT"
run armed "$GT" record -o "$E2E_TMP/armed" \
  --trigger layer=blocks.1,phase=backward,iteration=1000 -- "$PY" "$SCRIPT"
"$PY" - "$E2E_TMP" <<'PY' || rc=1
import json, os, sys
d = sys.argv[1]
def load(n):
    try:
        with open(os.path.join(d, n + ".json")) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        return {"error": str(e)}
want = load("plain")
bad = 0
for case, w in sorted(want.items()):
    if case == "call":
        continue
    if not w["ok"] or w["breaks"] or not w["graphs"]:
        print("plain run: %s: %r" % (case, w)); bad = 1
for run in ("capturing", "idle", "armed"):
    got = load(run)
    if got.get("call") is not True:
        print("%s: the package's nn.Module.__call__ was never in place" % run)
        bad = 1
    for case, w in sorted(want.items()):
        if case == "call":
            continue
        g = got.get(case)
        if g is None:
            print("%s: %s: no result" % (run, case)); bad = 1; continue
        what = []
        if not g["ok"]:
            what.append("raised")
        if g["breaks"] != w["breaks"]:
            what.append("graph breaks %d, without gradtrace %d"
                        % (g["breaks"], w["breaks"]))
        if len(g["graphs"]) != len(w["graphs"]):
            what.append("%d graphs, without gradtrace %d"
                        % (len(g["graphs"]), len(w["graphs"])))
        elif g["graphs"] != w["graphs"]:
            what.append("graphs differ")
        print("%s %s: %d graphs, %d breaks%s" % (
            run, case, len(g["graphs"]), g["breaks"],
            "" if not what else ": " + "; ".join(what)))
        bad = bad or bool(what)
sys.exit(bad)
PY
exit $rc
