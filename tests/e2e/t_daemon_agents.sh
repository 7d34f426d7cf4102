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

# Real agent programs, when the agent core has landed.
real=()
if [ -f "$B/libgradtrace.so" ]; then
  for prog in "$B"/progs/agent_*; do
    [ -x "$prog" ] || continue
    case $(basename "$prog") in *crash*|*fork*|*threads*) continue ;; esac
    real+=("$prog")
    [ ${#real[@]} -ge 2 ] && break
  done
  pids=()
  for prog in "${real[@]}"; do
    LD_PRELOAD=$B/libgradtrace.so "$prog" >/dev/null 2>"$E2E_TMP/real.err" & pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || die "real agent program failed"; done
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

if [ ${#real[@]} -gt 0 ]; then
  for prog in "${real[@]}"; do
    name=$(basename "$prog")
    f=$(ls "$OUT"/"$name"-*.json 2>/dev/null | head -n 1)
    [ -n "$f" ] || die "no trace for real program $name"
    validate "$OUT"/"$name"-*.json
    echo "real agent $name: $(ls "$OUT"/"$name"-*.json | wc -l) file(s)"
  done
else
  echo "note: no agent library or agent_* programs yet; fake agents only"
fi
grep -q "pid $p1 .*disconnected" "$E2E_TMP/daemon.log" || die "no disconnect logged for $p1"
echo "ok"
