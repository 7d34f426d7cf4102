#!/usr/bin/env bash
# The agent's own part of a torch operator's capture cost: its
# RecordFunction start and end callbacks (agent/ops.c, two records), run
# by tests/progs/fake_recfn, which plays libtorch's callback registry
# without torch, so libtorch's own RecordFunction work is not in it.
# Prints ns per operator (thread CPU time, best of 3 runs of 2 M
# operators, in batches with pauses so that the streamer keeps up, as in
# a training step) without the agent and with it capturing into a .gtr
# file, and the records that capture lost (0: every one was kept; an
# unpaced loop fills the ring, and dropping is cheaper than keeping).
# The whole per-operator cost under torch is bench_ops.py's and
# bench_ops_idle.py's. A benchmark: prints, never fails on time.
set -u
ROOT=${ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
B=$ROOT/${BUILD:-build}
P=$B/progs/fake_recfn
[ -x "$P" ] && [ -e "$B/libgradtrace.so" ] || { echo "bench_opcb: build first (make)"; exit 1; }
tmp=$(mktemp -d /tmp/gt-bench-opcb.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
best() { sort -n | head -1; }
bare=$("$P" --bench 2000000 | best)
ours=$(LD_PRELOAD=$B/libgradtrace.so GRADTRACE_FILE=$tmp/o.gtr "$P" --bench 2000000 | best)
lost=$("$B/gradtrace" convert -o "$tmp/o.json" "$tmp/o.gtr" 2>&1 | sed -n 's/.*; lost \([0-9]*\) events.*/\1/p')
awk -v b="$bare" -v o="$ours" -v l="${lost:-?}" 'BEGIN {
  printf "  operator loop without the agent: %.1f ns; capturing: %.1f ns: the agent adds %.1f ns per operator (%s records lost)\n", b, o, o - b, l }'
