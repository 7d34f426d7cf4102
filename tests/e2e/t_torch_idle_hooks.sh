#!/usr/bin/env bash
# Idle = free (issue #16): with nothing captured or armed no module hook
# is in torch; a capture started mid-step gets them at that step's
# optimizer step, so the next step is attributed from its first module
# (every node created in a captured step has its layer); capture stopped
# takes them out at the next boundary; an armed trigger has them from the
# start; a program without optimizer gets them from the watcher thread.
# On torch 1.13 and, when its venv exists, torch 2.x; with the hooks
# reaching torch through the nn.Module.__call__ wrapper (the default) and
# through torch's global module hooks (GRADTRACE_MODULE_HOOKS=global).
set -u
. "$(dirname "$0")/torch/lib.sh"
PY=${PYTHON:-/usr/bin/python3}
torch_require "$PY"
VENV=${GRADTRACE_TORCH2_VENV:-$HOME/.cache/gradtrace/torch2-venv}
pys=("$PY")
[ -x "$VENV/bin/python" ] && pys+=("$VENV/bin/python")
run() {
  env LD_PRELOAD="$AGENT" PYTHONPATH="$ROOT/python" "$@"
}
rc=0
for py in "${pys[@]}"; do
for how in wrapper global; do
  export GRADTRACE_MODULE_HOOKS=$how
  echo "== $py ($how)"
  run GRADTRACE_FILE="$E2E_TMP/steps.gtr" GRADTRACE_CAPTURE=0 \
    "$py" "$TORCH_DIR/idle_hooks.py" steps "$E2E_TMP/seen.txt" || { rc=1; continue; }
  TORCH_DIR=$TORCH_DIR "$PY" - "$E2E_TMP/steps.gtr" <<'PY' || rc=1
import os, sys
sys.path.insert(0, os.environ["TORCH_DIR"])
import gtr
t = gtr.Trace(sys.argv[1])
steps = sorted(e["ts"] for e in t.of(gtr.T_STEP))
made = sorted(t.of(gtr.T_NODE_CREATED), key=lambda e: e["ts"])
assert len(steps) >= 3, steps          # steps 3, 4, 5 marked while capturing
after = [e for e in made if e["ts"] > steps[0]]
assert after, "no node created after the first captured step"
bare = [e for e in after if not t.s(e["layer"])]
print("%d nodes created in captured steps, %d without a layer"
      % (len(after), len(bare)))
assert not bare, "nodes of a captured step without a layer"
PY
  run GRADTRACE_FILE="$E2E_TMP/armed.gtr" GRADTRACE_CAPTURE=0 \
    GRADTRACE_TRIGGER="layer=0,phase=backward,iteration=5" \
    "$py" "$TORCH_DIR/idle_hooks.py" armed || rc=1
  run GRADTRACE_FILE="$E2E_TMP/nostep.gtr" GRADTRACE_CAPTURE=0 \
    "$py" "$TORCH_DIR/idle_hooks.py" nostep || rc=1
done
done
exit $rc
