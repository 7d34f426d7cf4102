#!/usr/bin/env bash
# The operator callback pauses while nothing is captured and resumes with
# the next capture (agent/ops.c), without torch: tests/progs/fake_recfn
# plays libtorch's RecordFunction (addGlobalCallback, disable/reenable,
# callbacks taken at each operator's start). With GRADTRACE_OPS=1, capture
# on, off, on again:
# the agent registers once, pauses once (at the first operator after the
# stop), resumes once (at gt_capture_start), and the trace holds exactly
# the operators of the two captures, each under its own name, those whose
# names are built in one reused buffer (as libtorch's evaluate_function
# ones are) included. t_torch_ops checks the same on torch 1.13 and 2.x.
set -u
. "$(dirname "$0")/daemon_lib.sh"
P=$B/progs/fake_recfn
need "$B/gradtrace" "$B/libgradtrace.so" "$P"
cd "$E2E_TMP"
LD_PRELOAD=$B/libgradtrace.so GRADTRACE_FILE=$E2E_TMP/ops.gtr GRADTRACE_OPS=1 "$P" res \
  >out 2>err || die "fake_recfn exited $?: $(cat err)"
[ -s out ] && die "output on stdout"
[ -s err ] && die "output on stderr: $(cat err)"
got=$(cat res)
[ "$got" = "registered 1 disables 1 reenables 1 starts 21" ] ||
  die "callback calls: $got"
"$B/gradtrace" convert --quiet -o ops.pt.trace.json ops.gtr || die "convert"
validate ops.pt.trace.json
names=$(python3 -c 'import json,sys,collections
c = collections.Counter(e["name"] for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("cat") == "cpu_op")
print(" ".join("%s=%d" % kv for kv in sorted(c.items())))' ops.pt.trace.json)
[ "$names" = "autograd::engine::evaluate_function: AddmmBackward0=5 autograd::engine::evaluate_function: TBackward0=5 fake::captured_again=5 fake::captured_first=5" ] ||
  die "cpu_op events: $names"
# Operators are opt-in: by default (and with GRADTRACE_OPS=0) the callback
# is never registered and nothing is recorded.
for v in "" 0; do
  LD_PRELOAD=$B/libgradtrace.so GRADTRACE_FILE=$E2E_TMP/off$v.gtr GRADTRACE_OPS=$v \
    "$P" res-off >/dev/null 2>&1 || die "fake_recfn (GRADTRACE_OPS=$v)"
  [ "$(cat res-off)" = "registered 0 disables 0 reenables 0 starts 0" ] ||
    die "GRADTRACE_OPS='$v': $(cat res-off)"
done
echo "ok: $got; $names"
