#!/usr/bin/env bash
# A capture window's file cut by a full disk is finished once space
# returns (issue 23, item 4). agent_paced's first thread calls module
# "blk" around each burst and steps at each SIGUSR2; a trigger (layer=blk,
# phase=forward, iteration=1) opens a window at the first step after the
# agent armed it (a trigger armed during an iteration's forward waits for
# the next: the script steps until status says the window is capturing),
# done at the next step. The disk fills while the window is open (after
# an ACK mark is in its file) and is freed; then a step ends the window. Every file is valid,
# a window file was cut and finished (repaired, keeping its marked
# events), and the threads without module calls are exact per thread:
#   instants in all its files + lost + undelivered + disk_full = produced
# GT_HOG=1: a CPU hog on both cores meanwhile.
. "$(dirname "$0")/daemon_lib.sh"
. "$(dirname "$0")/diskfull_lib.sh"
start_daemon
ctl '{"cmd":"trigger","layer":"blk","phase":"forward","iteration":1}' >/dev/null || die "arming"
start_paced blk
capturing="any(a['pid'] == $paced and any(t['state'] == 'capturing' for t in a['triggers']) for a in r['agents'])"
for _ in $(seq 1 30); do
  kill -USR2 $paced
  for _ in $(seq 1 20); do
    [ "$(ctl_q '{"cmd":"status"}' "$capturing")" = True ] && break 2
    sleep 0.1
  done
done
wait_status "window capturing" "$capturing"
wait_mark -w
fill
sleep 0.5 # chunks arrive while full (counted, not converted)
free_space
wait_status "writing resumed" "any(a['pid'] == $paced and not a['disk_full'] for a in r['agents'])"
kill -USR2 $paced # the step: the window is done
wait_status "window done" "any(a['pid'] == $paced and any(t['state'] == 'fired' for t in a['triggers']) for a in r['agents'])"
wait_mark
kill -USR1 $paced
wait $paced || die "agent_paced failed: $(tail -3 "$E2E_TMP/paced.err")"
stop_daemon || die "daemon exit $?"
grep "disk" "$E2E_TMP/daemon.log" | sed 's/.*gradtraced: //' | tail -4
ls "$OUT"
check_paced
"$PY" - "$OUT"/agent_paced-pid$paced-w*.json <<'PY' || die "window files"
import json, sys
docs = [(p, json.load(open(p))["gradtrace"]) for p in sys.argv[1:]]
for p, g in docs:
    print(p.rsplit("/", 1)[1], "repaired" if g.get("repaired") else "", g["events"], "events")
cut = [g for p, g in docs if g.get("repaired")]
assert cut, "no window file was cut and finished"
assert any(g["events"] > 0 for g in cut), "the cut window file lost what its mark covered"
PY
echo ok
