#!/usr/bin/env bash
# Communication inside backward as its own category (issue 27), on real
# processes under `gradtrace record` (tests/e2e/torch/comm_models.py,
# checked by tests/e2e/torch/check_comm.py on rank 0's trace and its
# report, json and text):
#   - DDP, two gloo ranks, small buckets, no_sync accumulation: DDP's
#     reducer inside every parameter's AccumulateGrad node, its wait for
#     the all-reduces in each synchronised pass outside nodes; the rows
#     with parameters have communication, AccumulateGrad time is without
#     it, no accumulate-grad hint;
#   - a custom Function whose backward all-reduces from Python (tensor
#     parallel's input gradient): the all_reduce inside its node, the two
#     parallel layers' rows alone with communication;
#   - the same model without DDP: no communication anywhere, no column;
#     `gradtrace diff` from it to the DDP run gives each row with
#     parameters a communication delta, the others none.
# On Debian's torch 1.13 and on the torch 2.x venv (DDP and the Function).
# e2e-timeout: 300
set -u
. "$(dirname "$0")/torch/lib.sh"
PY1=${PYTHON:-/usr/bin/python3}
torch_require "$PY1"
torch2_require
PY2=$PY
GT=$ROOT/$BUILD/gradtrace
die() { echo "FAIL: $*" >&2; exit 1; }
cd "$E2E_TMP"

# case PY MODE CHECK: records comm_models.py MODE (torch 2.15 with gloo
# sometimes aborts after Python has finished, "terminate called without
# an active exception", also without the agent: such a run is tried
# again, at most twice), then checks rank 0's trace (the only one when
# there is one process).
case_run() {
  local py=$1 mode=$2 check=$3 name=$2-$(basename "$(dirname "$(dirname "$1")")") try
  for try in 1 2 3; do
    rm -rf "$name"
    "$GT" record -o "$name" -- "$py" "$TORCH_DIR/comm_models.py" "$mode" \
      >"$name.stdout" 2>"$name.stderr" && break
    grep -q "terminate called without an active exception" "$name.stderr" &&
      [ $try -lt 3 ] || { tail -20 "$name.stderr"; die "$name failed"; }
    echo "(torch aborted at exit, try $try: again)"
  done
  [ -s "$name.stdout" ] && die "$name: output on the job's stdout: $(head -3 "$name.stdout")"
  local f
  f=$(ls "$name"/*rank0*.json 2>/dev/null | head -1)
  [ -n "$f" ] || f=$(ls "$name"/*.json | head -1)
  [ -n "$f" ] || die "$name: no trace: $(ls "$name")"
  "$GT" report --format json "$f" >"$name.rep.json" 2>"$name.rep.err" ||
    { cat "$name.rep.err"; die "$name: report --format json"; }
  "$GT" report "$f" >"$name.rep.txt" 2>>"$name.rep.err" ||
    { cat "$name.rep.err"; die "$name: report"; }
  echo "== $mode ($py)"
  "$PY1" "$TORCH_DIR/check_comm.py" "$check" "$f" "$name.rep.json" "$name.rep.txt" ||
    { cat "$name.rep.txt"; die "$name: communication"; }
}

case_run "$PY1" ddp ddp
case_run "$PY1" tp tp
case_run "$PY1" plain none
"$GT" diff "$(ls plain-usr/*.json)" "$(ls ddp-usr/*rank0*.json)" >diff.txt 2>diff.err ||
  { cat diff.err; die "diff plain -> ddp"; }
"$PY1" - diff.txt <<'PYEOF' || { cat diff.txt; die "diff: communication deltas"; }
import sys
lines = open(sys.argv[1]).read().splitlines()
assert lines[0].split()[-2:] == ["comm", "verdict"], lines[0]
rows = {l.split()[0]: l.split() for l in lines[1:] if l and not l.startswith(("iterations", "rule", " "))}
params = {"embed", "stem.conv", "stem.norm", "mix.0", "mix.2", "ln", "out"}
for name, r in rows.items():
    if name not in params | {"Tower", "stem", "mix", "mix.1"}:
        continue
    d = float(r[-2])
    assert (d > 0) == (name in params), (name, r)
print("diff: d comm > 0 on", sorted(params))
PYEOF
case_run "$PY2" ddp ddp
case_run "$PY2" tp tp
echo ok
