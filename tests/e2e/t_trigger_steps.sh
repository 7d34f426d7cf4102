#!/usr/bin/env bash
# Iterations are training steps (schema/control.md, "Iterations"), on the
# 48-block model without a daemon (GRADTRACE_TRIGGER arms at start):
#   - gradient accumulation (4 backward passes per optimizer step): the
#     trace has ProfilerStep#0..#2, each holding its 4 passes, the report
#     counts 3 iterations, and iteration=1 captures exactly step 1's
#     blocks.17 nodes (a segment or more per pass), pass=2 exactly its
#     third pass's;
#   - torch.autograd.grad and a second backward over a retained graph are
#     no iterations (with and without an optimizer);
#   - torch 2.x: the same; a GradScaler step that skips the optimizer
#     step (overflow) still ends its training step; under torch.compile
#     (aot_eager) iteration=0 is step 0 (the compile-time backward is no
#     iteration).
set -u
. "$(dirname "$0")/trigger/lib.sh"
trig_require
STEPS="$PY $TRIG/check_steps.py"

# steps_case PY TAG: the accumulation and extra-pass checks with PY.
steps_case() {
  local py=$1 t=$2
  PY=$py file_run ${t}full "" --iters 3 --accum 4
  $STEPS steps "$E2E_TMP/${t}full.json" --steps 3 --passes 4 || die "$t: steps"
  "$B/gradtrace" report --include-warmup --format json "$E2E_TMP/${t}full.json" >"$E2E_TMP/${t}rep.json" \
    || die "$t: report failed"
  "$py" -c 'import json,sys; n=json.load(open(sys.argv[1]))["iterations"]["count"]; sys.exit(n != 3)' \
    "$E2E_TMP/${t}rep.json" || die "$t: report does not count 3 iterations"

  PY=$py file_run ${t}acc "layer=blocks.17,phase=backward,iteration=1" --iters 3 --accum 4
  files=$(window_files ${t}acc)
  [ "$(basename "$files")" = "${t}acc-w1-blocks.17-backward-it1.json" ] || die "$t: window file: $files"
  $STEPS window "$E2E_TMP/${t}full.json" --layer blocks.17 --iteration 1 --segments 4 $files \
    || die "$t: step 1 window"
  $VALIDATE $files || die "$t: window invalid"

  PY=$py file_run ${t}p2 "layer=blocks.17,phase=backward,iteration=1,pass=2" --iters 3 --accum 4
  files=$(window_files ${t}p2)
  $STEPS window "$E2E_TMP/${t}full.json" --layer blocks.17 --iteration 1 --segments 1 --pass 2 $files \
    || die "$t: pass=2 window"

  # Per micro-batch: autograd.grad, backward(retain_graph), backward again.
  PY=$py file_run ${t}xfull "" --iters 3 --accum 2 --extra
  $STEPS steps "$E2E_TMP/${t}xfull.json" --steps 3 --passes 6 || die "$t: extra passes"
  PY=$py file_run ${t}x "layer=blocks.17,phase=backward,iteration=2" --iters 3 --accum 2 --extra
  $STEPS window "$E2E_TMP/${t}xfull.json" --layer blocks.17 --iteration 2 --segments 6 \
    $(window_files ${t}x) || die "$t: window over extra passes"

  # No optimizer: iterations are the counted backward passes.
  PY=$py file_run ${t}nfull "" --iters 3 --no-opt --extra
  $STEPS steps "$E2E_TMP/${t}nfull.json" --steps 3 || die "$t: passes without optimizer"
  PY=$py file_run ${t}n "layer=blocks.17,phase=backward,iteration=2" --iters 3 --no-opt --extra
  files=$(window_files ${t}n)
  [ "$(basename "$files")" = "${t}n-w1-blocks.17-backward-it2.json" ] || die "$t: no-opt window: $files"
}

steps_case "$PY" t1

PY2=$HOME/.cache/gradtrace/torch2-venv/bin/python
if [ -x "$PY2" ] && "$PY2" -c "import torch" 2>/dev/null; then
  steps_case "$PY2" t2
  # An AMP GradScaler that skips step 1's optimizer step (overflow): that
  # training step still ends there.
  PY=$PY2 file_run amp "" --iters 3 --amp-skip
  $STEPS steps "$E2E_TMP/amp.json" --steps 3 --passes 1 || die "GradScaler skipped step"
  PY=$PY2 file_run cfull "" --iters 3 --compile aot_eager
  $STEPS steps "$E2E_TMP/cfull.json" --steps 3 || die "compile: steps"
  PY=$PY2 file_run c0 "layer=Net48,phase=backward,iteration=0" --iters 3 --compile aot_eager
  files=$(window_files c0)
  [ "$(basename "$files")" = "c0-w1-Net48-backward-it0.json" ] || die "compile: window file: $files"
  $VALIDATE $files || die "compile: window invalid"
elif [ -n "${CI:-}" ]; then
  die "CI: no torch 2.x venv at $PY2"
else
  echo "skip torch 2.x part: no venv at $PY2"
fi
echo ok
