# Shared by t_capi_layers.sh and t_torch_layers.sh: runs a test program
# that declares its layer structure (tests/progs/capi_layers.c,
# torch_layers.cpp) under the agent with GRADTRACE_FILE, converts the
# recording and checks it with tests/e2e/layers/check.py.
B=${BUILD:-build}
GT=$B/gradtrace
AGENT=$PWD/$B/libgradtrace.so
CHECK="python3 $PWD/tests/e2e/layers/check.py"
VALIDATE="python3 $PWD/tests/tools/validate_trace.py"
T=${E2E_TMP:-$(mktemp -d)}
die() { echo "FAIL: $*"; exit 1; }

# layers_run PROG MODE NAME [VAR=VALUE...]: $T/NAME.gtr, $T/NAME.txt (the
# structure), $T/NAME*.json; stdout must stay empty.
layers_run() {
  local prog=$1 mode=$2 name=$3
  shift 3
  env -u GRADTRACE_LAYERS -u GRADTRACE_TRIGGER "$@" GRADTRACE_FILE="$T/$name.gtr" \
    LD_PRELOAD="$AGENT" "$prog" "$mode" "$T/$name.txt" >"$T/$name.out" 2>"$T/$name.err"
  local rc=$?
  [ $rc -eq 0 ] || { cat "$T/$name.err"; die "$name: $prog $mode exited $rc"; }
  [ -s "$T/$name.out" ] && die "$name: the program's stdout is not empty"
  "$GT" convert "$T/$name.gtr" -o "$T/$name.json" >"$T/$name.conv" 2>&1 \
    || { cat "$T/$name.conv"; die "$name: convert failed"; }
  return 0
}

# layers_report NAME STEPS: one report row per block, each with STEPS
# forward calls and backward nodes (--include-warmup: every step the
# program ran, a slow first one included).
layers_report() {
  "$GT" report --include-warmup --csv "$T/$1.gtr" >"$T/$1.csv" 2>"$T/$1.rerr" \
    || { cat "$T/$1.rerr"; die "$1: report failed"; }
  python3 - "$T/$1.csv" "$2" <<'P' || die "$1: report rows"
import csv, sys
rows = {r["layer"]: r for r in csv.DictReader(open(sys.argv[1]))}
steps = int(sys.argv[2])
err = []
for i in range(4):
    r = rows.get(f"blocks.{i}")
    if r is None:
        err.append(f"no row for blocks.{i}")
    elif int(r["fwd_calls"]) != steps or int(r["bwd_nodes"]) == 0:
        err.append(f"blocks.{i}: {r}")
if err:
    print("; ".join(err), "rows:", sorted(rows), file=sys.stderr)
    sys.exit(1)
print(f"report: {len(rows)} rows, blocks.0-3 with {steps} forward calls and backward nodes")
P
}
