#!/usr/bin/env bash
# Capture windows across ranks: two torch.distributed processes (gloo,
# CPU, env:// rendezvous on 127.0.0.1 and a free port) under a daemon,
# with `gradtrace trigger layer=blocks.17,...,ranks=0,1` armed first. Each
# rank leaves one window file for the same iteration (metadata rank and
# iteration), with clocks aligned (baseTimeNanoseconds within a second);
set -u
. "$(dirname "$0")/trigger/lib.sh"
trig_require
. "$(dirname "$0")/daemon_lib.sh"
PY=${PYTHON:-/usr/bin/python3}
GT=$B/gradtrace
"$PY" -c "import torch.distributed as d; assert d.is_gloo_available()" 2>/dev/null \
  || { echo "skip: torch without gloo"; exit 77; }

start_daemon
"$GT" trigger layer=blocks.17,phase=backward,iteration=2,ranks=0,1 >"$E2E_TMP/t" || die "arming"
grep -q "ranks=0,1" "$E2E_TMP/t" || die "trigger reply: $(cat "$E2E_TMP/t")"
port=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# Debian's torch.distributed.run fails before starting workers on this
# Python (elastic agent: "'NoneType' object has no attribute 'get'" on
# redirects), so the two ranks are started here with the environment it
# gives its workers (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR/PORT).
pids=
for r in 0 1; do
  env LD_PRELOAD="$AGENT" GRADTRACE_CAPTURE=0 PYTHONPATH="$ROOT/python" \
      RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      OMP_NUM_THREADS=1 "$PY" "$MODEL" --iters 4 --dist \
      >"$E2E_TMP/rank$r.stdout" 2>"$E2E_TMP/rank$r.stderr" &
  pids="$pids $!"
done
for p in $pids; do
  wait $p || { cat "$E2E_TMP"/rank*.stderr >&2; die "distributed training failed"; }
done
cat "$E2E_TMP"/rank*.stdout | grep -q . && die "output on the program's stdout"
for _ in $(seq 1 100); do
  [ "$(ctl_q '{"cmd":"status"}' 'len(r["agents"])')" = 0 ] && break; sleep 0.05
done
ls -la "$OUT"
files=$(ls "$OUT"/*-w*.json 2>/dev/null)
[ "$(echo "$files" | grep -c .)" = 2 ] || die "want two window files, got: $files"
echo "$files" | grep -Eq -- "-rank0-.*-w1-blocks.17-backward-it2(\.pt\.trace)?\.json" || die "rank 0 file name: $files"
echo "$files" | grep -Eq -- "-rank1-.*-w1-blocks.17-backward-it2(\.pt\.trace)?\.json" || die "rank 1 file name: $files"
$CHECK ranks --ranks 0,1 $files || die "per-rank windows"
for f in $files; do
  $CHECK backward --layer blocks.17 --iteration 2 "$f" || die "window of $f"
done
$VALIDATE $files || die "window traces invalid"
# Only the window files: nothing recorded outside them, in any process.
[ "$(ls "$OUT" | wc -l)" = 2 ] || die "other files in the output dir: $(ls "$OUT")"
stop_daemon || die "daemon exit $?"
echo ok
