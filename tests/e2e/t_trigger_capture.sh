#!/usr/bin/env bash
# A trigger while capture is on (GRADTRACE_CAPTURE=1, as after `gradtrace
# start`): the window is an extra view. The main trace keeps every event of
# blocks.17 that the same run without a trigger has (backward nodes and
# forward calls, counted), and the window file holds blocks.17's backward
# of iteration 2 with its nodes and its layer backward span.
set -u
. "$(dirname "$0")/trigger/lib.sh"
trig_require
COUNT="$PY $TRIG/count_layer.py"

# on_run NAME SPEC: capture on from the start, SPEC armed.
on_run() {
  rm -f "$E2E_TMP/$1".* "$E2E_TMP/$1"-w*
  env LD_PRELOAD="$AGENT" GRADTRACE_FILE="$E2E_TMP/$1.gtr" GRADTRACE_CAPTURE=1 \
      GRADTRACE_TRIGGER="$2" PYTHONPATH="$ROOT/python" "$PY" "$MODEL" --iters 4 \
      >"$E2E_TMP/$1.stdout" 2>"$E2E_TMP/$1.stderr" \
    || { cat "$E2E_TMP/$1.stderr" >&2; die "$1: training failed"; }
  "$B/gradtrace" convert -q "$E2E_TMP/$1.gtr" -o "$E2E_TMP/$1.json" || die "$1: convert failed"
}

on_run plain ""
on_run trig "layer=blocks.17,phase=backward,iteration=2"
want=$($COUNT blocks.17 "$E2E_TMP/plain.json")
got=$($COUNT blocks.17 "$E2E_TMP/trig.json")
echo "blocks.17 (nodes, forward calls, backward spans): without trigger $want, with $got"
read -r n f s <<<"$want"
[ "$n" -gt 0 ] && [ "$f" -gt 0 ] && [ "$s" -eq 4 ] || die "the plain run has no blocks.17 events: $want"
[ "$got" = "$want" ] || die "the main trace lost events to the window: $got, want $want"

files=$(window_files trig)
[ "$(basename "$files")" = "trig-w1-blocks.17-backward-it2.json" ] || die "window file: $files"
read -r wn wf ws <<<"$($COUNT blocks.17 $files)"
[ "$wn" -gt 0 ] && [ "$wf" -eq 0 ] && [ "$ws" -eq 1 ] \
  || die "window: $wn nodes, $wf forward calls, $ws backward spans (want >0, 0, 1)"
$CHECK backward --layer blocks.17 --iteration 2 $files || die "window content"
$VALIDATE "$E2E_TMP/trig.json" $files || die "traces invalid"
echo ok
