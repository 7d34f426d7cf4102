#!/usr/bin/env bash
# Agent, file mode: 8 threads x 1M scope events decode to exactly 8M records
# in per-thread order (buffers big enough not to drop); with a tiny buffer,
# recorded + lost is exactly 1M for every thread; 400 short-lived threads
# (their buffers recycled) each arrive complete under their own tid; a
# thread calling exit() while others record still leaves a whole file.
set -eu
B=$ROOT/$BUILD
AGENT=$B/libgradtrace.so
for f in "$AGENT" "$B/progs/agent_threads" "$B/progs/agent_check"; do
  [ -x "$f" ] || [ -f "$f" ] || { echo "missing $f (run make)" >&2; exit 77; }
done
T=$E2E_TMP

echo "== 8 x 1M events, no drops expected"
GRADTRACE_FILE=$T/big.gtr GRADTRACE_BUFFER_KB=4096 GRADTRACE_BUFFER_BLOCKS=8 \
  LD_PRELOAD=$AGENT "$B/progs/agent_threads" 8 1000000
"$B/progs/agent_check" "$T/big.gtr" --threads 8 --events 1000000 | tee "$T/big.txt"
grep -q '^records=8000000 lost=0 ' "$T/big.txt"

echo "== tiny buffer: recorded + lost == 1M per thread"
GRADTRACE_FILE=$T/tiny.gtr GRADTRACE_BUFFER_KB=4 GRADTRACE_BUFFER_BLOCKS=2 \
  LD_PRELOAD=$AGENT "$B/progs/agent_threads" 8 1000000
"$B/progs/agent_check" "$T/tiny.gtr" --threads 8 --events 1000000 --lossy \
  --require-lost | tee "$T/tiny.txt"

echo "== 50 waves of 8 short-lived threads (thread exit, state reuse)"
GRADTRACE_FILE=$T/waves.gtr LD_PRELOAD=$AGENT "$B/progs/agent_threads" 8 20000 --waves 50
"$B/progs/agent_check" "$T/waves.gtr" --threads 400 --events 20000

echo "== exit() from a thread while others record"
GRADTRACE_FILE=$T/exit.gtr LD_PRELOAD=$AGENT \
  "$B/progs/agent_threads" 4 2000000 --exit-from-thread
# Threads still running at exit lose their tail: the stream must still be
# whole (every chunk decodes, strings defined before use, per-thread order),
# and no thread may count more than it recorded.
"$B/progs/agent_check" "$T/exit.gtr" --threads 4 --events 2000000 --partial
echo OK
