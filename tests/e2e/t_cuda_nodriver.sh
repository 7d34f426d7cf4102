#!/usr/bin/env bash
# Without CUDA in the process nothing CUDA-related runs: preloaded into a
# program that never touches CUDA, the agent maps no CUPTI and starts no
# CUDA thread. Preloaded into a program that calls the CUDA runtime on a
# machine without a GPU driver: the program runs exactly as without the
# agent (same exit status, nothing on stdout), the agent points
# CUDA_INJECTION64_PATH at itself, and the stream holds exactly one
# warning saying CUPTI failed (error 999), and no GPU records.
set -u
B=${BUILD:-build}
agent=$PWD/$B/libgradtrace.so
prog=$B/progs/cuda_nodriver
dump=$B/progs/cuda_gtr_dump
tmp=${E2E_TMP:-$(mktemp -d)}
for f in "$agent" "$prog" "$dump"; do
  [ -x "$f" ] || [ -f "$f" ] || { echo "missing $f (run make)"; exit 77; }
done

fail() { echo "FAIL: $*"; exit 1; }
GRADTRACE_FILE=$tmp/plain.gtr LD_PRELOAD=$agent /bin/sh -c \
  'cat /proc/$$/maps' >"$tmp/plain.maps" \
  || fail "a plain program failed under the agent"
grep -q libgradtrace "$tmp/plain.maps" || fail "the agent was not loaded into /bin/sh"
grep -q libcupti "$tmp/plain.maps" && fail "CUPTI loaded into a process without CUDA"

"$prog" >"$tmp/base.out" 2>"$tmp/base.err"
base_rc=$?
[ $base_rc -eq 77 ] && { echo "cuda_nodriver built without the CUDA runtime"; exit 77; }
grep -q '^devices=0 ' "$tmp/base.err" || {
  echo "a CUDA device is present: this test is for machines without a driver"; exit 77; }

GRADTRACE_FILE=$tmp/t.gtr LD_PRELOAD=$agent "$prog" >"$tmp/out" 2>"$tmp/err"
rc=$?
cat "$tmp/err"
[ $rc -eq $base_rc ] || fail "exit status $rc with the agent, $base_rc without"
[ -s "$tmp/out" ] && fail "the agent wrote to stdout: $(head -c 200 "$tmp/out")"
real_agent=$(realpath "$agent")
grep -q "injection=$real_agent\$" "$tmp/err" || fail "CUDA_INJECTION64_PATH not set to the agent"

"$dump" "$tmp/t.gtr" >"$tmp/dump" || fail "trace does not decode"
n_warn=$(grep -c $'^warning\t' "$tmp/dump")
n_cupti=$(grep -c $'^warning\t999\tCUPTI .* failed at agent/cupti.c:[0-9]*: ' "$tmp/dump")
grep $'^warning\t' "$tmp/dump"
[ "$n_warn" -eq 1 ] || fail "expected exactly one warning, got $n_warn"
[ "$n_cupti" -eq 1 ] || fail "the warning does not name the failed CUPTI call, file and line"
grep -qE $'^(kernel|memcpy|memset|api|ext)\t' "$tmp/dump" && fail "GPU records without a GPU"
grep -q "^summary.* corrupt=0 " "$tmp/dump" || fail "corrupt chunks"
echo "ok: one CUPTI warning, clean run"
