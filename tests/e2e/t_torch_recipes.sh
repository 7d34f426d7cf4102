#!/usr/bin/env bash
# Large-model training recipes (issue #11), on Debian's torch 1.13 and on
# the torch 2.x venv of scripts/install-torch2.sh: both checkpoint
# flavours (also nested), a gradient penalty (create_graph), a retained graph run twice,
# reused modules and tied weights, two same-class roots. Each runs with the
# agent and the Python package, capturing into a .gtr file, and
# tests/e2e/torch/check_recipes.py compares every node and module call
# with torch's profiler and the model's own parameters. Then a trigger
# layer=blocks.3,phase=backward on the reentrant-checkpoint stack must
# open a window holding exactly that block's recomputed nodes, and its
# converted window file the block's recompute and backward spans.
# Each recording then goes through the real `gradtrace convert` (the trace
# must pass tests/tools/validate_trace.py) and `gradtrace report` on the
# .gtr and on the trace (the same rows), and tests/e2e/torch/check_trace.py
# compares every backward node event, the recompute spans, the layer
# spans' time args and the report's rows with the same truth and the
# model's structure.
# Skips (77) without torch, unless CI is set: then a missing torch fails.
set -u
. "$(dirname "$0")/torch/lib.sh"
PY=${PYTHON:-/usr/bin/python3}
VENV=${GRADTRACE_TORCH2_VENV:-$HOME/.cache/gradtrace/torch2-venv}
CASES="ckpt_reentrant ckpt_nonreentrant ckpt_nested ckpt_seq gradpen retain reuse gan"

torch_require "$PY"

# recipe PY CASE [TRIGGER]: one recipe; stdout must stay empty.
recipe() {
  local py=$1 case=$2 trig=${3:-} out=$E2E_TMP/$2$4 capture=1
  [ -n "$trig" ] && capture=0
  rm -f "$out.gtr" "$out.json"
  env LD_PRELOAD="$AGENT" GRADTRACE_FILE="$out.gtr" GRADTRACE_CAPTURE=$capture \
      GRADTRACE_TRIGGER="$trig" PYTHONPATH="$ROOT/python" \
      "$py" "$TORCH_DIR/recipes.py" "$case" "$out.json" \
      >"$out.stdout" 2>"$out.stderr" || {
    echo "recipes.py $case failed:"; cat "$out.stderr"; return 1; }
  if [ -s "$out.stdout" ]; then
    echo "unexpected stdout:"; cat "$out.stdout"; return 1
  fi
}

# trace_check PY OUT: convert, validate, report twice, check_trace.py.
trace_check() {
  local py=$1 out=$2
  "$ROOT/$BUILD/gradtrace" convert --quiet -o "$out.trace.json" "$out.gtr" ||
    { echo "convert $out.gtr failed"; return 1; }
  "$PY" "$ROOT/tests/tools/validate_trace.py" --quiet "$out.trace.json" || return 1
  "$ROOT/$BUILD/gradtrace" report --include-warmup --csv "$out.gtr" >"$out.gtr.csv" ||
    { echo "report $out.gtr failed"; return 1; }
  "$ROOT/$BUILD/gradtrace" report --include-warmup --csv "$out.trace.json" >"$out.json.csv" ||
    { echo "report $out.trace.json failed"; return 1; }
  cmp -s "$out.gtr.csv" "$out.json.csv" || {
    echo "report of $out.gtr and of its trace differ:"
    diff "$out.gtr.csv" "$out.json.csv"; return 1; }
  "$py" "$TORCH_DIR/check_trace.py" "$out.json" "$out.trace.json" "$out.gtr.csv"
}

run_all() {
  local py=$1 tag=$2 rc=0 c
  for c in $CASES; do
    recipe "$py" "$c" "" "-$tag" || { rc=1; continue; }
    "$py" "$TORCH_DIR/check_recipes.py" "$E2E_TMP/$c-$tag.json" \
        "$E2E_TMP/$c-$tag.gtr" || rc=1
    trace_check "$py" "$E2E_TMP/$c-$tag" || rc=1
  done
  recipe "$py" ckpt_reentrant "layer=blocks.3,phase=backward" "-trig-$tag" || return 1
  "$py" "$TORCH_DIR/check_recipes.py" "$E2E_TMP/ckpt_reentrant-trig-$tag.json" \
      "$E2E_TMP/ckpt_reentrant-trig-$tag.gtr" --window blocks.3 2 || rc=1
  # Its window file: the block's recompute and its backward span, inside.
  local win=$E2E_TMP/ckpt_reentrant-trig-$tag.trace.json w
  "$ROOT/$BUILD/gradtrace" convert --quiet -o "$win" \
      "$E2E_TMP/ckpt_reentrant-trig-$tag.gtr" || return 1
  w=$(ls "${win%.json}"-w*-blocks.3-backward-it*.json 2>/dev/null)
  [ "$(printf '%s\n' "$w" | grep -c .)" = 1 ] || {
    echo "window files: ${w:-none}"; return 1; }
  "$PY" "$ROOT/tests/tools/validate_trace.py" --quiet "$w" || return 1
  "$py" "$TORCH_DIR/check_trace.py" --window blocks.3 "$w" || rc=1
  return $rc
}

rc=0
run_all "$PY" 1 || rc=1
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import torch, sys; sys.exit(not torch.__version__.startswith("2."))' 2>/dev/null; then
  run_all "$VENV/bin/python" 2 || rc=1
elif [ -n "${CI:-}" ]; then
  echo "CI: no torch 2.x venv at $VENV (scripts/install-torch2.sh)" >&2
  rc=1
else
  echo "note: no torch 2.x venv at $VENV; 2.x recipes not run"
fi
exit $rc
