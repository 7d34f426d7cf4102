#!/usr/bin/env bash
# HTA and the TensorBoard profiler plugin on a GPU trace: a synthetic
# stream (tests/progs/gen_gtr --gpu --ops, every time a whole
# microsecond, as HTA rounds them) through the real converter. HTA's
# temporal breakdown, kernel breakdown, idle time, queue length, launch
# statistics, operator-to-kernel delay and critical path run and give the
# numbers the trace's own events imply (tests/e2e/consumers/check_hta.py);
# the plugin's loader finds the steps, one operator row per cpu_op name
# with its calls, the kernel view and no negative time (check_tb.py).
# A capture window's file alone (gen_gtr --window: one iteration's
# backward) is one iteration to HTA, whose critical path runs on it.
set -eu
. "$ROOT/tests/e2e/consumers/lib.sh"
consumers_require
B=$ROOT/$BUILD
T=$E2E_TMP
mkdir "$T/g"
"$B/progs/gen_gtr" -o "$T/g.gtr" --iterations 5 --layers 3 --gpu --steps --ops \
  --scale 1000 >/dev/null
"$B/gradtrace" convert --quiet "$T/g.gtr"
mv "$T"/g*.json "$T/g/"
ls "$T"/g/*.pt.trace.json >/dev/null
"${PYTHON:-/usr/bin/python3}" "$ROOT/tests/tools/validate_trace.py" "$T"/g/*.json
"$CPY" "$CDIR/check_hta.py" gpu "$T/g" | grep '^hta:'
"$CPY" "$CDIR/check_tb.py" "$T"/g/*.json 2>/dev/null

mkdir "$T/w" "$T/wmain"
"$B/progs/gen_gtr" -o "$T/w.gtr" --iterations 5 --layers 3 --gpu --steps --ops \
  --scale 1000 --window 2 >/dev/null
"$B/gradtrace" convert --quiet -o "$T/wmain/w.pt.trace.json" "$T/w.gtr"
mv "$T"/wmain/w-w1-*.json "$T/w/"
"${PYTHON:-/usr/bin/python3}" "$ROOT/tests/tools/validate_trace.py" "$T"/w/*.json
"$CPY" "$CDIR/check_hta.py" window "$T/w" 2 | grep '^hta:'
echo ok
