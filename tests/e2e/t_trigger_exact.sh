#!/usr/bin/env bash
# Backward windows hold exactly what the full trace gives their layer in
# that step (issue 27): each run captures everything (GRADTRACE_CAPTURE=1)
# with one trigger armed, so the window is a copy of part of the main
# trace, and tests/e2e/trigger/window_vs_full.py compares the two node for
# node (AccumulateGrad included, nothing unlabelled, no other layer's
# node) and the report's rows of the window's layers with the full trace's
# for that iteration. Models: the 48-block MLP (one block, four
# micro-batches, extra autograd.grad and retained-graph passes, a glob of
# ten blocks), a GPT-2-like decoder (a block, a glob over its MLPs with the
# attention between, the tied embedding), an MLP trained with a gradient
# penalty (create_graph: a double backward every step), a CNN with
# BatchNorm and a residual stage, a block applied twice, a block applied
# four times with stacked parameters (a window on its third application,
# one row per application), and modules that
# own parameters but run no forward (MultiheadAttention's out_proj, a
# ParameterDict: rows under their parents, also in the full trace); on torch 2.x
# also the decoder and the penalty again, and a block of a whole-model
# torch.compile'd MLP (its window spans the compiled graph's node).
# e2e-timeout: 600
set -u
. "$(dirname "$0")/trigger/lib.sh"
. "$ROOT/tests/e2e/require.sh"
trig_require
WM=$TRIG/window_models.py
CMP="$PY $TRIG/window_vs_full.py $B/gradtrace"
n=0

# exact PY NAME SPEC SCRIPT ARGS...: a full capture with SPEC armed, then
# every window against the main trace.
exact() {
  local py=$1 name=$2 spec=$3; shift 3
  rm -f "$E2E_TMP/$name".* "$E2E_TMP/$name"-w*
  env LD_PRELOAD="$AGENT" GRADTRACE_FILE="$E2E_TMP/$name.gtr" GRADTRACE_CAPTURE=1 \
      GRADTRACE_TRIGGER="$spec" PYTHONPATH="$ROOT/python" \
      TORCHINDUCTOR_CACHE_DIR="$E2E_TMP/inductor" "$py" "$@" \
      >"$E2E_TMP/$name.stdout" 2>"$E2E_TMP/$name.stderr" \
    || { tail -5 "$E2E_TMP/$name.stderr" >&2; die "$name: training failed"; }
  [ -s "$E2E_TMP/$name.stdout" ] && die "$name: output on the program's stdout"
  "$B/gradtrace" convert -q "$E2E_TMP/$name.gtr" -o "$E2E_TMP/$name.json" \
    || die "$name: convert failed"
  local files
  files=$(window_files "$name")
  [ -n "$files" ] || die "$name: no window for $spec"
  for f in $files; do
    echo "$name: $($CMP "$E2E_TMP/$name.json" "$f" || echo FAILED)" | tee -a "$E2E_TMP/summary"
  done
  n=$((n + 1))
}

exact "$PY" b17 "layer=blocks.17,phase=backward,iteration=2" "$MODEL" --iters 4
exact "$PY" accum "layer=blocks.30,phase=backward,iteration=1" "$MODEL" --iters 3 --accum 4
exact "$PY" extra "layer=blocks.5,phase=backward,iteration=1" "$MODEL" --iters 3 --extra
exact "$PY" glob "layer=blocks.1?,phase=backward,iteration=2" "$MODEL" --iters 3
exact "$PY" gpt_h1 "layer=h.1,phase=backward,iteration=2" "$WM" gpt
exact "$PY" gpt_mlp "layer=h.*.mlp,phase=backward,iteration=1" "$WM" gpt
exact "$PY" gpt_wte "layer=wte,phase=backward,iteration=2" "$WM" gpt
exact "$PY" pen "layer=blocks.1,phase=backward,iteration=2" "$WM" penalty
exact "$PY" pen_glob "layer=blocks.*.fc2,phase=backward,iteration=1" "$WM" penalty
exact "$PY" conv "layer=layer2,phase=backward,iteration=2" "$WM" conv
exact "$PY" reuse "layer=shared,phase=backward,iteration=1" "$WM" reuse
exact "$PY" stacked "layer=layer[2],phase=backward,iteration=2" "$WM" stacked
# One row per application of the stacked block, each with the block's
# structure: Linear, Tanh, Linear and the residual add.
"$B/gradtrace" report --format json "$E2E_TMP/stacked.json" >"$E2E_TMP/stacked.rep" \
  || die "report of stacked"
"$PY" - "$E2E_TMP/stacked.rep" <<'EOF' || die "the stacked block's applications are not rows of their own"
import json, sys
rows = {l["path"]: l for l in json.load(open(sys.argv[1]))["layers"]}
apps = sorted(p for p in rows if p.startswith("layer[") and "." not in p)
print("applications: %s, nodes per iteration %s" % (apps, [
    rows[p]["bwd_nodes"] / max(1, rows[p]["fwd_calls"]) for p in apps]))
assert apps == ["layer[%d]" % i for i in range(4)], apps
assert "layer" not in rows, "no merged row"
n = {p: rows[p]["bwd_nodes"] / rows[p]["fwd_calls"] for p in apps}
assert len(set(n.values())) == 1 and list(n.values())[0] == 6, n
for p in apps:
    assert rows[p]["parent"] == rows["head"]["parent"], (p, rows[p]["parent"])
    assert rows[p + ".fc1"]["class"] == "Linear", rows[p + ".fc1"]
EOF
exact "$PY" params "layer=blocks.1,phase=backward,iteration=2" "$WM" params
# Parameter-only modules sit under their parents in the full trace too.
"$B/gradtrace" report --format json "$E2E_TMP/params.json" >"$E2E_TMP/params.rep" \
  || die "report of params"
"$PY" - "$E2E_TMP/params.rep" <<'EOF' || die "parameter-only modules are not under their parents"
import json, sys
rows = {l["path"]: l for l in json.load(open(sys.argv[1]))["layers"]}
want = {"scale": "Params", "blocks.0.attn.out_proj": "blocks.0.attn",
        "blocks.1.attn.out_proj": "blocks.1.attn"}
got = {p: rows.get(p, {}).get("parent") for p in want}
print("parents of parameter-only modules: %s" % got)
sys.exit(got != want)
EOF

VENV=${GRADTRACE_TORCH2_VENV:-$HOME/.cache/gradtrace/torch2-venv}
PY2=$VENV/bin/python
if [ -x "$PY2" ] && "$PY2" -c 'import torch' 2>/dev/null; then
  exact "$PY2" t2_gpt "layer=h.*.mlp,phase=backward,iteration=2" "$WM" gpt
  exact "$PY2" t2_pen "layer=blocks.2,phase=backward,iteration=1" "$WM" penalty
  exact "$PY2" t2_comp "layer=blocks.17,phase=backward,iteration=2" "$MODEL" --iters 3 \
    --compile inductor
  exact "$PY2" t2_stacked "layer=layer[1],phase=backward,iteration=2" "$WM" stacked
  # The stacked block's functional_call loop compiles fullgraph as without
  # gradtrace (the application names stay out of dynamo's trace).
  env LD_PRELOAD="$AGENT" GRADTRACE_FILE="$E2E_TMP/t2_stc.gtr" PYTHONPATH="$ROOT/python" \
      TORCHINDUCTOR_CACHE_DIR="$E2E_TMP/inductor" "$PY2" - "$TRIG" <<'EOF' \
    || die "a fullgraph compile of the stacked block failed under gradtrace"
import sys
sys.path.insert(0, sys.argv[1])
import torch
from torch._dynamo.utils import counters
from window_models import StackedLayers
cm = torch.compile(StackedLayers(), fullgraph=True)
cm(torch.randn(8, 12)).sum().backward()
assert sum(counters["graph_break"].values()) == 0, dict(counters["graph_break"])
EOF
else
  [ -n "${CI:-}" ] && die "no torch 2.x venv at $VENV (CI installs it: scripts/install-torch2.sh)"
  echo "torch 2.x part skipped: no venv at $VENV"
fi

cat "$E2E_TMP/summary"
grep -q FAILED "$E2E_TMP/summary" && die "a window differs from its full trace"
[ "$(grep -c ' rows equal' "$E2E_TMP/summary")" -ge "$n" ] || die "fewer windows than runs"
echo ok
