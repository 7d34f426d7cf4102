#!/usr/bin/env bash
# make demo: profiles the bundled example training run (examples/
# train_small.py on Debian's CPU torch) under `gradtrace record`, then
# prints where the trace is, the per-layer forward/backward table with its
# hints, and the path of the table's bar chart (SVG).
# The trace opens in https://ui.perfetto.dev, or offline in catapult's
# trace2html page or TensorBoard's profiler plugin (README, "Viewing a trace").
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-/usr/bin/python3}
out=${DEMO_OUT:-$PWD/demo-traces}

"$PYTHON" -c 'import torch' 2>/dev/null || {
  echo "demo: $PYTHON cannot import torch; run scripts/install-deps.sh" >&2
  exit 1
}
rm -rf "$out"
echo "demo: training examples/train_small.py under gradtrace record..."
"$BUILD/gradtrace" record --raw -o "$out" -- "$PYTHON" examples/train_small.py 2>"$out.log" || {
  cat "$out.log" >&2
  exit 1
}
trace=$(ls "$out"/*.json | head -n 1)
echo
echo "Trace (open in https://ui.perfetto.dev; offline viewers: README, \"Viewing a trace\"):"
for f in "$out"/*.json; do echo "  $f"; done
echo "Raw recording (gradtrace convert / gradtrace report take it too):"
for f in "$out"/*.gtr; do echo "  $f"; done
echo
echo "Per-layer table and hints (gradtrace report --svg $out/layers.svg $trace):"
"$BUILD/gradtrace" report --svg "$out/layers.svg" "$out"/*.json | tee "$out/layers.txt"
echo
echo "Table saved as $out/layers.txt"
echo "Bar chart (SVG, opens in any browser): $out/layers.svg"
rm -f "$out.log"
