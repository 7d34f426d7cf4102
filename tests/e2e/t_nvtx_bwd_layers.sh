#!/usr/bin/env bash
# Backward ranges as layer backward spans (issue #18) in a C program with
# no autograd nodes (tests/progs/nvtx_bwd_layers.c: NVTX `iter <i>` >
# `forward` | `backward` | `optimizer` > `block.<k>`, as
# kernels/mlp_train.cu names them; tests/progs/nvtx_client.h without the
# toolkit): each block's backward range is its backward span, as long as
# the program measured it; the report's backward time per block is the
# sum of its ranges, block.2 (the slow one) largest; a trigger on
# block.2's backward (and phase both) captures exactly that block's
# backward (and forward) of the iteration asked for, counting an NVTX
# `backward` phase range as one backward pass. Kernel tags need a GPU
# (scripts/gpu-check.sh).
set -u
. "$(dirname "$0")/layers/lib.sh"
PROG=$B/progs/nvtx_bwd_layers
RCHECK="python3 $PWD/tests/e2e/layers/check_ranges.py"
for f in "$AGENT" "$GT" "$PROG"; do
  [ -e "$f" ] || { echo "missing $f (run make)"; exit 77; }
done
LAYERS='nvtx::block.*'

layers_run "$PROG" nvtx all GRADTRACE_LAYERS="$LAYERS"
$RCHECK trace "$T/all.txt" "$T/all.json" || die "backward spans"
$VALIDATE "$T/all.json" || die "trace invalid"
"$GT" report --include-warmup --csv "$T/all.gtr" >"$T/all.csv" 2>"$T/all.rerr" \
  || { cat "$T/all.rerr"; die "report failed"; }
$RCHECK report "$T/all.txt" "$T/all.csv" || die "report rows"
"$GT" report "$T/all.gtr"

for phase in backward both; do
  layers_run "$PROG" nvtx "$phase" GRADTRACE_LAYERS="$LAYERS" GRADTRACE_CAPTURE=0 \
    GRADTRACE_TRIGGER=layer=block.2,phase=$phase,iteration=1
  files=$(ls "$T/$phase"-w*.json 2>/dev/null)
  basename "$files" | grep -Eqx "$phase-w1-block.2-$phase-it1(\.pt\.trace)?\.json" || die "$phase window files: $files"
  $RCHECK window "$T/$phase.txt" "$phase" block.2 1 $files || die "$phase window"
  $VALIDATE $files || die "$phase window trace invalid"
done
echo "ok: NVTX backward ranges are layer backward spans and open backward windows"
