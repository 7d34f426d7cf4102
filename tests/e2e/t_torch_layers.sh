#!/usr/bin/env bash
# Layers in a libtorch C++ training program without Python
# (tests/progs/torch_layers.cpp, Debian's libtorch-dev; four MLP blocks,
# SGD): with NVTX ranges per block and nested "fc1"/"fc2" ranges
# (GRADTRACE_LAYERS=nvtx), every backward node's layer is the innermost
# layer whose range created it, as the program itself declares from
# libtorch's sequence numbers; the report has one row per block; a
# trigger on blocks.2's backward captures exactly that block's nodes of
# the iteration asked for. The same with the C API (the default source)
# and with RecordFunction user scopes (GRADTRACE_LAYERS=recordfunction);
# without a layer source the report says so. Skips without
# libtorch-dev, except in CI.
set -u
. "$(dirname "$0")/layers/lib.sh"
PROG=$B/progs/torch_layers
for f in "$AGENT" "$GT"; do
  [ -e "$f" ] || { echo "missing $f (run make)"; exit 77; }
done
if [ ! -x "$PROG" ]; then
  [ -n "${CI:-}" ] && die "$PROG not built (libtorch-dev missing in CI?)"
  echo "libtorch-dev not installed: $PROG not built"
  exit 77
fi

layers_run "$PROG" capi capi
$CHECK attrib "$T/capi.txt" "$T/capi.json" || die "capi: attribution"
layers_report capi 3

layers_run "$PROG" nvtx nvtx GRADTRACE_LAYERS=nvtx
$CHECK attrib "$T/nvtx.txt" "$T/nvtx.json" || die "nvtx: attribution"
layers_report nvtx 3
$VALIDATE "$T/nvtx.json" || die "nvtx: trace invalid"
"$GT" report "$T/nvtx.gtr"

layers_run "$PROG" nvtx trig GRADTRACE_LAYERS=nvtx GRADTRACE_CAPTURE=0 \
  GRADTRACE_TRIGGER=layer=blocks.2,phase=backward,iteration=1
files=$(ls "$T"/trig-w*.json 2>/dev/null)
basename "$files" | grep -Eqx "trig-w1-blocks.2-backward-it1(\.pt\.trace)?\.json" || die "window files: $files"
$CHECK window "$T/trig.txt" blocks.2 1 $files || die "trigger window"
$VALIDATE $files || die "window trace invalid"

# RecordFunction user scopes (x86-64 only: schema/torch.md).
if [ "$(uname -m)" = x86_64 ]; then
  layers_run "$PROG" rf rf GRADTRACE_LAYERS=recordfunction
  $CHECK attrib "$T/rf.txt" "$T/rf.json" || die "recordfunction: attribution"
  layers_report rf 3
  layers_run "$PROG" rf rftrig GRADTRACE_LAYERS='recordfunction:blocks.*' GRADTRACE_CAPTURE=0 \
    GRADTRACE_TRIGGER=layer=blocks.2,phase=backward,iteration=2
  files=$(ls "$T"/rftrig-w*.json 2>/dev/null)
  basename "$files" | grep -Eqx "rftrig-w1-blocks.2-backward-it2(\.pt\.trace)?\.json" || die "rf window files: $files"
  $CHECK window "$T/rftrig.txt" blocks.2 2 $files || die "recordfunction trigger window"
fi

# NVTX ranges but no layer source: nodes without layers, and report says why.
layers_run "$PROG" nvtx none
"$GT" report "$T/none.gtr" >/dev/null 2>"$T/none.rerr" && die "layers without a source"
grep -q "no layer source was active" "$T/none.rerr" || die "report: $(cat "$T/none.rerr")"
echo "ok: NVTX and C API layers in a libtorch C++ program"
