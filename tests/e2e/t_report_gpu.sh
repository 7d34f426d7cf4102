#!/usr/bin/env bash
# `gradtrace report` with CUDA data, from the synthetic stream generator
# (tests/progs/gen_gtr --gpu: kernels tagged with layer and phase, as
# CUPTI + EXT_CORR give them): per-layer GPU time per phase appears, the
# .gtr and its JSON give the same table, and every number (GPU columns
# included, inclusive of sub-layers) is recomputed from the trace.
set -u
B=$ROOT/$BUILD
R=$ROOT/tests/e2e/report
die() { echo "FAIL: $*" >&2; exit 1; }
[ -x "$B/progs/gen_gtr" ] || die "build/progs/gen_gtr missing"
cd "$E2E_TMP"
"$B/progs/gen_gtr" -o g.gtr --iterations 5 --layers 3 --gpu --steps >/dev/null || die "gen_gtr"
"$B/gradtrace" convert -o g.json --quiet g.gtr || die "convert"
"$B/gradtrace" report --csv g.gtr >g.csv || die "report csv"
"$B/gradtrace" report --csv g.json >gj.csv || die "report csv from json"
cmp -s g.csv gj.csv || die "gtr and json tables differ"
"$B/gradtrace" report --format json g.gtr >g.rep.json || die "report json"
"$PYTHON" "$R/check_report.py" g.json g.csv g.rep.json "$ROOT/schema/report.md" || die "numbers"
"$B/gradtrace" report g.gtr >g.txt || die "table"
# Per iteration by default (labels /it), sums with --totals.
grep -q "gpu fwd/it" g.txt || die "no GPU columns in the table"
"$B/gradtrace" report --totals g.gtr | grep -q "gpu fwd ms" || die "no GPU columns with --totals"
awk -F, 'NR > 1 && $1 == "layers.0.fc1" && $25 + 0 > 0 && $26 + 0 > 0 { ok = 1 } END { exit !ok }' g.csv ||
  die "layers.0.fc1 has no GPU time per phase"
"$B/gradtrace" diff g.gtr g.json | head -1 | grep -q "d gpu" || die "diff shows no GPU delta"
echo ok
