#!/usr/bin/env bash
# Layers in a C program without Python or libtorch (tests/progs/
# capi_layers.c, which plays autograd through the C API): with the C API's
# module scopes (the default layer source) and with NVTX ranges
# (GRADTRACE_LAYERS=nvtx, nested names joined, "blocks.<i> backward"
# ranges), every backward node's layer is the one the program declares,
# the report has one row per block, and a trigger on blocks.2's backward
# captures exactly that block's nodes of the iteration asked for.
set -u
. "$(dirname "$0")/layers/lib.sh"
PROG=$B/progs/capi_layers
for f in "$AGENT" "$GT" "$PROG"; do
  [ -e "$f" ] || { echo "missing $f (run make)"; exit 77; }
done

layers_run "$PROG" capi capi
$CHECK attrib "$T/capi.txt" "$T/capi.json" || die "capi: attribution"
layers_report capi 3
$VALIDATE "$T/capi.json" || die "capi: trace invalid"

# The C API is no layer source when the list leaves it out.
layers_run "$PROG" capi capi_off GRADTRACE_LAYERS=nvtx
"$GT" report "$T/capi_off.gtr" >/dev/null 2>"$T/off.err" && die "layers without a source"
grep -q "no layer source was active" "$T/off.err" || die "report: $(cat "$T/off.err")"
grep -q "GRADTRACE_LAYERS" "$T/off.err" || die "report does not name GRADTRACE_LAYERS"

# NVTX (the toolkit's nvtx3 or tests/progs/nvtx_client.h).
layers_run "$PROG" nvtx nvtx GRADTRACE_LAYERS=nvtx
$CHECK attrib "$T/nvtx.txt" "$T/nvtx.json" || die "nvtx: attribution"
layers_report nvtx 3
layers_run "$PROG" nvtx trig GRADTRACE_LAYERS=nvtx GRADTRACE_CAPTURE=0 \
  GRADTRACE_TRIGGER=layer=blocks.2,phase=backward,iteration=1
files=$(ls "$T"/trig-w*.json 2>/dev/null)
basename "$files" | grep -Eqx "trig-w1-blocks.2-backward-it1(\.pt\.trace)?\.json" || die "window files: $files"
$CHECK window "$T/trig.txt" blocks.2 1 $files || die "trigger window"
$VALIDATE "$T/nvtx.json" $files || die "nvtx: trace invalid"
echo "ok: C API and NVTX layers in a C program"
