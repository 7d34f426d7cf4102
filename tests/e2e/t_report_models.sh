#!/usr/bin/env bash
# `gradtrace report` on real torch runs: the demo model, torchvision's
# resnet18 (batch 2, 32x32) and tests/e2e/report/models.py's own model,
# on Debian's torch 1.13 and, when its venv exists, PyPI's torch 2.x.
# Every number of the table is recomputed from the trace's events by
# tests/e2e/report/check_report.py (rows, parent >= children, rows add up,
# per-iteration quantiles); the CSV and JSON parse and the JSON matches
# schema/report.md; the .gtr gives the same CSV as the JSON; --svg renders
# with rsvg-convert to a non-blank PNG with one bar row per table row.
# Skips (77) without torch, never when CI is set.
set -u
B=$ROOT/$BUILD
R=$ROOT/tests/e2e/report
die() { echo "FAIL: $*" >&2; exit 1; }
skip() { [ -n "${CI:-}" ] && die "$* (CI is set: no skip)"; echo "skip: $*"; exit 77; }
[ -x "$B/gradtrace" ] || die "build/gradtrace missing"
. "$ROOT/tests/e2e/torch/lib.sh"
torch_require "$PYTHON" torchvision
command -v rsvg-convert >/dev/null || skip "no rsvg-convert (scripts/install-deps.sh)"
cd "$E2E_TMP"
export GRADTRACE_SOCKET=$E2E_TMP/none/agent.sock GRADTRACE_CONTROL=$E2E_TMP/none/control.sock
VENV=${GRADTRACE_TORCH2_VENV:-$HOME/.cache/gradtrace/torch2-venv}
pys=("$PYTHON")
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c 'import torch, torchvision' 2>/dev/null; then
  pys+=("$VENV/bin/python")
elif [ -n "${CI:-}" ]; then
  die "no torch 2.x venv at $VENV"
fi

one() { # PY MODEL ITERS TAG
  local py=$1 model=$2 iters=$3 tag=$4 out=$E2E_TMP/$4
  echo "== $model on $py"
  "$B/gradtrace" record --raw -o "$out" -- "$py" "$R/models.py" "$model" "$iters" \
    2>"$out.err" || die "$tag: record failed: $(tail -5 "$out.err")"
  local json gtr
  json=$(ls "$out"/*.json | paste -sd, -) gtr=$(ls "$out"/*.gtr)
  # Every iteration: check_report.py recomputes the rows from the whole trace.
  "$B/gradtrace" report --include-warmup --format csv "$gtr" >"$out.csv" || die "$tag: csv"
  "$B/gradtrace" report --include-warmup --csv ${json//,/ } >"$out.j.csv" || die "$tag: csv from json"
  cmp -s "$out.csv" "$out.j.csv" || die "$tag: gtr and json tables differ"
  "$B/gradtrace" report --include-warmup --format json "$gtr" >"$out.json" || die "$tag: json"
  "$PYTHON" "$R/check_report.py" "$json" "$out.csv" "$out.json" "$ROOT/schema/report.md" ||
    die "$tag: report numbers"
  # --iterations: rows, remainder and step narrowed alike, still adding up.
  "$B/gradtrace" report --format csv --iterations 1-2 "$gtr" >"$out.sel.csv" || die "$tag: sel csv"
  "$B/gradtrace" report --format json --iterations 1-2 "$gtr" >"$out.sel.json" || die "$tag: sel json"
  "$PYTHON" "$R/check_report.py" "$json" "$out.sel.csv" "$out.sel.json" "$ROOT/schema/report.md" 1-2 ||
    die "$tag: report numbers of iterations 1-2"
  "$B/gradtrace" report --depth 2 --svg "$out.svg" "$gtr" >"$out.txt" || die "$tag: svg"
  grep -q "^hints:" "$out.txt" || die "$tag: no hints section"
  rsvg-convert -o "$out.png" "$out.svg" || die "$tag: rsvg-convert"
  local rows
  rows=$("$B/gradtrace" report --depth 2 --format csv "$gtr" | grep -vc '^(\|^layer,')
  "$PYTHON" "$R/png_bars.py" "$out.png" "$rows" || die "$tag: svg picture"
}

i=0
for py in "${pys[@]}"; do
  i=$((i + 1))
  one "$py" demo 3 demo$i
  one "$py" resnet18 2 resnet$i
  one "$py" mine 3 mine$i
done
echo ok
