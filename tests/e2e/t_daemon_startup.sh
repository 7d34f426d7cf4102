#!/usr/bin/env bash
# Start-up never reads finished traces (issue 23, item 8): a daemon killed
# mid-stream leaves an unfinished file, which the next start repairs, but
# the finished traces beside it, a planted FIFO and a planted 1 GiB sparse
# file that starts like a trace are never opened (strace): only the index
# of unfinished files (<out>/.gradtrace-unfinished) is read. Before, every
# *.json of the output directory was opened and scanned to its end.
. "$(dirname "$0")/daemon_lib.sh"
need "$B/gradtraced" "$FAKE"
command -v strace >/dev/null || { [ -n "${CI:-}" ] && die "CI needs strace"; skip "no strace"; }

start_daemon
"$FAKE" --chunks 3 --records 500 2>/dev/null || die "agent failed"
"$FAKE" --chunks 3 --records 500 --rank 2 2>/dev/null || die "agent failed"
stop_daemon || die "daemon exit $?"
finished=$(ls "$OUT"/*.json)
[ "$(echo "$finished" | wc -l)" -eq 2 ] || die "expected 2 finished traces: $finished"

start_daemon
"$FAKE" --chunks 5 --records 1000 --hold-ms 4000 2>/dev/null & agent=$!
sleep 2
kill -9 "$DAEMON_PID"; wait "$DAEMON_PID" 2>/dev/null; DAEMON_PID=
wait $agent
cut=$(ls "$OUT"/fake_agent-pid$agent.*json 2>/dev/null | head -1)
[ -n "$cut" ] || die "the killed daemon left no file"

mkfifo "$OUT/planted.pt.trace.json"
printf '{"traceEvents":[' >"$OUT/big.pt.trace.json"
truncate -s 1G "$OUT/big.pt.trace.json"

strace -f -qq -e trace=open,openat -o "$E2E_TMP/strace.txt" \
  "$B/gradtraced" --foreground --output-dir "$OUT" 2>>"$E2E_TMP/daemon.log" &
DAEMON_PID=$!
for _ in $(seq 1 400); do
  ctl '{"cmd":"status"}' >/dev/null 2>&1 && break
  kill -0 "$DAEMON_PID" 2>/dev/null || die "daemon exited at start: $(tail -3 "$E2E_TMP/daemon.log")"
  sleep 0.05
done
stop_daemon || die "daemon exit $?"
grep -q "repaired .*$(basename "$cut")" "$E2E_TMP/daemon.log" || die "the cut file was not repaired: $(tail -3 "$E2E_TMP/daemon.log")"
validate "$cut"
opened=0
for f in $finished "$OUT/planted.pt.trace.json" "$OUT/big.pt.trace.json"; do
  if grep -F "\"$f\"" "$E2E_TMP/strace.txt" | grep -q open; then
    echo "opened at start: $f"; opened=$((opened + 1))
  fi
done
[ "$opened" -eq 0 ] || die "$opened files opened at start that are not unfinished"
[ -z "$(ls -A "$OUT/.gradtrace-unfinished" 2>/dev/null)" ] || die "index not emptied: $(ls "$OUT/.gradtrace-unfinished")"
echo "start-up opened none of $(echo "$finished" | wc -l) finished traces, a FIFO and a 1 GiB file; repaired $(basename "$cut")"
echo ok
