#!/usr/bin/env bash
# The control commands end to end: `gradtrace start/stop/trigger/status`
# reach the right agents as GT__CTL messages (fake agents print what they
# receive), selections by pid and rank work, a timed start ends by itself,
# triggers armed before an agent connects reach it on connect, bad specs
# are refused naming the field, and every subcommand has --help.
. "$(dirname "$0")/daemon_lib.sh"
need "$B/gradtrace" "$B/gradtraced" "$FAKE"
GT=$B/gradtrace

# No daemon yet: a clear error and exit 1.
"$GT" status 2>"$E2E_TMP/e"; [ $? -eq 1 ] || die "status without daemon must exit 1"
grep -q "no daemon on" "$E2E_TMP/e" || die "status without daemon: $(cat "$E2E_TMP/e")"

start_daemon
# Armed before any agent exists: must reach rank 1 when it connects.
"$GT" trigger layer=layers.17,phase=backward,iteration=200,ranks=1 >"$E2E_TMP/t1" \
  || die "trigger failed"
grep -q "armed: layer=layers.17,phase=backward,iteration=200,count=1,ranks=1" "$E2E_TMP/t1" \
  || die "canonical spec not echoed: $(cat "$E2E_TMP/t1")"

"$FAKE" --rank 0 --chunks 1 --hold-ms 2500 >"$E2E_TMP/r0" 2>/dev/null & a0=$!
"$FAKE" --rank 1 --chunks 1 --hold-ms 2500 >"$E2E_TMP/r1" 2>/dev/null & a1=$!
for _ in $(seq 1 100); do
  [ "$(ctl_q '{"cmd":"status"}' 'len(r["agents"])')" = 2 ] && break; sleep 0.02
done
"$GT" status >"$E2E_TMP/status" || die "status failed"
cat "$E2E_TMP/status"
grep -q "^agents: 2" "$E2E_TMP/status" || die "status table lacks the two agents"
grep -Eq "^  $a1 +1 +on " "$E2E_TMP/status" || die "status row for rank 1 wrong"
grep -q "#1 layer=layers.17" "$E2E_TMP/status" || die "armed trigger not in status"
"$GT" status --json | "$PY" -c 'import json,sys; r=json.load(sys.stdin); assert r["ok"] and len(r["agents"])==2' \
  || die "status --json"

"$GT" stop --rank 0 >/dev/null || die "stop --rank 0"
"$GT" start --pid $a1 --iterations 5 >/dev/null || die "start --pid"
"$GT" start --duration-ms 300 >"$E2E_TMP/st" || die "timed start"
grep -q "capture on: pids \[" "$E2E_TMP/st" || die "start output: $(cat "$E2E_TMP/st")"
sleep 0.6   # the daemon sends CAPTURE_OFF itself when the 300 ms are up
"$GT" trigger layer=fc,phase=forward,iteration=next,count=2 >/dev/null || die "trigger for all"
"$GT" stop --pid 999999 2>"$E2E_TMP/e"; [ $? -eq 1 ] || die "stop of an unknown pid must fail"
grep -q "no connected agent matches" "$E2E_TMP/e" || die "unknown pid: $(cat "$E2E_TMP/e")"
"$GT" trigger --clear | grep -q "cleared 2 trigger" || die "trigger --clear"
wait $a0 $a1

# What each agent received, in order (type 1 welcome, 2 on, 3 off,
# 4 trigger, 5 clear).
cat "$E2E_TMP/r0" "$E2E_TMP/r1"
want0=$'ctl 1 gradtraced\nctl 3 \nctl 2 ms=300\nctl 3 \nctl 4 layer=fc,phase=forward,iteration=next,count=2\nctl 5 '
want1=$'ctl 1 gradtraced\nctl 4 layer=layers.17,phase=backward,iteration=200,count=1,ranks=1\nctl 2 iterations=5\nctl 2 ms=300\nctl 3 \nctl 4 layer=fc,phase=forward,iteration=next,count=2\nctl 5 '
[ "$(sed 's/^ctl 1 gradtraced.*/ctl 1 gradtraced/' "$E2E_TMP/r0")" = "$want0" ] || die "rank 0 got the wrong messages"
[ "$(sed 's/^ctl 1 gradtraced.*/ctl 1 gradtraced/' "$E2E_TMP/r1")" = "$want1" ] || die "rank 1 got the wrong messages"

# A job-wide trigger needs an agent whose Python side watches the job's
# store (GT_R_JOB_ROUTE): this one has none, so after waiting 5 s for a
# route to come up it is refused, and nothing was sent to the agent.
"$FAKE" --rank 0 --chunks 1 --hold-ms 8000 >"$E2E_TMP/r2" 2>/dev/null & a2=$!
for _ in $(seq 1 100); do
  [ "$(ctl_q '{"cmd":"status"}' 'len(r["agents"])')" = 1 ] && break; sleep 0.02
done
"$GT" trigger --job layer=fc 2>"$E2E_TMP/e"; rc=$?
[ $rc -eq 1 ] || die "job trigger without a job: exit $rc, want 1"
grep -q "^gradtrace trigger: no connected agent can reach a torch.distributed job" "$E2E_TMP/e" ||
  die "job trigger without a job: $(cat "$E2E_TMP/e")"
wait $a2
[ "$(sed 's/^ctl 1 gradtraced.*/ctl 1 gradtraced/' "$E2E_TMP/r2")" = "ctl 1 gradtraced" ] ||
  die "the agent without a job route got: $(cat "$E2E_TMP/r2")"

# Bad specs: usage errors naming the field; nothing sent.
"$GT" trigger layer=x,count=0 2>"$E2E_TMP/e"; [ $? -eq 2 ] || die "bad count must exit 2"
grep -q "count" "$E2E_TMP/e" || die "error does not name count"
"$GT" trigger phase=forward 2>"$E2E_TMP/e"; [ $? -eq 2 ] || die "missing layer must exit 2"
grep -q "layer: missing" "$E2E_TMP/e" || die "error does not name layer"
"$GT" start --pid abc 2>/dev/null; [ $? -eq 2 ] || die "bad --pid must exit 2"
"$GT" frobnicate 2>/dev/null; [ $? -eq 2 ] || die "unknown command must exit 2"

for sub in status start stop trigger record daemon convert; do
  "$GT" $sub --help >"$E2E_TMP/h" 2>&1 || die "gradtrace $sub --help failed"
  grep -qi "usage" "$E2E_TMP/h" || die "gradtrace $sub --help prints no usage"
done
"$GT" --help | grep -q "Exit status" || die "exit codes not documented in --help"
stop_daemon || die "daemon exit $?"
echo ok
