#!/usr/bin/env bash
# A daemon killed with SIGKILL (issue #13, item 1):
#  1. what reached it more than a second before the kill is in its trace:
#     the restarted daemon finishes the file (valid, repaired, truncated);
#  2. a kill loop (GT_KILLS kills, default 100; `make soak` runs 1000):
#     the daemon is killed at random moments while agents stream, then
#     restarted; afterwards every trace file in the directory is valid;
#  3. across that loop, a real agent (agent_paced: known per-thread counts)
#     streams all along, and per thread exactly
#       instants in all its files + lost events + undelivered = produced
#     (the daemon acknowledges only what is in its files up to an ACK
#     mark, a repair cuts back to the last mark, the agent counts the
#     records of unacknowledged chunks per thread: GT_LOST_UNDELIVERED).
# `gradtrace convert --repair` does the same on files given to it.
. "$(dirname "$0")/daemon_lib.sh"
need "$B/gradtraced" "$B/gradtrace" "$FAKE" "$B/progs/agent_paced"
[ -f "$B/libgradtrace.so" ] || skip "missing $B/libgradtrace.so"
KILLS=${GT_KILLS:-100}
kill_daemon() { kill -9 "$DAEMON_PID"; wait "$DAEMON_PID" 2>/dev/null; DAEMON_PID=; }

echo "== what reached the daemon survives its kill"
start_daemon
"$FAKE" --chunks 5 --records 1000 --hold-ms 4000 2>/dev/null & agent=$!
sleep 2
kill_daemon
wait $agent
f=$(ls "$OUT"/fake_agent-pid$agent.json "$OUT"/fake_agent-pid$agent.pt.trace.json 2>/dev/null | head -1)
[ -n "$f" ] || die "no file"
echo "left by the killed daemon: $(stat -c %s "$f") bytes"
start_daemon
grep -q "repaired $f" "$E2E_TMP/daemon.log" || die "not repaired at start: $(tail -3 "$E2E_TMP/daemon.log")"
stop_daemon || die "daemon exit $?"
validate "$f"
n=$(count_fake_spans "$f")
[ "$n" -eq 2500 ] || die "repaired trace holds $n of the 2500 spans received 2 s before the kill"
"$PY" -c '
import json, sys
g = json.load(open(sys.argv[1]))["gradtrace"]
assert g["repaired"] is True and g["stream"]["truncated"] is True, g' "$f" || die "not marked"

echo "== gradtrace convert --repair"
"$B/gradtrace" convert --repair "$f" 2>"$E2E_TMP/rep.err" || die "repair of a whole file failed"
grep -q "is whole" "$E2E_TMP/rep.err" || die "$(cat "$E2E_TMP/rep.err")"
head -c 3000 "$f" >"$E2E_TMP/cut.json"
"$B/gradtrace" convert --repair "$E2E_TMP/cut.json" 2>"$E2E_TMP/rep.err" || die "repair failed: $(cat "$E2E_TMP/rep.err")"
validate "$E2E_TMP/cut.json"
printf 'not a trace' >"$E2E_TMP/other.json"
"$B/gradtrace" convert --repair "$E2E_TMP/other.json" 2>/dev/null && die "repaired a foreign file"
[ "$(cat "$E2E_TMP/other.json")" = "not a trace" ] || die "a foreign file was changed"

echo "== $KILLS kills"
rm -rf "$OUT"
t0=$(date +%s)
start_daemon
GRADTRACE_LOG=1 LD_PRELOAD=$B/libgradtrace.so "$B/progs/agent_paced" 4 3600000 \
  >"$E2E_TMP/paced.txt" 2>"$E2E_TMP/paced.err" & paced=$!
for i in $(seq 1 "$KILLS"); do
  "$FAKE" --chunks 40 --records 200 --hold-ms 200 >/dev/null 2>&1 & f1=$!
  "$FAKE" --chunks 3 --records 2000 --rank 1 >/dev/null 2>&1 & f2=$!
  # Mostly before the daemon's first ACK (1 s), every 20th after some.
  if [ $((i % 20)) -eq 0 ]; then sleep "1.$((RANDOM % 5))"; else sleep "0.0$((RANDOM % 9 + 1))"; fi
  kill_daemon
  wait $f1 $f2 2>/dev/null
  start_daemon
done
sleep 0.5
kill -USR1 $paced
wait $paced || die "agent_paced failed: $(tail -3 "$E2E_TMP/paced.err")"
stop_daemon || die "daemon exit $?"
files=$(ls "$OUT"/*.json | wc -l)
repaired=$(grep -c "repaired " "$E2E_TMP/daemon.log")
empty=$(find "$OUT" -name '*.json' -size 0 | wc -l)
echo "$KILLS kills in $(( $(date +%s) - t0 )) s: $files files, $repaired repaired at restarts, $empty empty"
[ "$empty" -eq 0 ] || die "$empty empty files left"
"$PY" "$VALIDATOR" --quiet "$OUT"/*.json 2>"$E2E_TMP/invalid.txt" || {
  head -5 "$E2E_TMP/invalid.txt" >&2; die "$(wc -l <"$E2E_TMP/invalid.txt") invalid files of $files after $KILLS kills"; }

echo "== per thread, recorded + lost = produced over the $KILLS kills"
"$PY" "$ROOT/tests/tools/paced_check.py" "$E2E_TMP/paced.txt" "$OUT"/agent_paced-pid$paced*.json \
  || die "records neither in the trace nor counted lost"
echo ok
