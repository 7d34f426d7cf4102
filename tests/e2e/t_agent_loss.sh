#!/usr/bin/env bash
# Records neither in a trace nor counted (issue 23, items 3, 5, 6): with a
# real agent (tests/progs/agent_paced, known per-thread counts) and CPU
# hogs on every core, per thread exactly
#   instants in every trace file of the process + lost events + undelivered
#   = produced                                  (tests/tools/paced_check.py)
# in each of these cases:
#  1. the daemon is killed mid-run and is back only after the threads
#     stopped: the agent's last stream carries loss counts and its goodbye,
#     no event (before: no file for it, the counts went nowhere);
#  2. the daemon starts after the threads stopped (a late daemon): the
#     process's only stream is such a stream (before: no file at all);
#  3. the daemon is SIGSTOPped for longer than the agent's write timeout
#     while the agent streams (before: the backlog the agent counted as
#     undelivered was converted as well, counted twice);
#  4. forked children that end with _exit(0), as multiprocessing's workers
#     do (before: their last records neither in a trace nor counted).
# GT_LOSS_ROUNDS (default 1; `make soak`: 20) runs the four cases that often.
. "$(dirname "$0")/daemon_lib.sh"
need "$B/gradtraced" "$B/progs/agent_paced"
[ -f "$B/libgradtrace.so" ] || skip "missing $B/libgradtrace.so"
AGENT=$B/libgradtrace.so
kill_daemon() { kill -9 "$DAEMON_PID"; wait "$DAEMON_PID" 2>/dev/null; DAEMON_PID=; }
paced() { # paced NAME ARGS...: agent_paced in the background, $paced its pid
  local name=$1; shift
  GRADTRACE_LOG=1 LD_PRELOAD=$AGENT "$B/progs/agent_paced" "$@" \
    >"$E2E_TMP/$name.txt" 2>"$E2E_TMP/$name.err" & paced=$!
}
check() { # check NAME: the accounting over every agent_paced file in $OUT
  local name=$1
  wait $paced || die "$name: agent_paced failed: $(tail -3 "$E2E_TMP/$name.err")"
  stop_daemon || die "$name: daemon exit $?"
  local files=("$OUT"/agent_paced-pid*.json)
  [ -e "${files[0]}" ] || files=()
  [ ${#files[@]} -eq 0 ] || validate "${files[@]}"
  # Every case runs, so that one failure shows the others' figures too.
  "$PY" "$ROOT/tests/tools/paced_check.py" "$E2E_TMP/$name.txt" "${files[@]}" \
    || { echo "FAIL: $name: records neither in a trace nor counted, or counted twice"
         failed="$failed $name"; }
}
failed=
start_hogs

for round in $(seq 1 "${GT_LOSS_ROUNDS:-1}"); do
  echo "== 1. daemon killed, back after the threads stopped"
  OUT=$E2E_TMP/r$round/down
  start_daemon
  paced down 4 600000 20 3000
  sleep 1.5
  kill_daemon
  sleep 1
  kill -USR1 $paced
  sleep 0.5
  start_daemon
  check down

  echo "== 2. daemon started after the threads stopped"
  OUT=$E2E_TMP/r$round/late
  paced late 4 600000 20 2500
  sleep 1
  kill -USR1 $paced
  sleep 0.5
  start_daemon
  check late

  echo "== 3. daemon SIGSTOPped past the agent's write timeout"
  OUT=$E2E_TMP/r$round/stop
  start_daemon
  paced stop 4 600000 20
  sleep 1.2
  kill -STOP "$DAEMON_PID"
  sleep 3.5
  kill -CONT "$DAEMON_PID"
  sleep 1
  kill -USR1 $paced
  check stop

  echo "== 4. forked children that end with _exit"
  OUT=$E2E_TMP/r$round/kids
  start_daemon
  paced kids 1 1500 20 0 4
  check kids
done
[ -z "$failed" ] || die "not exact:$failed"
echo ok
