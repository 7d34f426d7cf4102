#!/usr/bin/env bash
# Runs every benchmark and prints its figures. Benchmarks never fail on
# time; a non-zero exit here means a benchmark could not run at all.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build} PYTHON=${PYTHON:-/usr/bin/python3}
export BUILD PYTHON ROOT=$PWD
status=0
for b in "$BUILD"/bench/bench_*; do
  [ -x "$b" ] || continue
  echo "== $(basename "$b")"
  "$b" || { echo "   (exit $?)"; status=1; }
done
for s in tests/bench/bench_*.sh tests/bench/bench_*.py; do
  [ -e "$s" ] || continue
  echo "== $(basename "$s")"
  case $s in
    *.sh) bash "$s" ;;
    *.py) "$PYTHON" "$s" ;;
  esac || { echo "   (exit $?)"; status=1; }
done
exit $status
