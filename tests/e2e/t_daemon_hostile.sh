#!/usr/bin/env bash
# Untrusted input: hostile hellos and chunks, an agent killed mid-chunk and
# abusive control requests each cost only their own connection. A good
# agent streaming throughout is complete, the killed agent's partial trace
# validates, every bad stream is logged with its pid and reason, and no
# agent text escapes the output directory.
. "$(dirname "$0")/daemon_lib.sh"
need "$B/gradtraced" "$FAKE"
start_daemon --raw

# A connection that starts a hello and goes silent: closed after 10 s.
"$PY" -c '
import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(b"GTRA")
s.settimeout(30); t = time.time(); s.recv(1); print(round(time.time() - t))' \
  "$GRADTRACE_SOCKET" >"$E2E_TMP/silent" & silent=$!

# A good agent streams slowly across the whole attack (hold keeps it open).
"$FAKE" --chunks 30 --records 1000 --rank 0 --hold-ms 1500 --dump "$E2E_TMP/good.sent" \
  >/dev/null 2>"$E2E_TMP/good.err" & good=$!

declare -A want=(
  [bad-magic]="bad magic" [bad-version]="version" [bad-crc]="checksum"
  [huge-chunk]="out of bounds" [garbage]="bad magic")
for mode in "${!want[@]}"; do
  "$FAKE" --mode "$mode" --chunks 3 --records 100 2>>"$E2E_TMP/bad.err" & p=$!
  wait $p
  # Its close, not its hello: a worker finds the bad chunk after the
  # loop logged the connection.
  for _ in $(seq 1 250); do grep -q "pid $p.*clos" "$E2E_TMP/daemon.log" && break; sleep 0.02; done
  grep "agent pid $p: closing: bad stream" "$E2E_TMP/daemon.log" | grep -q "${want[$mode]}" \
    || die "$mode (pid $p): no 'bad stream: ${want[$mode]}' line in the log"
  echo "$mode: $(grep "agent pid $p: closing" "$E2E_TMP/daemon.log" | sed 's/.*closing: //')"
done

# Killed in the middle of a chunk.
"$FAKE" --mode mid-chunk --chunks 5 --records 1000 --rank 7 --dump "$E2E_TMP/killed.sent" \
  2>>"$E2E_TMP/bad.err" & killed=$!
wait $killed; rc=$?
[ $rc -eq 137 ] || die "mid-chunk agent should die by SIGKILL, exit $rc"

# Hostile command line: path tricks and control bytes in the hello.
"$FAKE" --cmd $'../../../../tmp/escape\x01 /..' --chunks 1 --records 10 2>>"$E2E_TMP/bad.err" & evil=$!
wait $evil

# Control bytes in agent text must neither forge log lines nor reach the
# terminal through `gradtrace status`.
"$FAKE" --cmd $'evil\nFORGED line\033[31m' --chunks 1 --records 10 2>>"$E2E_TMP/bad.err" & forger=$!
wait $forger
grep -q '^FORGED' "$E2E_TMP/daemon.log" && die "an agent forged a log line"
grep -q $'\033' "$E2E_TMP/daemon.log" && die "escape byte in the log"
if [ -x "$B/gradtrace" ]; then
  "$B/gradtrace" status >"$E2E_TMP/status.txt" || die "status failed"
  grep -q 'evil?FORGED line?\[31m' "$E2E_TMP/status.txt" || die "hostile command not shown sanitized"
  grep -q $'\033' "$E2E_TMP/status.txt" && die "escape byte reached the terminal"
fi

# Control abuse on one connection: each gets an error reply, then a valid
# request on the same connection still works.
replies=$(ctl 'not json' '{"cmd":"reboot"}' '{"cmd":"start","pids":"x"}' '[1,2]' \
              '{"cmd":"trigger","layer":"a b"}' '{"cmd":"status"}')
echo "$replies" | head -5 | grep -c '"ok":false' | grep -qx 5 || die "bad control requests not all refused: $replies"
echo "$replies" | tail -1 | grep -q '"ok":true' || die "status after bad requests failed"
# Oversized request: error reply, connection closed, daemon unharmed.
big=$("$PY" -c 'print("{\"cmd\":\"status\",\"x\":\"" + "a"*70000 + "\"}")')
ctl "$big" | grep -q 'larger than' || die "oversized request not refused"
# Raw garbage on the control socket.
head -c 5000 /dev/urandom | "$PY" -c '
import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(sys.stdin.buffer.read()); s.close()' "$GRADTRACE_CONTROL"

kill -0 "$DAEMON_PID" || die "daemon died"
wait $silent
secs=$(cat "$E2E_TMP/silent")
[ "$secs" -ge 9 ] && [ "$secs" -le 13 ] || die "silent connection closed after ${secs}s, want ~10"
grep -q "closed before a valid hello: closing: no hello within" "$E2E_TMP/daemon.log" || die "silent close not logged"
wait $good || die "good agent failed while others attacked: $(cat "$E2E_TMP/good.err")"
ctl_q '{"cmd":"status"}' 'r["totals"]["bad_streams"]' | grep -qx 5 || die "bad_streams count wrong (want the 5 hostile modes)"
stop_daemon || die "daemon exit status $?"

fgood=$(ls "$OUT"/fake_agent-rank0-pid$good*.json)
validate $fgood
n=$(count_fake_spans $fgood)
[ "$n" -eq 15000 ] || die "good agent incomplete: $n of 15000 spans"

fk=$(ls "$OUT"/fake_agent-rank7-pid$killed*.json 2>/dev/null)
[ -n "$fk" ] || die "no partial trace for the killed agent"
validate $fk
nk=$(count_fake_spans $fk)
echo "killed agent: $nk spans in its partial trace (5 whole chunks = 2500)"
[ "$nk" -eq 2500 ] || die "killed agent: want the 2500 spans of its whole chunks, got $nk"
"$PY" - "$fk" <<'PY' || die "partial trace does not say it was truncated"
import json, sys
d = json.load(open(sys.argv[1]))
meta = json.dumps({k: v for k, v in d.items() if k != "traceEvents"})
assert '"truncated": true' in meta or '"truncated":true' in meta, meta[:400]
PY
# The raw captures hold exactly the bytes sent, the half chunk included.
# The raw capture's name: the trace's stem (before .pt.trace.json or .json).
stem_of() { local b; b=$(basename "$1" .json); echo "${b%.pt.trace}"; }
cmp "$E2E_TMP/good.sent" "$OUT/$(stem_of "$fgood").gtr" || die "raw capture of the good agent differs"
cmp "$E2E_TMP/killed.sent" "$OUT/$(stem_of "$fk").gtr" || die "raw capture of the killed agent differs"

# Nothing outside the output directory; hostile name sanitized.
[ ! -e /tmp/escape ] || die "agent text escaped the output directory"
ls "$OUT" | grep -q '^escape_-pid' || die "sanitized name for the hostile command line missing: $(ls "$OUT")"
for f in "$OUT"/*; do
  case $(basename "$f") in .*) die "hidden file $f" ;; esac
done
echo ok
