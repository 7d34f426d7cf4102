#!/usr/bin/env bash
# Agent and fatal signals: a program that records and then dies by SIGSEGV
# (or abort()) leaves a file whose chunks all decode, including the records
# still buffered at the crash (written raw by the signal handler), and dies
# with the same status as without the agent.
set -eu
B=$ROOT/$BUILD
AGENT=$B/libgradtrace.so
[ -f "$AGENT" ] && [ -x "$B/progs/agent_check" ] || { echo "missing build (run make)" >&2; exit 77; }
T=$E2E_TMP

# The crash path only has work when records are still buffered at the
# crash; the streamer (20 ms tick) may rarely have taken them all first. Such
# a run is inconclusive for the raw-chunk check (every other check still
# applies), so it is repeated, up to 5 runs.
for mode in --crash --abort; do
  echo "== $mode"
  set +e
  "$B/progs/agent_threads" 3 20000 $mode 2>/dev/null
  plain=$?
  set -e
  for attempt in 1 2 3 4 5; do
    set +e
    GRADTRACE_FILE=$T/crash.gtr LD_PRELOAD=$AGENT "$B/progs/agent_threads" 3 2000 $mode 2>/dev/null
    traced=$?
    set -e
    echo "exit status without agent $plain, with agent $traced"
    [ "$plain" -ge 128 ] && [ "$plain" = "$traced" ]
    "$B/progs/agent_check" "$T/crash.gtr" --threads 3 --events 2000 \
      --expect 200=2000 | tee "$T/crash.txt"
    grep -q ' raw_chunks=0 ' "$T/crash.txt" || break
    [ $attempt -lt 5 ] || { echo "the crash path never wrote a chunk"; exit 1; }
  done
done
echo OK
