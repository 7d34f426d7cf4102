#!/usr/bin/env bash
# Backward errors (C++ exceptions) unwind through the interposed libtorch
# functions: the program gets torch's own errors unchanged and keeps
# running, and the trace stays balanced (every backward node and pass that
# began also ended, recorded by the hooks' unwind cleanups). A forward that
# raises inside nested modules leaves no module scope open and no stale
# layer for the next forward.
set -u
. "$(dirname "$0")/torch/lib.sh"
PY=${PYTHON:-/usr/bin/python3}
torch_require "$PY"
out=$(env LD_PRELOAD="$AGENT" GRADTRACE_FILE="$E2E_TMP/exc.gtr" GRADTRACE_CAPTURE=1 \
        PYTHONPATH="$ROOT/python" "$PY" "$TORCH_DIR/exceptions.py") || { echo "program failed"; exit 1; }
echo "$out"
[ "$(echo "$out" | grep -c '^caught boom in backward')" = 3 ] || exit 1
echo "$out" | grep -q '^caught2 Trying to backward through' || exit 1
echo "$out" | grep -q '^ok ' || exit 1
echo "$out" | grep -q '^caught3' || exit 1
echo "$out" | grep -q '^ok2' || exit 1
TORCH_DIR=$TORCH_DIR "$PY" - "$E2E_TMP/exc.gtr" <<'PY'
import os, sys
sys.path.insert(0, os.environ["TORCH_DIR"])
import gtr
t = gtr.Trace(sys.argv[1])
b, e = len(t.of(gtr.T_BWD_BEGIN)), len(t.of(gtr.T_BWD_END))
pb, pe = len(t.of(gtr.T_PASS_BEGIN)), len(t.of(gtr.T_PASS_END))
names = [n["name"] for n in t.backward_nodes()]
print("node begins", b, "ends", e, "passes", pb, pe)
assert b == e == len(names) and b > 0
assert pb == pe == 8, (pb, pe)
assert names.count("BadBackward") == 3, names
# Module scopes balance per thread although one forward raised, and the
# nodes of the forward after it belong to the right layers.
begins = len([x for x in t.of(gtr.T_SCOPE_BEGIN) if x["kind"] == 1])
ends = len([x for x in t.of(gtr.T_SCOPE_END) if x["kind"] == 1])
assert begins == ends == 9, (begins, ends)  # 4 + 5 calls
layers = [t.s(x["layer"]) for x in t.of(gtr.T_NODE_CREATED)]
print("last forward's layers", layers[-5:])
assert layers[-5:] == ["0", "0", "1.0.lin", "1.0.lin", ""], layers[-5:]
PY
