#!/usr/bin/env bash
# Agent and fork(): parent and child each write a complete stream of their
# own, with their own pid, to GRADTRACE_FILE with %p expanded; without %p
# the child writes <file>.<pid> and the parent's file stays intact. A shell
# wrapper that forks and execs the program, recording nothing itself,
# creates no file of its own.
set -eu
B=$ROOT/$BUILD
AGENT=$B/libgradtrace.so
[ -f "$AGENT" ] && [ -x "$B/progs/agent_check" ] || { echo "missing build (run make)" >&2; exit 77; }
T=$E2E_TMP
# Buffers that hold a whole run: this test is about streams, not drops.
export GRADTRACE_BUFFER_KB=1024

echo "== %p in GRADTRACE_FILE"
out=$(GRADTRACE_FILE=$T/run.%p.gtr LD_PRELOAD=$AGENT \
      "$B/progs/agent_threads" 2 100000 --fork 50000 --print-pids)
pid=${out#pid=}; pid=${pid%% *}; child=${out##*child=}
echo "parent $pid child $child"
ls "$T"
"$B/progs/agent_check" "$T/run.$pid.gtr" --threads 2 --events 100000 \
  --expect 101=100000 --pid "$pid"
"$B/progs/agent_check" "$T/run.$child.gtr" --expect 100=50000 \
  --pid "$child" --ppid "$pid"

echo "== no %p: the child appends .<pid>"
out=$(GRADTRACE_FILE=$T/plain.gtr LD_PRELOAD=$AGENT \
      "$B/progs/agent_threads" 2 100000 --fork 50000 --print-pids)
pid=${out#pid=}; pid=${pid%% *}; child=${out##*child=}
"$B/progs/agent_check" "$T/plain.gtr" --threads 2 --events 100000 \
  --expect 101=100000 --pid "$pid"
"$B/progs/agent_check" "$T/plain.gtr.$child" --expect 100=50000 \
  --pid "$child" --ppid "$pid"
echo "== a wrapper that never records (sh -c) leaves the file to the program"
GRADTRACE_FILE=$T/wrapped.gtr LD_PRELOAD=$AGENT \
  sh -c "'$B/progs/agent_threads' 2 10000; true"
ls "$T" | grep wrapped
[ "$(ls "$T" | grep -c wrapped)" = 1 ] || { echo "expected exactly one file"; exit 1; }
"$B/progs/agent_check" "$T/wrapped.gtr" --threads 2 --events 10000
echo OK
