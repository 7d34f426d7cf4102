#!/usr/bin/env bash
# `gradtrace report` and warm-up (issue 24, items 1 and 3), on traces
# written here with known iteration times (report/gen_steps.py):
#   - a slow first step (torch.compile: 4.7 s against 47 ms) is left out of
#     every figure and named on one line; --include-warmup and
#     --iterations 0- keep it; open ranges (A-, -B) work;
#   - a slow step in the middle is left out too; a run of one iteration,
#     of equal iterations, or of noise within 1.5x loses none;
#   - a hint resting on one (warm-up) iteration is gone by default;
#   - --iterations A-B: no row's longest node is longer than its own
#     backward (the top node follows the selection), and a range past the
#     end exits 2 with one line naming the iterations the trace has.
set -u
B=$ROOT/$BUILD
die() { echo "FAIL: $*" >&2; exit 1; }
[ -x "$B/gradtrace" ] || die "build/gradtrace missing"
cd "$E2E_TMP"
gen() { python3 "$ROOT/tests/e2e/report/gen_steps.py" "$@" || die "gen $*"; }
# jq-free field reader: report JSON -> "count total_ms left_out.count steps"
iters() {
  "$B/gradtrace" report --format json "$@" | python3 -c '
import json, sys
j = json.load(sys.stdin)["iterations"]
lo = j["left_out"]
print(j["count"], "%.1f" % j["total_ms"], lo["count"], ",".join(str(s) for s in lo["steps"]))'
}

gen first.json 4700,47,48,46,47,49
got=$(iters first.json); [ "$got" = "5 237.0 1 0" ] || die "slow first step: want '5 237.0 1 0', got '$got'"
"$B/gradtrace" report first.json >first.txt || die "table"
grep -q "^5 iterations, 47.400 ms per iteration" first.txt || die "headline: $(grep iterations first.txt)"
[ "$(grep -c "^warm-up left out: ProfilerStep#0 " first.txt)" = 1 ] || die "no warm-up line: $(cat first.txt)"
grep -q -- "--include-warmup" first.txt || die "the line says how to keep it"
got=$(iters --include-warmup first.json); [ "$got" = "6 4937.0 0 " ] || die "--include-warmup: got '$got'"
got=$(iters --iterations 0- first.json); [ "$got" = "6 4937.0 0 " ] || die "--iterations 0-: got '$got'"
got=$(iters --iterations 1- first.json); [ "$got" = "5 237.0 0 " ] || die "--iterations 1-: got '$got'"
got=$(iters --iterations -1 first.json); [ "$got" = "2 4747.0 0 " ] || die "--iterations -1: got '$got'"
grep -q "warm-up" <("$B/gradtrace" report --include-warmup first.json) && die "warm-up line with --include-warmup"

gen middle.json 10,10.2,9.9,10.1,55,10,10.3,9.8
got=$(iters middle.json); [ "$got" = "7 70.3 1 4" ] || die "slow middle step: want '7 70.3 1 4', got '$got'"
gen one.json 4700
got=$(iters one.json); [ "$got" = "1 4700.0 0 " ] || die "one iteration: got '$got'"
gen equal.json 5,5,5,5,5
got=$(iters equal.json); [ "$got" = "5 25.0 0 " ] || die "equal iterations: got '$got'"
gen noisy.json 12.4,7.4,7.1,12.9,9.8,11.0
got=$(iters noisy.json); [ "$got" = "6 60.6 0 " ] || die "noise within 1.5x: got '$got'"

# A backward-heavy warm-up iteration is no steady-state finding.
gen heavy.json 100,20,20,20,20 --bwd-heavy-first
"$B/gradtrace" report heavy.json >heavy.txt || die "heavy"
grep -q "bwd-heavy" heavy.txt && die "a hint from one warm-up iteration: $(grep bwd-heavy heavy.txt)"
"$B/gradtrace" report --include-warmup heavy.json | grep -q "bwd-heavy" \
  || die "with the warm-up, the hint is there (the test can tell)"

# --iterations: the top node is the selection's own.
"$B/gradtrace" report --format json --iterations 1-3 heavy.json | python3 -c '
import json, sys
for l in json.load(sys.stdin)["layers"]:
    if l["top_node_ms"] > l["bwd_self_ms"] + 1e-6 or l["top_node"] != "BmmBackward0":
        sys.exit("%s: top node %s %s ms of its own backward %s ms" % (
            l["path"], l["top_node"], l["top_node_ms"], l["bwd_self_ms"]))
' || die "top node not filtered by --iterations"
"$B/gradtrace" report --iterations 1-3 heavy.json | grep -E "takes [0-9.]+ ms/it of its own backward [0-9.]+ ms/it \(([0-9]{4,}|[2-9][0-9]{2}|1[1-9][0-9]|10[1-9])%\)" \
  && die "an impossible share"

# A range past the end: one line, exit 2, naming what the trace has.
"$B/gradtrace" report --iterations 50-60 first.json >past.out 2>past.err; rc=$?
[ $rc -eq 2 ] || die "range past the end: exit $rc, want 2"
[ "$(wc -l <past.err)" = 1 ] && grep -q "^gradtrace report: --iterations 50-60: .*ProfilerStep#0\.\.#5 (6 iterations)" past.err \
  || die "range past the end: $(cat past.err)"
[ -s past.out ] && die "a table after the error: $(cat past.out)"
"$B/gradtrace" report --iterations 3-1 first.json 2>/dev/null; [ $? -eq 2 ] || die "3-1 must be a usage error"
"$B/gradtrace" report --iterations - first.json 2>/dev/null; [ $? -eq 2 ] || die "'-' must be a usage error"
echo ok
