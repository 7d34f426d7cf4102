#!/usr/bin/env bash
# `gradtrace report` on a torch.compile'd model (torch 2.x, aot_eager):
# the compiled graph's backward is one CompiledFunctionBackward node and
# aot_eager makes no compile-time map (only inductor does), so the layers
# inside it have no backward of their own; the report must say so (a
# `compiled` hint, issue 24 item 7), in the table and the JSON, and the
# same from the .gtr. The eager run of the same model has no such hint.
# (Inductor's attributed rows: t_torch2_compiled.sh.)
set -u
B=$ROOT/$BUILD
die() { echo "FAIL: $*" >&2; exit 1; }
[ -x "$B/gradtrace" ] || die "build/gradtrace missing"
PY2=${PYTHON2:-$HOME/.cache/gradtrace/torch2-venv/bin/python}
"$PY2" -c 'import torch; assert hasattr(torch, "compile")' 2>/dev/null \
  || { echo "skip: no torch 2.x at $PY2"; exit 77; }
cd "$E2E_TMP"
export GRADTRACE_SOCKET=$E2E_TMP/none/agent.sock GRADTRACE_CONTROL=$E2E_TMP/none/control.sock
W=$ROOT/tests/e2e/torch/wrapped.py

"$B/gradtrace" record --raw -o comp -- "$PY2" "$W" compile >/dev/null 2>comp.err \
  || die "compile run failed: $(tail -5 comp.err)"
"$B/gradtrace" report comp/*.json >comp.txt || die "report failed"
grep -q "^  \[compiled\] .*CompiledFunctionBackward.*no compile-time map (a backend other than inductor" comp.txt \
  || die "no compiled hint: $(sed -n '/^hints:/,$p' comp.txt)"
"$B/gradtrace" report --format json comp/*.gtr | python3 -c '
import json, sys
k = [h["kind"] for h in json.load(sys.stdin)["hints"]]
sys.exit(0 if "compiled" in k else "JSON hints: %s" % k)' || die "compiled hint not in the .gtr's JSON"

"$B/gradtrace" record -o eager -- "$PY2" "$W" ckpt >/dev/null 2>eager.err \
  || die "eager run failed: $(tail -5 eager.err)"
"$B/gradtrace" report eager/*.json >eager.txt || die "eager report failed"
grep -q "\[compiled\]" eager.txt && die "compiled hint on an eager run: $(grep compiled eager.txt)"
echo ok
