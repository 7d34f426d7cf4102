#!/usr/bin/env bash
# The agent changes nothing observable: preloaded into /bin/true,
# `python3 -c pass`, a shell with an exit status and a multi-threaded
# program with no daemon running, stdout and stderr stay empty, exit
# statuses are unchanged and the wall time stays close to the run without
# the agent (the agent never waits for a daemon).
set -eu
B=$ROOT/$BUILD
AGENT=$B/libgradtrace.so
[ -f "$AGENT" ] || { echo "missing $AGENT (run make)" >&2; exit 77; }
T=$E2E_TMP
export GRADTRACE_SOCKET=$T/no-daemon.sock
unset GRADTRACE_FILE GRADTRACE_LOG

check_quiet() { # name, then the command
  local name=$1; shift
  set +e
  "$@" >"$T/plain.out" 2>"$T/plain.err"; local plain=$?
  LD_PRELOAD=$AGENT "$@" >"$T/agent.out" 2>"$T/agent.err"; local traced=$?
  set -e
  if [ "$plain" != "$traced" ]; then
    echo "$name: exit status $plain without the agent, $traced with it"; exit 1
  fi
  if ! cmp -s "$T/plain.out" "$T/agent.out" || ! cmp -s "$T/plain.err" "$T/agent.err"; then
    echo "$name: output differs with the agent:"; cat "$T/agent.out" "$T/agent.err"; exit 1
  fi
  echo "$name: status $traced, output unchanged"
}

check_quiet true /bin/true
check_quiet false /bin/false
check_quiet sh-exit-3 /bin/sh -c 'exit 3'
check_quiet python "${PYTHON:-/usr/bin/python3}" -c pass
check_quiet threads "$B/progs/agent_threads" 4 200000

# A bad GRADTRACE_* value is not printed into the job's output either: it
# is ignored (the default is used) and said in the trace's warnings.
GRADTRACE_BUFFER_KB=lots GRADTRACE_OPS=maybe check_quiet bad-config "$B/progs/agent_threads" 1 1000
GRADTRACE_FILE=$T/bad.gtr GRADTRACE_BUFFER_KB=lots GRADTRACE_OPS=maybe LD_PRELOAD=$AGENT \
  "$B/progs/agent_threads" 1 1000 >/dev/null 2>"$T/bad.err"
[ ! -s "$T/bad.err" ] || { echo "bad config printed: $(cat "$T/bad.err")"; exit 1; }
"$B/gradtrace" convert --quiet -o "$T/bad.json" "$T/bad.gtr"
"${PYTHON:-/usr/bin/python3}" - "$T/bad.json" <<'PY'
import json, sys
w = [x["text"] for x in json.load(open(sys.argv[1]))["gradtrace"]["warnings"]]
assert any(t.startswith('GRADTRACE_BUFFER_KB="lots" ignored') for t in w), w
assert any(t.startswith('GRADTRACE_OPS="maybe" ignored') for t in w), w
print("bad config: in the trace's warnings:", w)
PY

# Wall time with no daemon: best of 3 each way. The agent records (capture
# is on by default) and discards without a sink; a bound of 2x + 0.3 s
# only fails if something waits (a connect, a flush, a retry loop).
best() {
  local best=999999 t0 t1 ms
  for _ in 1 2 3; do
    t0=$(date +%s%N); "$@" >/dev/null 2>&1 || true; t1=$(date +%s%N)
    ms=$(((t1 - t0) / 1000000)); [ $ms -lt $best ] && best=$ms
  done
  echo $best
}
plain=$(best "$B/progs/agent_threads" 4 200000)
traced=$(best env LD_PRELOAD="$AGENT" "$B/progs/agent_threads" 4 200000)
echo "wall time, best of 3: ${plain} ms without the agent, ${traced} ms with it (no daemon)"
[ "$traced" -le $((plain * 2 + 300)) ]
echo OK
