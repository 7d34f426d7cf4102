#!/usr/bin/env bash
# A training process killed with SIGKILL (issue #13, item 3): its stream
# ends without the agent's goodbye, so its trace is marked truncated, with
# the time of the last record received, and holds what was streamed until
# the kill. A process that exits normally says goodbye: not truncated.
# The same holds offline: `gradtrace convert` of a killed process's .gtr
# (GRADTRACE_FILE) marks it truncated (issue 23, item 7).
. "$(dirname "$0")/daemon_lib.sh"
need "$B/gradtraced" "$B/gradtrace" "$B/progs/agent_threads" "$FAKE"
[ -f "$B/libgradtrace.so" ] || skip "missing $B/libgradtrace.so"
AGENT=$B/libgradtrace.so
wait_disc() {
  for _ in $(seq 1 200); do
    [ "$(grep -c ' disconnected: ' "$E2E_TMP/daemon.log")" -ge "$1" ] && return 0; sleep 0.05
  done
  die "daemon did not finish $1 streams"
}
# Prints "truncated goodbye last_ts_ns" of the stream's last file.
meta() {
  "$PY" -c '
import json, sys
g = json.load(open(sys.argv[1]))["gradtrace"]
print(str(g["stream"]["truncated"]).lower(), str(g["stream"]["goodbye"]).lower(), g["stream"]["last_ts_ns"])' "$1"
}
start_daemon

echo "== normal exit"
LD_PRELOAD=$AGENT "$B/progs/agent_threads" 2 2000 || die "program failed"
wait_disc 1
f=$(ls "$OUT"/agent_threads-pid*.json); validate $f
read -r tr gb ts < <(meta "$f")
[ "$tr" = false ] && [ "$gb" = true ] || die "normal exit: truncated=$tr goodbye=$gb"

echo "== SIGKILL"
LD_PRELOAD=$AGENT "$B/progs/agent_threads" 2 2000 --then-sleep 5000 & prog=$!
sleep 1
kill -9 $prog; wait $prog 2>/dev/null
wait_disc 2
k=$(ls "$OUT"/agent_threads-pid$prog*.json); validate $k
read -r tr gb ts < <(meta "$k")
echo "killed: truncated=$tr goodbye=$gb last_ts_ns=$ts"
[ "$tr" = true ] && [ "$gb" = false ] || die "killed process: truncated=$tr goodbye=$gb"
[ "$ts" -gt 0 ] || die "no time of the last record"
n=$("$PY" -c '
import json, sys
print(sum(1 for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X" and e["name"].startswith("t")))' "$k")
[ "$n" -eq 2000 ] || die "killed process: $n of the 2000 spans it streamed before the kill"
grep -q "truncated (no goodbye from the agent)" "$E2E_TMP/daemon.log" || die "not logged"

echo "== a stream cut without goodbye"
"$FAKE" --chunks 2 --records 10 --no-goodbye 2>/dev/null || die "fake agent failed"
wait_disc 3
read -r tr gb ts < <(meta "$(ls -t "$OUT"/fake_agent-pid*.json | head -1)")
[ "$tr" = true ] || die "no-goodbye stream not truncated"
stop_daemon || die "daemon exit $?"

echo "== offline: a killed process's .gtr"
GRADTRACE_FILE=$E2E_TMP/killed.gtr LD_PRELOAD=$AGENT "$B/progs/agent_threads" 2 2000 \
  --then-sleep 5000 & prog=$!
sleep 1
kill -9 $prog; wait $prog 2>/dev/null
"$B/gradtrace" convert "$E2E_TMP/killed.gtr" -o "$E2E_TMP/killed.json" 2>"$E2E_TMP/conv.err" \
  || die "convert failed: $(cat "$E2E_TMP/conv.err")"
validate "$E2E_TMP/killed.json"
read -r tr gb ts < <(meta "$E2E_TMP/killed.json")
echo "offline, killed: truncated=$tr goodbye=$gb; $(cat "$E2E_TMP/conv.err")"
[ "$tr" = true ] && [ "$gb" = false ] || die "offline, killed process: truncated=$tr goodbye=$gb"
grep -q "; truncated" "$E2E_TMP/conv.err" || die "the summary does not say truncated"
GRADTRACE_FILE=$E2E_TMP/whole.gtr LD_PRELOAD=$AGENT "$B/progs/agent_threads" 2 2000 \
  || die "program failed"
"$B/gradtrace" convert "$E2E_TMP/whole.gtr" -o "$E2E_TMP/whole.json" 2>/dev/null || die "convert failed"
read -r tr gb ts < <(meta "$E2E_TMP/whole.json")
[ "$tr" = false ] && [ "$gb" = true ] || die "offline, normal exit: truncated=$tr goodbye=$gb"
echo ok
