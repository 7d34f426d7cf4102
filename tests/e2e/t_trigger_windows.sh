#!/usr/bin/env bash
# Capture windows on the 48-block model (Debian torch, CPU, no daemon:
# GRADTRACE_TRIGGER arms at start). blocks.17's backward at iteration 3
# gives exactly one file holding exactly that pass's blocks.17 nodes
# (compared with a full capture of the same deterministic run) at most
# 1/40 of the full trace's size, and no main file; then phase=forward,
# phase=both, count=3 and a glob matching ten blocks (one window: ten
# forward segments, or one backward segment and its last block's weight
# gradient). Every file is validated.
set -u
. "$(dirname "$0")/trigger/lib.sh"
trig_require

file_run full "" --iters 5
[ -f "$E2E_TMP/full.json" ] || die "full capture wrote no trace"
$VALIDATE "$E2E_TMP/full.json" || die "full trace invalid"

file_run b17 "layer=blocks.17,phase=backward,iteration=3" --iters 5
[ -e "$E2E_TMP/b17.json" ] && die "a trigger-only capture left a main trace"
files=$(window_files b17)
basename "$files" | grep -Eqx "b17-w1-blocks.17-backward-it3(\.pt\.trace)?\.json" || die "window file name: $files"
$CHECK backward --layer blocks.17 --iteration 3 --full "$E2E_TMP/full.json" --ratio 40 $files \
  || die "blocks.17 backward window"
$VALIDATE $files || die "window trace invalid"

file_run fwd "layer=blocks.17,phase=forward,iteration=2" --iters 4
files=$(window_files fwd)
$CHECK forward --layer blocks.17 --iteration 2 --expect blocks.17 --segments 1 $files \
  || die "forward window"
$VALIDATE $files || die "forward window invalid"

file_run both "layer=blocks.17,phase=both,iteration=2" --iters 4
files=$(window_files both)
$CHECK both --layer blocks.17 --iteration 2 $files || die "both window"
$VALIDATE $files || die "both window invalid"

file_run cnt "layer=blocks.17,phase=backward,iteration=1,count=3" --iters 6
files=$(window_files cnt)
$CHECK count --layer blocks.17 --count 3 $files || die "count=3 windows"
$VALIDATE $files || die "count windows invalid"

ten=blocks.10,blocks.11,blocks.12,blocks.13,blocks.14,blocks.15,blocks.16,blocks.17,blocks.18,blocks.19
file_run gf "layer=blocks.1?,phase=forward,iteration=2" --iters 4
files=$(window_files gf)
$CHECK forward --layer 'blocks.1?' --iteration 2 --segments 10 --expect $ten $files \
  || die "glob forward window"
$VALIDATE $files || die "glob forward window invalid"

file_run gb "layer=blocks.1?,phase=backward,iteration=3" --iters 5
files=$(window_files gb)
$CHECK backward --layer 'blocks.1?' --iteration 3 --full "$E2E_TMP/full.json" --ratio 4 $files \
  || die "glob backward window"
# No other layer's node runs between the ten blocks': one segment, and one
# more for blocks.10.fc1's weight gradient, which runs after the last
# counted node.
"$PY" -c 'import json,sys; s=json.load(open(sys.argv[1]))["gradtrace"]["window"]["segments"]; sys.exit(s != 2)' $files \
  || die "glob backward window is not one segment and its last gradient"
$VALIDATE $files || die "glob backward window invalid"
echo ok
