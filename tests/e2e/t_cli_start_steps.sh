#!/usr/bin/env bash
# What a capture started from outside, or by the job itself, records
# (issue 24, items 2 and 4), checked in the trace, not in the messages:
#  - `gradtrace start --iterations 3` captures exactly three whole
#    iterations (ProfilerStep#K..#K+2), from the next iteration boundary,
#    then stops by itself: on a torch job that steps an optimizer, one
#    without optimizer (iterations are backward passes), and a C API
#    program (tests/progs/capi_layers.c);
#  - `gradtrace start` / `stop`, `start --duration-ms` and the job's own
#    gradtrace.capture_start() give a first iteration as whole as the
#    others: the same backward nodes, as many of them with a layer.
# On torch 1.13 and, when its venv exists, torch 2.x.
. "$(dirname "$0")/daemon_lib.sh"
need "$B/gradtrace" "$B/gradtraced" "$B/libgradtrace.so" "$B/progs/capi_layers"
PY=${PYTHON:-/usr/bin/python3}
. "$ROOT/tests/e2e/torch/lib.sh"
torch_require "$PY"
VENV=${GRADTRACE_TORCH2_VENV:-$HOME/.cache/gradtrace/torch2-venv}
pys=("$PY")
[ -x "$VENV/bin/python" ] && pys+=("$VENV/bin/python")
GT=$B/gradtrace
CHECK="$PY $ROOT/tests/e2e/torch/check_steps.py"
start_daemon
n=0

# wait_step NAME K: until the job NAME printed "step K".
wait_step() {
  for _ in $(seq 1 600); do
    grep -q "^step $2\$" "$E2E_TMP/$1.out" 2>/dev/null && return 0
    kill -0 "$job" 2>/dev/null || die "$1 ended early: $(tail -5 "$E2E_TMP/$1.err")"
    sleep 0.05
  done
  die "$1: no step $2: $(tail -5 "$E2E_TMP/$1.err")"
}

# job PY MODE NAME: starts tests/e2e/torch/ctl_job.py under the agent
# (capture off); sets $job.
job() {
  local py=$1 mode=$2 name=$3
  env LD_PRELOAD="$B/libgradtrace.so" PYTHONPATH="$ROOT/python" GRADTRACE_CAPTURE=0 \
    "$py" -u "$ROOT/tests/e2e/torch/ctl_job.py" "$mode" "$E2E_TMP/$name.stop" \
    >"$E2E_TMP/$name.out" 2>"$E2E_TMP/$name.err" &
  job=$!
}

# finish NAME: the job ends; the daemon finishes its trace; sets $f to it.
finish() {
  touch "$E2E_TMP/$1.stop"
  wait "$job" || die "$1: job exit $?: $(tail -5 "$E2E_TMP/$1.err")"
  for _ in $(seq 1 200); do
    [ "$(ctl_q '{"cmd":"status"}' "[a['pid'] for a in r['finished'] if a['pid'] == $job]")" = "[$job]" ] && break
    sleep 0.05
  done
  f=$(ls "$OUT"/*-pid"$job".pt.trace.json 2>/dev/null | head -1)
  [ -f "$f" ] || die "$1: no trace for pid $job: $(ls "$OUT")"
}

for py in "${pys[@]}"; do
  n=$((n + 1))
  echo "== $py"
  for mode in steps passes; do
    name=it$n$mode
    job "$py" $mode $name
    wait_step $name 5
    "$GT" start --pid "$job" --iterations 3 >/dev/null || die "$name: start"
    wait_step $name 30
    finish $name
    $CHECK "$f" 3 || die "$name: --iterations 3 ($mode, $py)"
  done

  name=plain$n
  job "$py" steps $name
  wait_step $name 5
  "$GT" start --pid "$job" >/dev/null || die "$name: start"
  wait_step $name 15
  "$GT" stop --pid "$job" >/dev/null || die "$name: stop"
  finish $name
  $CHECK "$f" || die "$name: start/stop: first iteration ($py)"

  name=ms$n
  job "$py" steps $name
  wait_step $name 5
  "$GT" start --pid "$job" --duration-ms 400 >/dev/null || die "$name: start"
  wait_step $name 60
  finish $name
  $CHECK "$f" || die "$name: --duration-ms: first iteration ($py)"

  name=api$n
  job "$py" api $name
  wait_step $name 12
  finish $name
  $CHECK "$f" 4 || die "$name: capture_start(): first iteration ($py)"
done

# A C API program: steps are gt_step, nodes the program's own.
env LD_PRELOAD="$B/libgradtrace.so" GRADTRACE_CAPTURE=0 \
  "$B/progs/capi_layers" capi "$E2E_TMP/capi.txt" 600 10 &
job=$!
for _ in $(seq 1 200); do
  [ "$(ctl_q '{"cmd":"status"}' "[a['pid'] for a in r['agents'] if a['pid'] == $job]")" = "[$job]" ] && break
  sleep 0.05
done
sleep 0.3
"$GT" start --pid "$job" --iterations 3 >/dev/null || die "capi: start"
wait "$job" || die "capi_layers exit $?"
for _ in $(seq 1 200); do
  [ "$(ctl_q '{"cmd":"status"}' "[a['pid'] for a in r['finished'] if a['pid'] == $job]")" = "[$job]" ] && break
  sleep 0.05
done
f=$(ls "$OUT"/*-pid"$job".pt.trace.json 2>/dev/null | head -1)
[ -f "$f" ] || die "capi: no trace: $(ls "$OUT")"
$CHECK "$f" 3 || die "capi: --iterations 3"
validate "$OUT"/*.json
stop_daemon || die "daemon exit $?"
echo ok
