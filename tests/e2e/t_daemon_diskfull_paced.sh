#!/usr/bin/env bash
# Disk full, accounted per thread (issue 23, item 4): a real agent
# (agent_paced, 4 threads) streams into a tmpfs that the script fills
# and frees GT_DISKFULL_LOOPS times (default 3; `make soak` runs 20),
# each time after an ACK mark is in the file. Per thread, exactly:
#   instants in all its files + lost + undelivered + disk_full = produced
# Before: what the writer had buffered when the disk filled (up to 4 MiB)
# was dropped and later acknowledged (~78 % of a thread's records
# counted nowhere); then, over several cycles, each pause counted again
# what earlier ones had (~+30 % per thread). Every cut file is finished
# and keeps the events its last mark covered. GT_HOG=1: a CPU hog on both
# cores meanwhile.
. "$(dirname "$0")/daemon_lib.sh"
. "$(dirname "$0")/diskfull_lib.sh"
LOOPS=${GT_DISKFULL_LOOPS:-3}
start_daemon
start_paced
for i in $(seq 1 "$LOOPS"); do
  wait_mark
  fill
  sleep 0.5 # chunks arrive while full (counted, not converted)
  free_space
  wait_status "loop $i: writing resumed" "any(a['pid'] == $paced and not a['disk_full'] for a in r['agents'])"
  move_finished
done
kill -USR1 $paced
wait $paced || die "agent_paced failed: $(tail -3 "$E2E_TMP/paced.err")"
stop_daemon || die "daemon exit $?"
grep "disk" "$E2E_TMP/daemon.log" | sed 's/.*gradtraced: //' | tail -4
check_paced
"$PY" - "$LOOPS" "$OUT"/agent_paced-pid$paced*.json "$E2E_TMP"/moved/*.json <<'PY' || die "cut files"
import json, sys
loops, docs = int(sys.argv[1]), [json.load(open(p)) for p in sys.argv[2:]]
cut = [d for d in docs if d["gradtrace"].get("repaired")]
kept = [d for d in cut if d["gradtrace"]["events"] > 0]
print("%d cut files, %d keep the events of their last mark" % (len(cut), len(kept)))
assert len(cut) >= loops, "a cut file was not finished"
assert len(kept) >= loops, "a cut file lost what its mark covered"
PY
echo ok
