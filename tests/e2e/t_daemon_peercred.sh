#!/usr/bin/env bash
# Only the daemon's user gets in. The socket directory (0700) already stops
# other users at connect(); to prove the SO_PEERCRED check on its own, the
# test opens the directory and sockets to everyone for a moment and shows
# that another uid's agent and control connections are still refused.
# Also: unsafe socket directories, a second daemon, and stale sockets.
. "$(dirname "$0")/daemon_lib.sh"
need "$B/gradtraced" "$FAKE"
[ "$(id -u)" -eq 0 ] || skip "needs root to run a client as another uid"
command -v setpriv >/dev/null || skip "setpriv not installed"
NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)
"${NOBODY[@]}" test -x "$FAKE" || skip "$FAKE not executable by uid 65534"

start_daemon
[ "$(stat -c %a "$E2E_TMP")" = 700 ] || die "socket dir not 0700"
[ "$(stat -c %a "$GRADTRACE_SOCKET")" = 600 ] || die "agent socket mode $(stat -c %a "$GRADTRACE_SOCKET")"
[ "$(stat -c %a "$GRADTRACE_CONTROL")" = 600 ] || die "control socket mode"

# 1. Directory permissions stop another user before the daemon sees it.
if "${NOBODY[@]}" "$FAKE" --socket "$GRADTRACE_SOCKET" --chunks 1 2>"$E2E_TMP/nobody1.err"; then
  die "uid 65534 connected through a 0700 directory"
fi
grep -q "Permission denied" "$E2E_TMP/nobody1.err" || die "unexpected error: $(cat "$E2E_TMP/nobody1.err")"

# 2. With the directory and sockets opened up, SO_PEERCRED refuses.
chmod 711 "$E2E_TMP"; chmod 666 "$GRADTRACE_SOCKET" "$GRADTRACE_CONTROL"
"${NOBODY[@]}" "$FAKE" --socket "$GRADTRACE_SOCKET" --chunks 2 --records 10 2>"$E2E_TMP/nobody2.err"
"${NOBODY[@]}" /usr/bin/python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX); s.settimeout(5); s.connect(sys.argv[1])
try:
    s.sendall(b"{\"cmd\":\"status\"}\n")
    got = s.recv(100)
except (BrokenPipeError, ConnectionResetError):
    got = b""
sys.exit(1 if got else 0)' "$GRADTRACE_CONTROL" || die "control reply given to uid 65534"
chmod 700 "$E2E_TMP"; chmod 600 "$GRADTRACE_SOCKET" "$GRADTRACE_CONTROL"
grep -q "refused agent connection: peer uid 65534" "$E2E_TMP/daemon.log" || die "agent refusal not logged"
grep -q "refused control connection: peer uid 65534" "$E2E_TMP/daemon.log" || die "control refusal not logged"
[ "$(ctl_q '{"cmd":"status"}' 'r["totals"]["refused"]')" -ge 2 ] || die "refusals not counted"
ls "$OUT" | grep -q . && die "a refused agent produced a file: $(ls "$OUT")"

# 3. The daemon's own user still works.
"$FAKE" --chunks 1 --records 10 2>/dev/null || die "own agent refused"

# 4. A second daemon on the same sockets refuses to start.
if "$B/gradtraced" --foreground --output-dir "$OUT" 2>"$E2E_TMP/second.err"; then
  die "second daemon started"
fi
grep -q "another gradtraced is running" "$E2E_TMP/second.err" || die "second daemon: $(cat "$E2E_TMP/second.err")"

# 5. Stale sockets from a killed daemon are removed on the next start.
kill -9 "$DAEMON_PID"; wait "$DAEMON_PID" 2>/dev/null; DAEMON_PID=
[ -S "$GRADTRACE_SOCKET" ] || die "expected a stale socket after kill -9"
start_daemon
grep -q "removing stale socket" "$E2E_TMP/daemon.log" || die "stale socket not reported"
stop_daemon || die "daemon exit $?"

# 6. Unsafe socket directories are refused.
mkdir -m 755 "$E2E_TMP/open"
GRADTRACE_SOCKET=$E2E_TMP/open/a.sock GRADTRACE_CONTROL=$E2E_TMP/open/c.sock \
  "$B/gradtraced" --foreground --output-dir "$OUT" 2>"$E2E_TMP/open.err" && die "started in a 0755 dir"
grep -q "open to others" "$E2E_TMP/open.err" || die "0755 dir: $(cat "$E2E_TMP/open.err")"
mkdir -m 700 "$E2E_TMP/theirs"; chown 65534 "$E2E_TMP/theirs"
GRADTRACE_SOCKET=$E2E_TMP/theirs/a.sock GRADTRACE_CONTROL=$E2E_TMP/theirs/c.sock \
  "$B/gradtraced" --foreground --output-dir "$OUT" 2>"$E2E_TMP/theirs.err" && die "started in another user's dir"
grep -q "owned by uid 65534" "$E2E_TMP/theirs.err" || die "foreign dir: $(cat "$E2E_TMP/theirs.err")"
ln -s "$E2E_TMP" "$E2E_TMP/link"
GRADTRACE_SOCKET=$E2E_TMP/link/a.sock GRADTRACE_CONTROL=$E2E_TMP/link/c.sock \
  "$B/gradtraced" --foreground --output-dir "$OUT" 2>"$E2E_TMP/link.err" && die "started through a symlinked dir"
echo ok
