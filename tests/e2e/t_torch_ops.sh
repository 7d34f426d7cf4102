#!/usr/bin/env bash
# Forward operators (agent/ops.c: libtorch's RecordFunction reached from
# a Python process) on torch 1.13 and 2.x. They are opt-in: with `record
# --ops`, aten operators as cpu_op events nested in their modules, arrows
# from the operators that created the nodes, Sequence numbers
# (tests/e2e/torch/check_ops.py), and the trace's detail says "all"; by
# default none, detail "off"; a trigger with ops=1 records them inside its
# window only (detail "windows"), the rest of a full capture staying
# without; with GRADTRACE_OPS=1 a capture stopped and started again
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
run() { # NAME PY [RECORD-OPTION...]
  local name=$1 py=$2; shift 2
  "$B/gradtrace" record -o "$name" "$@" -- "$py" "$ROOT/tests/e2e/torch/ops_model.py" \
    >"$name.stdout" 2>"$name.stderr" || die "$name: $(tail -5 "$name.stderr")"
  [ -s "$name.stdout" ] && die "$name: output on stdout"
  ls "$name"/*.json
}
# detail FILE: the trace's "detail" ops value and its operator count.
detail() {
  "$PY1" -c 'import json,sys; d=json.load(open(sys.argv[1]))["gradtrace"]["detail"]; print(d["ops"], d["op_events"])' "$1"
}
pys=("$PY1")
if [ -x "$PY2" ]; then pys+=("$PY2")
elif [ -n "${CI:-}" ]; then die "no torch 2.x venv (CI)"
fi
for py in "${pys[@]}"; do
  v=$("$py" -c 'import torch; print(torch.__version__.split(".")[0])')
  f=$(run "on$v" "$py" --ops) || exit 1
  validate $f
  "$PY1" "$ROOT/tests/e2e/torch/check_ops.py" $f || die "torch $v operators"
  d=$(detail $f); [ "${d% *}" = all ] && [ "${d#* }" -gt 0 ] || die "torch $v --ops: detail $d"
  "$B/gradtrace" report $f | grep -q '^operators: captured (--ops)$' || die "torch $v --ops: report"

  f=$(run "off$v" "$py") || exit 1
  "$PY1" "$ROOT/tests/e2e/torch/check_ops.py" $f --none || die "torch $v default capture has operators"
  [ "$(detail $f)" = "off 0" ] || die "torch $v default: detail $(detail $f)"
  "$B/gradtrace" report $f | grep -q '^operators: not captured' || die "torch $v default: report"

  # A full capture with one window asking for operators: the forward of
  # layer 2 (a Linear) in step 1. Operators only inside that window; its
  # file holds them too.
  f=$(GRADTRACE_CAPTURE=1 run "win$v" "$py" --trigger layer=2,phase=forward,iteration=1,ops=1) || exit 1
  validate $f
  "$B/gradtrace" report $f | grep -q '^operators: captured in the windows' || die "torch $v ops=1: report"
  "$PY1" - $f <<'PY' || die "torch $v ops=1 window"
import json, sys
wins = [p for p in sys.argv[1:] if "-w1-" in p.rsplit("/", 1)[-1]]
mains = [p for p in sys.argv[1:] if p not in wins]
assert len(mains) == 1 and len(wins) == 1, sys.argv[1:]
main = json.load(open(mains[0])); win = json.load(open(wins[0]))
ev = main["traceEvents"]
ops = [e for e in ev if e.get("cat") == "cpu_op"]
assert ops, "no operator in the main trace"
names = {e["name"] for e in ops}
assert any(e["name"] == "aten::linear" for e in ops), names
n_lin = sum(e["name"] == "aten::linear" for e in ops)
assert n_lin == 1, "want layer 2's one aten::linear of step 1, got %d" % n_lin
d = main["gradtrace"]["detail"]
assert d == {"ops": "windows", "op_events": len(ops)}, (d, len(ops))
wops = [e for e in win["traceEvents"] if e.get("cat") == "cpu_op"]
assert sum(e["name"] == "aten::linear" for e in wops) == 1, [e["name"] for e in wops]
d = win["gradtrace"]["detail"]
assert d == {"ops": "windows", "op_events": len(wops)}, (d, len(wops))
# Every operator of the main trace lies inside one of layer 2's three
# forward spans (the window's), and the rest of the run is captured
# (layers of all 3 steps), without operators.
fw = sorted((e["ts"], e["ts"] + e["dur"]) for e in ev
            if e.get("cat") == "layer_forward" and e["name"].startswith("2 ("))
assert len(fw) == 3, fw
inside = [i for i, (a, b) in enumerate(fw)
          if all(a - 0.01 <= e["ts"] and e["ts"] + e["dur"] <= b + 0.01 for e in ops)]
assert inside == [1], (inside, fw, [(e["ts"], e["dur"]) for e in ops])
steps = {e["name"] for e in ev if e.get("name", "").startswith("ProfilerStep#")}
assert len(steps) >= 3, steps
PY
  # Capture off for step 1, on again for step 2: the operator callback is
  # paused in libtorch while nothing is captured (idle costs no
  # RecordFunction) and resumed by the next capture's first module, so
  # steps 0 and 2 have their 4 aten::linear each and step 1 none.
  env LD_PRELOAD="$B/libgradtrace.so" GRADTRACE_FILE="$E2E_TMP/tog$v.gtr" \
      GRADTRACE_LOG=1 GRADTRACE_OPS=1 PYTHONPATH="$ROOT/python" \
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
  LD_PRELOAD=$B/libgradtrace.so GRADTRACE_FILE=$E2E_TMP/cxx.gtr GRADTRACE_OPS=1 \
    "$B/progs/torch_layers" capi "$E2E_TMP/cxx.txt" 3 >/dev/null || die "torch_layers"
  "$B/gradtrace" convert --quiet -o cxx.pt.trace.json cxx.gtr || die "convert cxx"
  validate cxx.pt.trace.json
  n=$("$PY1" -c 'import json,sys; print(sum(e.get("cat") == "cpu_op" for e in json.load(open(sys.argv[1]))["traceEvents"]))' cxx.pt.trace.json)
  [ "$n" -gt 0 ] || die "no cpu_op in the C++ program's trace"
  echo "C++ program: $n cpu_op"
fi
echo ok
