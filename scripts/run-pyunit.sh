#!/usr/bin/env bash
# Runs the Python package's own tests (tests/python/test_*.py: its rules,
# without the agent) with each interpreter given that exists: each file as
# a script (exit 0 passes, 77 skips: torch missing, which fails under CI),
# so that no test runner needs installing. pytest runs the same files.
#   scripts/run-pyunit.sh PYTHON...
set -u
cd "$(dirname "$0")/.."
rc=0
for py in "$@"; do
  [ -x "$py" ] || continue
  for t in tests/python/test_*.py; do
    out=$("$py" "$t" 2>&1); r=$?
    case $r in
      0) echo "PASS $t ($py)" ;;
      77) echo "SKIP $t ($py): $(printf '%s\n' "$out" | tail -1)" ;;
      *) echo "FAIL $t ($py), exit $r:"; printf '%s\n' "$out" | grep -v "triton not found" | tail -20; rc=1 ;;
    esac
  done
done
exit $rc
