#!/usr/bin/env bash
# Runs every end-to-end script tests/e2e/t_*.sh with a time limit each.
# A script exits 0 (pass), 77 (skip: a prerequisite is missing, and it says
# which on stderr) or anything else (fail). Environment for the scripts:
#   BUILD   build directory relative to the repo root (default build)
#   PYTHON  interpreter with torch (default /usr/bin/python3)
#   E2E_TMP a fresh private directory for this script
# The limit is E2E_TIMEOUT seconds, else a script's own "# e2e-timeout: N"
# line (one that compiles models needs more), else 300.
# Usage: tests/e2e/run.sh [pattern...]   (a script runs if its name
# contains any of the patterns; no pattern: every script)
set -u
cd "$(dirname "$0")/../.."
export BUILD=${BUILD:-build} PYTHON=${PYTHON:-/usr/bin/python3}
export ROOT=$PWD
patterns=("$@")
pass=0 fail=0 skip=0 failed=()
for t in tests/e2e/t_*.sh; do
  [ -e "$t" ] || continue
  name=$(basename "$t" .sh)
  if [ ${#patterns[@]} -gt 0 ]; then
    hit=0
    for p in "${patterns[@]}"; do [[ "$name" == *$p* ]] && hit=1; done
    [ $hit -eq 1 ] || continue
  fi
  E2E_TMP=$(mktemp -d /tmp/gt-e2e.XXXXXX)
  export E2E_TMP
  start=$(date +%s%N)
  own=$(sed -n 's/^# e2e-timeout: \([0-9][0-9]*\)$/\1/p' "$t" | head -n 1)
  timeout -k 10 "${E2E_TIMEOUT:-${own:-300}}" bash "$t" >"$E2E_TMP/log" 2>&1
  rc=$?
  ms=$((($(date +%s%N) - start) / 1000000))
  secs=$((ms / 1000)).$((ms % 1000 / 100))
  case $rc in
    0) pass=$((pass + 1)); echo "PASS $name (${secs}s)"; rm -rf "$E2E_TMP" ;;
    77) skip=$((skip + 1)); echo "SKIP $name: $(tail -n 1 "$E2E_TMP/log")"; rm -rf "$E2E_TMP" ;;
    *) fail=$((fail + 1)); failed+=("$name"); echo "FAIL $name (exit $rc, ${secs}s), last lines:"
       # The reason first: a daemon log printed after it would push it
       # out of the tail.
       grep -m 5 -E '^FAIL|MISMATCH' "$E2E_TMP/log" | sed 's/^/    /'
       tail -n 25 "$E2E_TMP/log" | sed 's/^/    /' ;;
  esac
done
echo "e2e: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
