#!/usr/bin/env bash
# `gradtrace daemon` detaches only once its sockets answer (so the next
# command can use it at once), logs to gradtraced.log beside the sockets,
# writes traces under --output-dir, and leaves nothing running or bound
# after a shutdown request.
. "$(dirname "$0")/daemon_lib.sh"
need "$B/gradtrace" "$B/gradtraced" "$FAKE"
GT=$B/gradtrace
cd "$E2E_TMP"

"$GT" daemon --output-dir nest/ed/detached 2>"$E2E_TMP/start.err" || die "daemon start failed: $(cat "$E2E_TMP/start.err")"
pid=$(sed -n 's/.*running as pid \([0-9]*\).*/\1/p' "$E2E_TMP/start.err")
[ -n "$pid" ] || die "no pid reported: $(cat "$E2E_TMP/start.err")"
trap 'kill $pid 2>/dev/null; cat "$E2E_TMP/gradtraced.log" >&2 2>/dev/null' EXIT
# No sleep: detaching waited for the sockets.
"$GT" status >"$E2E_TMP/status" || die "status right after start failed"
grep -q "output   $E2E_TMP/nest/ed/detached" "$E2E_TMP/status" || die "output dir: $(cat "$E2E_TMP/status")"
[ "$(ps -o sid= -p "$pid" | tr -d ' ')" = "$pid" ] || die "daemon is not in its own session"

"$FAKE" --chunks 2 --records 100 2>/dev/null || die "agent failed"
"$GT" daemon --output-dir other 2>"$E2E_TMP/second.err" && die "a second daemon started"
grep -q "another gradtraced is running" "$E2E_TMP/second.err" || die "second: $(cat "$E2E_TMP/second.err")"

ctl '{"cmd":"shutdown"}' | grep -q '"ok":true' || die "shutdown refused"
for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
kill -0 "$pid" 2>/dev/null && die "daemon still running after shutdown"
[ ! -e "$GRADTRACE_SOCKET" ] && [ ! -e "$GRADTRACE_CONTROL" ] || die "sockets left behind"
grep -q "shutdown requested" "$E2E_TMP/gradtraced.log" || die "log file not written"
ls nest/ed/detached/fake_agent-pid*.json >/dev/null || die "no trace in the output dir"
validate nest/ed/detached/fake_agent-pid*.json

# `gradtrace daemon --stop` shuts a daemon down and returns once it is gone.
"$GT" daemon --output-dir stopped 2>"$E2E_TMP/start2.err" || die "restart failed: $(cat "$E2E_TMP/start2.err")"
pid=$(sed -n 's/.*running as pid \([0-9]*\).*/\1/p' "$E2E_TMP/start2.err")
"$FAKE" --chunks 2 --records 100 2>/dev/null || die "agent failed"
"$GT" daemon --stop 2>"$E2E_TMP/stop.err" || die "--stop failed: $(cat "$E2E_TMP/stop.err")"
grep -q "daemon $pid stopped" "$E2E_TMP/stop.err" || die "stop: $(cat "$E2E_TMP/stop.err")"
kill -0 "$pid" 2>/dev/null && die "daemon still running after --stop returned"
validate stopped/fake_agent-pid*.json
"$GT" daemon --stop 2>"$E2E_TMP/stop2.err" && die "--stop without a daemon succeeded"
grep -q "no daemon" "$E2E_TMP/stop2.err" || die "stop2: $(cat "$E2E_TMP/stop2.err")"
trap - EXIT
echo ok
