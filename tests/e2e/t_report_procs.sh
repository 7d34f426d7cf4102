#!/usr/bin/env bash
# `gradtrace report` over all of a run's traces keeps processes apart
# (issue 27): a DataLoader run with two worker processes that apply a
# module of their own (tests/e2e/report/dataloader_model.py, Debian's
# torch) records three traces; the report of all three is the training
# process's table (its Net, fc1, fc2; no worker's Linear row) and names
# the two workers with --pid; `--pid` of a worker gives its own table;
# a pid that wrote none is a usage error.
set -u
. "$(dirname "$0")/torch/lib.sh"
PY=${PYTHON:-/usr/bin/python3}
torch_require "$PY"
GT=$ROOT/$BUILD/gradtrace
die() { echo "FAIL: $*" >&2; exit 1; }
cd "$E2E_TMP"
"$GT" record -o out -- "$PY" "$ROOT/tests/e2e/report/dataloader_model.py" \
  >rec.out 2>rec.err || { tail -5 rec.err; die "record failed"; }
n=$(ls out/*.json | wc -l)
[ "$n" -eq 3 ] || die "want 3 traces (main + 2 workers), got $n: $(ls out)"
"$GT" report out/*.json >all.txt 2>all.err || { cat all.err; die "report failed"; }
"$GT" report --format json out/*.json >all.json 2>all.jerr || die "report --format json failed"
"$PY" - all.json all.txt all.jerr <<'PYEOF' || die "the table mixes processes"
import json, re, sys
rows = [l["path"] for l in json.load(open(sys.argv[1]))["layers"]]
txt, note = open(sys.argv[2]).read(), open(sys.argv[3]).read()
print("rows:", rows)
assert rows == ["Net", "fc1", "fc2"], rows
for t in (txt, note):
    assert len(re.findall(r"pid \d+ +parent \d+", t)) == 2, t
    assert "--pid" in t, t
PYEOF
main=$(sed -n 's/.*the table is of pid \([0-9]*\).*/\1/p' all.txt)
worker=$(sed -n 's/^  pid \([0-9]*\) .*/\1/p' all.txt | head -1)
[ -n "$main" ] && [ -n "$worker" ] || die "no pids in the note"
"$GT" report --format json --pid "$worker" out/*.json >w.json 2>w.err || { cat w.err; die "--pid $worker"; }
"$PY" -c 'import json,sys; r=[l["path"] for l in json.load(open(sys.argv[1]))["layers"]]; print("worker rows:", r); sys.exit(r != ["Linear"])' w.json \
  || die "the worker's table is not its Linear"
"$GT" report --pid 1 out/*.json >/dev/null 2>bad.err
[ $? -eq 2 ] && grep -q "no input was written by that process" bad.err || die "--pid of no input: $(cat bad.err)"
echo ok
