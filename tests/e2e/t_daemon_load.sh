#!/usr/bin/env bash
# Load and a stopped daemon (issue #13, CI list):
#  1. 64 agents at once: every one complete, every file valid;
#  2. SIGSTOP: a daemon stopped while a real program streams never holds
#     the program up (the agent drops and counts what cannot be sent);
#     after SIGCONT the daemon serves again and its files are valid.
. "$(dirname "$0")/daemon_lib.sh"
need "$B/gradtraced" "$FAKE" "$B/progs/agent_threads"
[ -f "$B/libgradtrace.so" ] || skip "missing $B/libgradtrace.so"
start_daemon

echo "== 64 agents at once"
pids=()
for i in $(seq 0 63); do
  "$FAKE" --chunks 5 --records 1000 --rank "$i" 2>/dev/null & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || die "agent $p failed"; done
for _ in $(seq 1 200); do
  [ "$(grep -c ' disconnected: ' "$E2E_TMP/daemon.log")" -ge 64 ] && break; sleep 0.05
done
n=$(ls "$OUT"/fake_agent-rank*-pid*.json | wc -l)
[ "$n" -eq 64 ] || die "$n files for 64 agents"
validate "$OUT"/fake_agent-rank*-pid*.json >/dev/null
bad=0
for f in "$OUT"/fake_agent-rank*-pid*.json; do
  [ "$(count_fake_spans "$f")" -eq 2500 ] || bad=$((bad + 1))
done
[ $bad -eq 0 ] || die "$bad of 64 agents incomplete"
echo "64 agents: 64 complete, valid traces"

echo "== SIGSTOP"
kill -STOP "$DAEMON_PID"
t0=$(date +%s%N)
GRADTRACE_LOG=1 LD_PRELOAD=$B/libgradtrace.so "$B/progs/agent_threads" 2 400000 2>"$E2E_TMP/agent.err" \
  || die "program failed"
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
echo "program ran ${ms} ms against a stopped daemon"
[ $ms -lt 12000 ] || die "the agent held the program up for ${ms} ms"
kill -CONT "$DAEMON_PID"
ctl_q '{"cmd":"status"}' 'r["ok"]' | grep -qx True || die "daemon not serving after SIGCONT"
"$FAKE" --chunks 1 --records 10 --rank 99 2>/dev/null || die "agent after SIGCONT failed"
stop_daemon || die "daemon exit $?"
validate "$OUT"/*.json >/dev/null
grep -E "lost|not reading" "$E2E_TMP/agent.err" | tail -2
echo ok
