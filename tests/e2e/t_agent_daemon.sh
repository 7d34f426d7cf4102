#!/usr/bin/env bash
# The real agent streaming to the real daemon over its socket:
#  1. daemon up first: 4 threads x 200k events arrive complete and in order
#     (checked on the daemon's raw copy of the stream), and the converted
#     trace validates;
#  2. daemon started while the program already runs: the agent keeps going
#     without it (never waits), connects within its backoff, reports the
#     chunks it had to drop (GT_LOST_CHUNKS) and delivers everything
#     recorded after the connection, exactly.
. "$(dirname "$0")/daemon_lib.sh"
need "$B/gradtraced" "$B/progs/agent_threads" "$B/progs/agent_check"
[ -f "$B/libgradtrace.so" ] || skip "missing $B/libgradtrace.so"
AGENT=$B/libgradtrace.so
export GRADTRACE_BUFFER_KB=1024

echo "== daemon first"
start_daemon --raw
LD_PRELOAD=$AGENT "$B/progs/agent_threads" 4 200000
stop_daemon || die "daemon did not shut down cleanly"
raw=$(ls "$OUT"/*.gtr); echo "raw stream: $raw"
"$B/progs/agent_check" "$raw" --threads 4 --events 200000
validate "$OUT"/*.json
rm -rf "$OUT"

echo "== program first, daemon 0.5 s later"
LD_PRELOAD=$AGENT "$B/progs/agent_threads" 4 200000 --then-sleep 2500 &
prog=$!
sleep 0.5
start_daemon --raw
wait $prog || die "the program failed"
stop_daemon || die "daemon did not shut down cleanly"
raw=$(ls "$OUT"/*.gtr); echo "raw stream: $raw"
# Threads 0-3 recorded before the connection: discarded (counted as lost
# chunks). Thread 102 recorded after it: all of it.
"$B/progs/agent_check" "$raw" --expect 102=200000 | tee "$E2E_TMP/late.txt"
grep -q ' lost_chunks=[1-9]' "$E2E_TMP/late.txt" || die "no GT_LOST_CHUNKS for the time without a daemon"
validate "$OUT"/*.json
echo OK
