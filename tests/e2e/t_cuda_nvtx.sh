#!/usr/bin/env bash
# NVTX through the injection path, end to end: tests/progs/nvtx_ranges
# (built against the toolkit's nvtx3 headers, no CUDA linked) runs with
# only LD_PRELOAD set; the agent sets NVTX_INJECTION64_PATH to itself,
# NVTX loads it and every range arrives in the stream as an NVTX scope,
# in order and properly nested; then, when the converter is built, the
# ranges are in the Chrome trace too.
set -u
B=${BUILD:-build}
agent=$PWD/$B/libgradtrace.so
prog=$B/progs/nvtx_ranges
dump=$B/progs/cuda_gtr_dump
tmp=${E2E_TMP:-$(mktemp -d)}
for f in "$agent" "$prog" "$dump"; do
  [ -e "$f" ] || { echo "missing $f (run make)"; exit 77; }
done
fail() { echo "FAIL: $*"; exit 1; }

env -u NVTX_INJECTION64_PATH GRADTRACE_FILE=$tmp/t.gtr LD_PRELOAD=$agent \
  "$prog" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 77 ] && { cat "$tmp/err"; exit 77; }
[ $rc -eq 0 ] || { cat "$tmp/err"; fail "nvtx_ranges exited $rc"; }
[ -s "$tmp/out" ] && fail "stdout not empty"
"$dump" "$tmp/t.gtr" >"$tmp/dump" || fail "trace does not decode"

# Scope records in stream order (tab-separated; kind 2 = GT_SCOPE_NVTX),
# without their timestamps.
grep -E $'^(begin|end|instant)\t' "$tmp/dump" | cut -f1-4 | sed -E $'s/\t[0-9]+$//' >"$tmp/got"
while IFS='|' read -r line; do printf '%s\n' "${line//|/$'\t'}"; done >"$tmp/want" <<'W'
begin|2|train_step|-
begin|2|prefetch|-
begin|2|block.0|-
begin|2|forward|-
instant|mid-forward
end|2|forward
end|2|block.0
begin|2|gemm tile|kernels
end|2|gemm tile
end|2|prefetch
begin|2|aten::addmm, seq = 7|-
end|2|aten::addmm, seq = 7
end|2|train_step
W
diff -u "$tmp/want" "$tmp/got" || fail "NVTX scopes differ from the program's ranges"
# Timestamps never go back.
grep -E $'^(begin|end|instant)\t' "$tmp/dump" | awk -F'\t' '{print $NF}' | sort -c -n \
  || fail "timestamps out of order"

gt=$B/gradtrace
if [ -x "$gt" ]; then
  "$gt" convert "$tmp/t.gtr" -o "$tmp/t.json" >"$tmp/conv.out" 2>&1 \
    || { cat "$tmp/conv.out"; fail "gradtrace convert failed"; }
  py=$(command -v python3)
  "$py" - "$tmp"/t*.json <<'P' || fail "ranges missing from the Chrome trace"
import json, sys
names = set()
for path in sys.argv[1:]:
    with open(path) as f:
        t = json.load(f)
    for e in t["traceEvents"]:
        if e.get("ph") in ("X", "B", "i", "I"):
            names.add(e.get("name", ""))
want = ["train_step", "prefetch", "block.0", "forward", "gemm tile",
        "aten::addmm, seq = 7"]
missing = [w for w in want if not any(w in n for n in names)]
if missing:
    print("missing from trace:", missing, file=sys.stderr)
    sys.exit(1)
P
  if [ -f tests/tools/validate_trace.py ]; then
    python3 tests/tools/validate_trace.py "$tmp"/t*.json || fail "trace invalid"
  fi
  echo "ok: NVTX ranges in stream and trace"
else
  echo "ok: NVTX ranges in stream (converter not built: trace not checked)"
fi
