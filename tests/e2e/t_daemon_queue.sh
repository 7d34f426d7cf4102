#!/usr/bin/env bash
# The daemon's conversion pool (issue #16): agents' bytes are converted by
# worker threads behind bounded per-agent queues, the loop only reads.
#  1. control during conversion: four agents stream as fast as they can
#     into a daemon with one worker and small queues (so conversion lags
#     and queues fill); status requests sent meanwhile are all answered
#     (how many found an agent mid-conversion is printed: that depends on
#     timing, so it is not asserted);
#  2. disconnect while conversion is queued: those agents exit as soon as
#     their last byte is sent; every trace is complete all the same;
#  3. backpressure with loss counted: agents that drop when the socket is
#     full (as the real agent does) against the same small queues: what
#     reaches the trace plus what the agents dropped is what they made;
#  4. a slow disk: the daemon stopped (SIGSTOP, as a stalled write would
#     hold it) while agents stream; after SIGCONT everything that was
#     sent is converted, and every drop is counted.
. "$(dirname "$0")/daemon_lib.sh"
need "$B/gradtraced" "$FAKE"
start_daemon --workers 1 --queue-kb 64

CHUNKS=60 RECORDS=4000
echo "== 1+2. four agents at full speed, status meanwhile, exit at once"
"$PY" - "$FAKE" "$GRADTRACE_CONTROL" "$CHUNKS" "$RECORDS" >"$E2E_TMP/poll.txt" <<'PY' || die "status poll failed"
import json, socket, subprocess, sys
fake, ctl, chunks, records = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
procs = [subprocess.Popen([fake, "--chunks", chunks, "--records", records,
                           "--rank", str(i), "--cmd", "queue"],
                          stderr=subprocess.DEVNULL) for i in range(4)]
s = socket.socket(socket.AF_UNIX)
s.settimeout(20)  # a status left unanswered this long fails the test
s.connect(ctl)
f = s.makefile("rwb")
answered = live = 0
while True:
    done = all(p.poll() is not None for p in procs)
    f.write(b'{"cmd":"status"}\n'); f.flush()
    r = json.loads(f.readline())
    assert r["ok"], r
    answered += 1
    if any(a.get("records", 0) > 0 for a in r.get("agents", [])):
        live += 1
    if done:
        break
for p in procs:
    assert p.wait() == 0, "agent failed"
print("answered", answered, "live", live)
PY
read -r _ answered _ live <"$E2E_TMP/poll.txt"
[ "$answered" -gt 0 ] || die "no status answered"
echo "$answered status requests answered, $live while agents were live"
for _ in $(seq 1 600); do
  [ "$(grep -c 'queue-rank.*disconnected: ' "$E2E_TMP/daemon.log")" -ge 4 ] && break; sleep 0.1
done
files=$(ls "$OUT"/queue-rank*.json 2>/dev/null | wc -l)
[ "$files" -ge 4 ] || die "$files files for 4 agents"
want=$((CHUNKS * RECORDS / 2))
for r in 0 1 2 3; do
  n=$(count_fake_spans "$OUT"/queue-rank$r-*.json)
  [ "$n" -eq "$want" ] || die "rank $r: $n of $want spans"
done
validate "$OUT"/queue-rank*.json >/dev/null
echo "4 agents that exited with conversion queued: complete"

# Agents that drop when the socket is full: spans converted + spans of
# dropped chunks = spans made, for each agent.
check_counted() {
  local tag=$1
  for r in 0 1 2 3; do
    local dropped n
    dropped=$(sed -n 's/.*dropped \([0-9]*\).*/\1/p' "$E2E_TMP/$tag$r.err")
    [ -n "$dropped" ] || die "$tag $r: no summary"
    n=$(count_fake_spans "$OUT"/$tag-rank$r-*.json)
    [ $((n + dropped * RECORDS / 2)) -eq "$want" ] ||
      die "$tag rank $r: $n spans + $dropped dropped chunks != $CHUNKS chunks"
    echo "$tag rank $r: $n spans converted, $dropped chunks dropped and counted"
  done
}
wait_done() {
  local tag=$1
  for _ in $(seq 1 600); do
    [ "$(grep -c "$tag-rank.*disconnected: " "$E2E_TMP/daemon.log")" -ge 4 ] && return 0; sleep 0.1
  done
  die "$tag: agents not finished"
}

echo "== 3. drop-when-full agents against full queues"
pids=()
for r in 0 1 2 3; do
  "$FAKE" --chunks $CHUNKS --records $RECORDS --rank $r --cmd lossy --nonblock \
    2>"$E2E_TMP/lossy$r.err" & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || die "agent $p failed"; done
wait_done lossy
check_counted lossy

echo "== 4. slow disk: daemon stalled while agents stream"
kill -STOP "$DAEMON_PID"
pids=()
for r in 0 1 2 3; do
  "$FAKE" --chunks $CHUNKS --records $RECORDS --rank $r --cmd stall --nonblock \
    2>"$E2E_TMP/stall$r.err" & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || die "agent $p failed"; done
kill -CONT "$DAEMON_PID"
wait_done stall
check_counted stall
ctl_q '{"cmd":"status"}' 'r["ok"]' | grep -qx True || die "daemon not serving"
stop_daemon || die "daemon exit $?"
echo ok
