#!/usr/bin/env bash
# Control clients cannot hold the daemon's memory or its slots (issue #13,
# item 7):
#  1. 200,000 pipelined status requests whose replies are never read: the
#     client is cut once 1 MiB of replies is queued, the daemon's RSS stays
#     small, and another client's status is answered meanwhile;
#  2. 70 idle connections (more than the 64 slots) do not lock status out,
#     and idle connections are closed after --control-idle-s.
. "$(dirname "$0")/daemon_lib.sh"
need "$B/gradtraced"
start_daemon --control-idle-s 2
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$DAEMON_PID/status"; }
rss0=$(rss_kb)

echo "== pipelined requests, replies never read"
"$PY" - "$GRADTRACE_CONTROL" <<'PY' & flood=$!
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
blob = b'{"cmd":"status"}\n' * 200000
try:
    s.sendall(blob)
    s.shutdown(socket.SHUT_WR)
    s.settimeout(20)
    import time; time.sleep(3)   # still not reading
    # cut: the daemon closed; reading now ends (EOF or reset) soon
    while s.recv(1 << 20):
        pass
except (BrokenPipeError, ConnectionResetError, socket.timeout):
    pass
PY
sleep 0.5
ctl_q '{"cmd":"status"}' 'r["ok"]' | grep -qx True || die "status not answered during the flood"
wait $flood
rss1=$(rss_kb)
echo "daemon RSS: ${rss0} kB before, ${rss1} kB after the flood"
[ $((rss1 - rss0)) -lt 12000 ] || die "the flood grew the daemon by $((rss1 - rss0)) kB"
grep -q "control client not reading its replies" "$E2E_TMP/daemon.log" || die "flooding client not cut"

echo "== idle connections"
"$PY" - "$GRADTRACE_CONTROL" <<'PY' || die "idle connections locked status out or were never closed"
import json, socket, sys, time
p = sys.argv[1]
idle = []
for _ in range(70):
    s = socket.socket(socket.AF_UNIX); s.connect(p); idle.append(s)
time.sleep(0.2)
t = time.time()
c = socket.socket(socket.AF_UNIX); c.settimeout(5); c.connect(p)
c.sendall(b'{"cmd":"status"}\n')
r = json.loads(c.makefile().readline())
assert r["ok"], r
print(f"status answered in {time.time() - t:.3f} s beside 70 idle connections")
c.close()
time.sleep(3.5)
closed = 0
for s in idle:
    s.settimeout(0.5)
    try:
        closed += s.recv(1) == b""
    except (ConnectionResetError, socket.timeout):
        closed += 0 if isinstance(sys.exc_info()[1], socket.timeout) else 1
print(f"{closed} of 70 idle connections closed by the daemon")
assert closed == 70, closed
PY
[ "$(ctl_q '{"cmd":"status"}' 'r["totals"]["control_cut"]')" -ge 71 ] || die "cut clients not counted"
stop_daemon || die "daemon exit $?"
echo ok
