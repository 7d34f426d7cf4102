#!/usr/bin/env bash
# Daemon + several agents streaming at once: every process is complete in
# its own trace, the traces validate, status accounts for all of them, and
# shutdown leaves no socket behind. Real preloaded programs join when the
# agent library and tests/progs/agent_* exist.
. "$(dirname "$0")/daemon_lib.sh"
need "$B/gradtraced" "$FAKE"
start_daemon

# Two fake agents at once, different sizes, one with a rank.
# They stay connected a while after sending so status can see both live.
"$FAKE" --chunks 40 --records 2000 --hold-ms 1500 >"$E2E_TMP/a1.out" 2>"$E2E_TMP/a1.err" & p1=$!
"$FAKE" --chunks 25 --records 1000 --rank 3 --hold-ms 1500 >"$E2E_TMP/a2.out" 2>"$E2E_TMP/a2.err" & p2=$!
live=0
for _ in $(seq 1 50); do
  live=$(ctl_q '{"cmd":"status"}' 'len(r["agents"])')
  [ "$live" -ge 2 ] && break
  sleep 0.02
done
wait $p1 || die "agent 1 failed: $(cat "$E2E_TMP/a1.err")"
wait $p2 || die "agent 2 failed: $(cat "$E2E_TMP/a2.err")"
echo "agents live during streaming: $live"
[ "$live" -eq 2 ] || die "status showed $live live agents while two were connected"
grep -qx 'ctl 1 gradtraced .*' "$E2E_TMP/a1.out" || die "agent 1 got no welcome"

# Real preloaded programs, once the agent core has landed: two
# agent_threads processes (T threads x E events each) streaming at once.
real=0
if [ -f "$B/libgradtrace.so" ] && [ -x "$B/progs/agent_threads" ]; then
  real=1
  LD_PRELOAD=$B/libgradtrace.so "$B/progs/agent_threads" 4 20000 >"$E2E_TMP/r1.out" 2>"$E2E_TMP/r1.err" & r1=$!
  LD_PRELOAD=$B/libgradtrace.so "$B/progs/agent_threads" 2 10000 >"$E2E_TMP/r2.out" 2>"$E2E_TMP/r2.err" & r2=$!
  wait $r1 || die "agent_threads 4 20000 failed: $(cat "$E2E_TMP/r1.err")"
  wait $r2 || die "agent_threads 2 10000 failed: $(cat "$E2E_TMP/r2.err")"
  [ ! -s "$E2E_TMP/r1.out" ] || die "the agent printed on the program's stdout"
  # A real agent killed mid-stream: its partial trace must still be valid
  # and the daemon must keep serving.
  LD_PRELOAD=$B/libgradtrace.so "$B/progs/agent_threads" 1 50000000 >/dev/null 2>&1 & victim=$!
  sleep 0.2
  kill -9 $victim; wait $victim 2>/dev/null
  "$FAKE" --chunks 2 --records 100 2>/dev/null || die "daemon stopped serving after the kill"
fi

stop_daemon || die "daemon exit status $?"
[ ! -e "$GRADTRACE_SOCKET" ] || die "agent socket left behind"
[ ! -e "$GRADTRACE_CONTROL" ] || die "control socket left behind"

f1=$(ls "$OUT"/fake_agent-pid$p1*.json 2>/dev/null)
f2=$(ls "$OUT"/fake_agent-rank3-pid$p2*.json 2>/dev/null)
[ -n "$f1" ] || die "no trace for agent 1 (pid $p1): $(ls "$OUT")"
[ -n "$f2" ] || die "no trace for agent 2 (pid $p2): $(ls "$OUT")"
validate $f1 $f2
n1=$(count_fake_spans $f1); n2=$(count_fake_spans $f2)
echo "spans: agent1 $n1 (want 40000), agent2 $n2 (want 12500)"
[ "$n1" -eq 40000 ] || die "agent 1 trace incomplete: $n1 spans"
[ "$n2" -eq 12500 ] || die "agent 2 trace incomplete: $n2 spans"

if [ $real -eq 1 ]; then
  for spec in "$r1:40000" "$r2:10000"; do
    pid=${spec%%:*} want=${spec##*:}
    fs=$(ls "$OUT"/agent_threads-pid$pid*.json 2>/dev/null)
    [ -n "$fs" ] || die "no trace for real agent pid $pid: $(ls "$OUT")"
    validate $fs
    n=$("$PY" - $fs <<'PY'
import json, re, sys
n = 0
for p in sys.argv[1:]:
    for e in json.load(open(p))["traceEvents"]:
        if e.get("ph") == "X" and re.fullmatch(r"t\d+\.s\d+", str(e.get("name"))):
            n += 1
print(n)
PY
)
    echo "real agent pid $pid: $n spans (want $want)"
    [ "$n" -eq "$want" ] || die "real agent pid $pid incomplete: $n of $want spans"
  done
  fv=$(ls "$OUT"/agent_threads-pid$victim*.json 2>/dev/null)
  [ -n "$fv" ] || die "no partial trace for the killed agent (pid $victim)"
  validate $fv
  echo "killed real agent: partial trace valid ($(du -ck $fv | tail -1 | cut -f1) KB)"
else
  echo "note: agent library or agent_threads missing; fake agents only"
fi
grep -q "pid $p1 .*disconnected" "$E2E_TMP/daemon.log" || die "no disconnect logged for $p1"
echo "ok"
