#!/usr/bin/env bash
# A stream that ends while the disk is full (issue 23, item 4): agent_paced
# (4 threads) streams into a tmpfs, the script waits for an ACK mark,
# fills the disk, stops the agent while it is full, and frees the space
# only once the daemon says the connection is gone and the stream held
# (status totals.disk_full_held). Then, per thread, exactly:
#   instants in all its files + lost + undelivered + disk_full = produced
# Before: the converter was freed at the stream's end, the cut file left
# to the next start (cut to its last mark) and the disk-full counts were
# in no file (~98 % of a thread's records counted nowhere).
# GT_HOG=1: a CPU hog on both cores meanwhile.
. "$(dirname "$0")/daemon_lib.sh"
. "$(dirname "$0")/diskfull_lib.sh"
start_daemon
start_paced
wait_mark
fill
kill -USR1 $paced
wait $paced || die "agent_paced failed: $(tail -3 "$E2E_TMP/paced.err")"
wait_status "the stream ended, held" \
  "not any(a['pid'] == $paced for a in r['agents']) and r['totals']['disk_full_held'] == 1"
free_space
wait_status "the held stream finished" "r['totals']['disk_full_held'] == 0"
files=$(ctl_q '{"cmd":"status"}' "len([f for d in r['finished'] if d['pid'] == $paced for f in d['files']])")
have=$(ls "$OUT"/agent_paced-pid$paced*.json | wc -l)
[ "$files" = "$have" ] || die "status lists $files files of the agent, $have on disk"
stop_daemon || die "daemon exit $?"
grep "disk" "$E2E_TMP/daemon.log" | sed 's/.*gradtraced: //' | tail -4
check_paced
echo ok
