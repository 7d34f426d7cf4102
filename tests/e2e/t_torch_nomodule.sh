#!/usr/bin/env bash
# The agent and the Python module each work without the other, and neither
# changes results:
#  - agent preloaded, no Python module: backward node events still carry
#    sequence numbers (and torch's names), checked against torch's profiler;
#    no module scopes or layers appear;
#  - Python module on the path, no agent: gradtrace.available() is false,
#    no torch hook is installed, nothing is printed;
#  - gradtrace's sitecustomize installs the hooks when torch is imported
#    and still runs the user's own sitecustomize further down the path;
#  - the demo's losses are bit-identical with no agent, with the agent and
#    module capturing, and with the module alone.
set -u
. "$(dirname "$0")/torch/lib.sh"
PY=${PYTHON:-/usr/bin/python3}
torch_require "$PY"
rc=0
torch_case "$PY" small --no-modules || rc=1

echo "== module without agent"
out=$(PYTHONPATH="$ROOT/python" "$PY" - <<'PY'
import torch, gradtrace
import torch.nn.modules.module as mm
assert not gradtrace.available(), "agent reported available without it"
assert gradtrace.install() is False
with gradtrace.scope("x"):
    pass
hooks = len(mm._global_forward_pre_hooks) + len(mm._global_forward_hooks)
assert hooks == 0, "%d global hooks installed without the agent" % hooks
assert torch.nn.Module.__call__.__module__ == "torch.nn.modules.module", \
    "nn.Module.__call__ wrapped without the agent"
print("inert")
PY
) || rc=1
[ "$out" = "inert" ] || { echo "module not inert: $out"; rc=1; }

echo "== sitecustomize chains to the next one on the path"
mkdir -p "$E2E_TMP/usersite"
cat >"$E2E_TMP/usersite/sitecustomize.py" <<'PY'
import os
open(os.environ["CHAIN_MARK"], "w").write("user sitecustomize ran")
PY
out=$(env LD_PRELOAD="$AGENT" GRADTRACE_FILE="$E2E_TMP/chain.gtr" CHAIN_MARK="$E2E_TMP/mark" \
        GRADTRACE_CAPTURE=1 PYTHONPATH="$ROOT/python:$E2E_TMP/usersite" "$PY" -c '
import sys, torch
m = sys.modules.get("gradtrace._modules")
print(int(m is not None and m._installed and m.hooks_installed()))') || rc=1
[ "$out" = "1" ] || { echo "gradtrace hooks not installed via sitecustomize: $out"; rc=1; }
[ "$(cat "$E2E_TMP/mark" 2>/dev/null)" = "user sitecustomize ran" ] || {
  echo "user sitecustomize did not run"; rc=1; }

echo "== results unchanged"
demo="$ROOT/examples/train_small.py"
plain=$("$PY" "$demo" --iters 4) || rc=1
traced=$(env LD_PRELOAD="$AGENT" GRADTRACE_FILE="$E2E_TMP/demo.gtr" GRADTRACE_CAPTURE=1 \
           PYTHONPATH="$ROOT/python" "$PY" "$demo" --iters 4) || rc=1
modonly=$(PYTHONPATH="$ROOT/python" "$PY" "$demo" --iters 4) || rc=1
echo "plain:  $plain"
echo "traced: $traced"
if [ "$plain" != "$traced" ] || [ "$plain" != "$modonly" ] || [ -z "$plain" ]; then
  echo "losses differ"; rc=1
fi
# The traced run really traced: module scopes, nodes and 4 steps.
TORCH_DIR=$TORCH_DIR "$PY" - "$E2E_TMP/demo.gtr" <<'PY' || rc=1
import os, sys
sys.path.insert(0, os.environ["TORCH_DIR"])
import gtr
t = gtr.Trace(sys.argv[1])
steps = [e["value"] for e in t.of(gtr.T_STEP)]
passes = t.of(gtr.T_PASS_BEGIN)
mods = {p for _t, p, _c, _b, _e in t.module_calls()}
print("steps", steps, "passes", len(passes), "modules", len(mods))
# Steps are numbered by the agent from 0, as iterations (each pass is in
# the step of its number).
assert steps == [0, 1, 2, 3], steps
assert len(passes) == 4 and [p["value"] for p in passes] == [0, 1, 2, 3]
assert {"SmallNet", "proj", "blocks.0.fc1", "blocks.1.fc2", "head"} <= mods, mods
PY

echo "== GRADTRACE_TORCH=0 turns the autograd hooks into pass-through"
env LD_PRELOAD="$AGENT" GRADTRACE_FILE="$E2E_TMP/off.gtr" GRADTRACE_CAPTURE=1 GRADTRACE_TORCH=0 \
    PYTHONPATH="$ROOT/python" "$PY" "$demo" --iters 2 >/dev/null || rc=1
TORCH_DIR=$TORCH_DIR "$PY" - "$E2E_TMP/off.gtr" <<'PY' || rc=1
import os, sys
sys.path.insert(0, os.environ["TORCH_DIR"])
import gtr
t = gtr.Trace(sys.argv[1])
n = len(t.of(gtr.T_NODE_CREATED)) + len(t.of(gtr.T_BWD_BEGIN))
print("autograd records", n, "module scopes", len(t.module_calls()))
assert n == 0 and len(t.module_calls()) > 0
PY
exit $rc
