#!/usr/bin/env bash
# Forward operators (agent/ops.c: libtorch's RecordFunction reached from
# a Python process) on torch 1.13 and 2.x: aten operators as cpu_op
# events nested in their modules, arrows from the operators that created
# the nodes, Sequence numbers (tests/e2e/torch/check_ops.py); and
# GRADTRACE_OPS=0 records none; a capture stopped and started again
# pauses and resumes the callback, and records exactly the captured
# steps' operators. A C++ program linked with libtorch
# (tests/progs/torch_layers) gets them too: registered at agent start.
set -u
. "$(dirname "$0")/daemon_lib.sh"
need "$B/gradtrace" "$B/libgradtrace.so"
. "$ROOT/tests/e2e/torch/lib.sh"
PY1=${PYTHON:-/usr/bin/python3}
PY2=${GRADTRACE_TORCH2_VENV:-$HOME/.cache/gradtrace/torch2-venv}/bin/python
torch_require "$PY1"
cd "$E2E_TMP"
run() { # NAME PY [ENV...]
  local name=$1 py=$2; shift 2
  env "$@" "$B/gradtrace" record -o "$name" -- "$py" "$ROOT/tests/e2e/torch/ops_model.py" \
    >"$name.stdout" 2>"$name.stderr" || die "$name: $(tail -5 "$name.stderr")"
  [ -s "$name.stdout" ] && die "$name: output on stdout"
  ls "$name"/*.json
}
pys=("$PY1")
if [ -x "$PY2" ]; then pys+=("$PY2")
elif [ -n "${CI:-}" ]; then die "no torch 2.x venv (CI)"
fi
for py in "${pys[@]}"; do
  v=$("$py" -c 'import torch; print(torch.__version__.split(".")[0])')
  f=$(run "on$v" "$py") || exit 1
  validate $f
  "$PY1" "$ROOT/tests/e2e/torch/check_ops.py" $f || die "torch $v operators"
  f=$(run "off$v" "$py" GRADTRACE_OPS=0) || exit 1
  "$PY1" "$ROOT/tests/e2e/torch/check_ops.py" $f --none || die "torch $v GRADTRACE_OPS=0"
  # Capture off for step 1, on again for step 2: the operator callback is
  # paused in libtorch while nothing is captured (idle costs no
  # RecordFunction) and resumed by the next capture's first module, so
  # steps 0 and 2 have their 4 aten::linear each and step 1 none.
  env LD_PRELOAD="$B/libgradtrace.so" GRADTRACE_FILE="$E2E_TMP/tog$v.gtr" \
      GRADTRACE_LOG=1 PYTHONPATH="$ROOT/python" \
      "$py" "$ROOT/tests/e2e/torch/ops_model.py" toggle \
      >"tog$v.stdout" 2>"tog$v.stderr" || die "toggle: $(tail -5 "tog$v.stderr")"
  [ -s "tog$v.stdout" ] && die "toggle: output on stdout"
  grep -q "torch operators: callback paused" "tog$v.stderr" || die "torch $v: callback never paused"
  grep -q "torch operators: callback resumed" "tog$v.stderr" || die "torch $v: callback never resumed"
  "$B/gradtrace" convert --quiet -o "tog$v.pt.trace.json" "tog$v.gtr" || die "convert toggle"
  validate "tog$v.pt.trace.json"
  n=$("$PY1" -c 'import json,sys; print(sum(e.get("cat") == "cpu_op" and e.get("name") == "aten::linear" for e in json.load(open(sys.argv[1]))["traceEvents"]))' "tog$v.pt.trace.json")
  [ "$n" = 8 ] || die "torch $v toggle: $n aten::linear, want 8 (steps 0 and 2)"
done
if [ -x "$B/progs/torch_layers" ]; then
  LD_PRELOAD=$B/libgradtrace.so GRADTRACE_FILE=$E2E_TMP/cxx.gtr \
    "$B/progs/torch_layers" capi "$E2E_TMP/cxx.txt" 3 >/dev/null || die "torch_layers"
  "$B/gradtrace" convert --quiet -o cxx.pt.trace.json cxx.gtr || die "convert cxx"
  validate cxx.pt.trace.json
  n=$("$PY1" -c 'import json,sys; print(sum(e.get("cat") == "cpu_op" for e in json.load(open(sys.argv[1]))["traceEvents"]))' cxx.pt.trace.json)
  [ "$n" -gt 0 ] || die "no cpu_op in the C++ program's trace"
  echo "C++ program: $n cpu_op"
fi
echo ok
