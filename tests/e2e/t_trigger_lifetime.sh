#!/usr/bin/env bash
# Trigger lifetime (schema/control.md, "Trigger lifetime"): a daemon that
# outlives two jobs. A count=2 trigger armed before the first job reaches
# it, fires its two windows there, and is retired once that job's agent
# has ended (status: no longer armed, listed as retired with 2 windows);
# the second job, run the same way, gets no trigger and leaves no file.
set -u
. "$(dirname "$0")/trigger/lib.sh"
trig_require
. "$(dirname "$0")/daemon_lib.sh"
PY=${PYTHON:-/usr/bin/python3}
GT=$B/gradtrace
trap cleanup_daemon EXIT

start_daemon
"$GT" trigger layer=blocks.17,phase=backward,iteration=1,count=2 >/dev/null || die "arming"
[ "$(ctl_q '{"cmd":"status"}' '[t["state"] for t in r["triggers"]]')" = "['waiting']" ] \
  || die "a trigger no agent got yet is waiting: $(ctl '{"cmd":"status"}')"

# job N: one training run with the agent, capture off; waits until the
# daemon has finished its agent.
job() {
  env LD_PRELOAD="$AGENT" GRADTRACE_CAPTURE=0 PYTHONPATH="$ROOT/python" \
      "$PY" "$MODEL" --iters 4 >"$E2E_TMP/job$1.stdout" 2>"$E2E_TMP/job$1.stderr" \
    & local pid=$!
  wait $pid || die "job $1 failed: $(cat "$E2E_TMP/job$1.stderr")"
  for _ in $(seq 1 200); do
    [ "$(ctl_q '{"cmd":"status"}' "any(d['pid'] == $pid for d in r['finished'])")" = True ] && break
    sleep 0.05
  done
  echo $pid
}

p1=$(job 1)
ls "$OUT"/*-w*.json >/dev/null 2>&1 || die "job 1 fired no window"
n1=$(ls "$OUT" | grep -Ec -- '-w[0-9]*-blocks.17-backward-it[12](\.pt\.trace)?\.json$')
[ "$n1" = 2 ] || die "job 1: want 2 windows, got: $(ls "$OUT")"
"$GT" status --json >"$E2E_TMP/st1.json" || die "status"
"$PY" - "$E2E_TMP/st1.json" <<'PY' || die "status after job 1: $(cat "$E2E_TMP/st1.json")"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["triggers"] == [], ("still armed after its job", r["triggers"])
t = r["retired"]
assert len(t) == 1 and t[0]["why"] == "done" and t[0]["fired"] == 2 and t[0]["sent_to"] == 1, t
PY
"$GT" status | grep -q "triggers retired" || die "status table lacks the retired trigger"

p2=$(job 2)
[ "$(ls "$OUT" | wc -l)" = 2 ] || die "job 2 left files: $(ls "$OUT")"
"$PY" - "$(ctl '{"cmd":"status"}')" $p2 <<'PY' || die "job 2 got the trigger"
import json, sys
r = json.loads(sys.argv[1]); pid = int(sys.argv[2])
d = [d for d in r["finished"] if d["pid"] == pid]
assert d and d[0]["triggers"] == [] and d[0]["fired"] == [], d
PY
$VALIDATE "$OUT"/*.json || die "window files invalid"
stop_daemon || die "daemon exit $?"
echo ok
