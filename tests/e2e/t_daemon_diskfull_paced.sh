#!/usr/bin/env bash
# Disk full, accounted per thread (issue 23, item 4): a real agent
# (agent_paced, 4 threads) streams into a 3 MiB tmpfs that fills; when
# space returns the stream goes on. Per thread, exactly:
#   instants in all its files + lost + undelivered + disk_full = produced
# Before: what the writer had buffered when the disk filled (up to 4 MiB)
# was dropped and later acknowledged: neither in a trace nor counted.
# GT_DISKFULL_LOOPS (default 3) fill/free cycles; `make soak` runs more.
# With GT_HOG=1, a CPU hog runs on both cores meanwhile.
. "$(dirname "$0")/daemon_lib.sh"
need "$B/gradtraced" "$B/progs/agent_paced"
[ -f "$B/libgradtrace.so" ] || skip "missing $B/libgradtrace.so"
if [ "$(id -u)" -ne 0 ]; then
  [ -n "${CI:-}" ] && die "CI must run this as root"
  skip "needs root to mount a small tmpfs"
fi
LOOPS=${GT_DISKFULL_LOOPS:-1}
SMALL=$E2E_TMP/small
mkdir -p "$SMALL"
mount -t tmpfs -o size=3m,mode=700 tmpfs "$SMALL" 2>"$E2E_TMP/mount.err" || {
  [ -n "${CI:-}" ] && die "cannot mount tmpfs: $(cat "$E2E_TMP/mount.err")"
  skip "cannot mount tmpfs here: $(cat "$E2E_TMP/mount.err")"; }
hogs=()
trap 'cleanup_daemon; for h in "${hogs[@]}"; do kill "$h" 2>/dev/null; done; umount "$SMALL" 2>/dev/null' EXIT
if [ "${GT_HOG:-0}" = 1 ]; then
  for _ in 1 2; do (while :; do :; done) & hogs+=($!); done
fi
OUT=$SMALL/out
start_daemon
LD_PRELOAD=$B/libgradtrace.so "$B/progs/agent_paced" 4 3600000 \
  >"$E2E_TMP/paced.txt" 2>"$E2E_TMP/paced.err" & paced=$!
for i in $(seq 1 "$LOOPS"); do
  n=$(grep -c "disk full writing" "$E2E_TMP/daemon.log")
  dd if=/dev/zero of="$SMALL/filler" bs=64k 2>/dev/null || true
  for _ in $(seq 1 200); do [ "$(grep -c "disk full writing" "$E2E_TMP/daemon.log")" -gt "$n" ] && break; sleep 0.05; done
  [ "$(grep -c "disk full writing" "$E2E_TMP/daemon.log")" -gt "$n" ] || die "loop $i: disk full not reported"
  sleep 0.5
  rm -f "$SMALL/filler"
  # Space back: old files of this run go so the next fill comes soon.
  m=$(grep -c "disk space is back" "$E2E_TMP/daemon.log")
  for _ in $(seq 1 100); do [ "$(grep -c "disk space is back" "$E2E_TMP/daemon.log")" -gt "$m" ] && break; sleep 0.05; done
  [ "$(grep -c "disk space is back" "$E2E_TMP/daemon.log")" -gt "$m" ] || die "loop $i: writing did not resume"
  sleep 0.3
done
kill -USR1 $paced
wait $paced || die "agent_paced failed: $(tail -3 "$E2E_TMP/paced.err")"
stop_daemon || die "daemon exit $?"
grep "disk" "$E2E_TMP/daemon.log" | sed 's/.*gradtraced: //' | tail -4
validate "$OUT"/*.json
"$PY" "$ROOT/tests/tools/paced_check.py" "$E2E_TMP/paced.txt" "$OUT"/agent_paced-pid$paced*.json \
  || die "records neither in the trace nor counted lost"
echo ok
