#!/usr/bin/env bash
# Chunks a killed daemon never wrote are counted (issue #13, item 2). The
# daemon acknowledges (GT_CTL_ACK) the chunks it has written to its files
# after each once-a-second flush; an agent whose connection ends counts
# the chunks it sent but never saw acknowledged as lost, reported in the
# next stream's GT_LOST_CHUNKS.
. "$(dirname "$0")/daemon_lib.sh"
need "$B/gradtraced" "$FAKE" "$B/progs/agent_threads" "$B/progs/agent_check"
[ -f "$B/libgradtrace.so" ] || skip "missing $B/libgradtrace.so"

echo "== the daemon acknowledges what it wrote"
start_daemon --raw
"$FAKE" --chunks 3 --records 100 --print-ctl --print-acks --hold-ms 2500 >"$E2E_TMP/ctl.txt" 2>/dev/null || die "agent failed"
cat "$E2E_TMP/ctl.txt"
grep -q "^ctl 6 chunks=3 seq=2" "$E2E_TMP/ctl.txt" || die "no ACK for the 3 chunks"
stop_daemon || die "daemon exit $?"
rm -rf "$OUT"

echo "== a daemon killed before acknowledging"
start_daemon --raw
GRADTRACE_LOG=1 LD_PRELOAD=$B/libgradtrace.so "$B/progs/agent_threads" 2 20000 --then-sleep 2500 \
  2>"$E2E_TMP/agent.err" & prog=$!
sleep 0.4
kill -9 "$DAEMON_PID"; wait "$DAEMON_PID" 2>/dev/null; DAEMON_PID=
sleep 0.3
start_daemon --raw
wait $prog || die "program failed"
stop_daemon || die "daemon exit $?"
grep "not acknowledged" "$E2E_TMP/agent.err" || die "unacknowledged chunks not counted: $(cat "$E2E_TMP/agent.err")"
unacked=$(sed -n 's/.*: \([0-9]*\) chunks sent but not acknowledged.*/\1/p' "$E2E_TMP/agent.err" | head -1)
raw=$(ls -t "$OUT"/agent_threads-pid$prog*.gtr | head -1)
"$B/progs/agent_check" "$raw" --expect 102=20000 | tee "$E2E_TMP/check.txt"
lost=$(sed -n 's/.* lost_chunks=\([0-9]*\).*/\1/p' "$E2E_TMP/check.txt")
echo "unacknowledged: $unacked chunks; the next stream reports $lost lost"
[ "$lost" -ge "$unacked" ] || die "next stream reports $lost lost chunks, fewer than the $unacked unacknowledged"
echo ok
