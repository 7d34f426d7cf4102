#!/usr/bin/env bash
# Installs what gradtrace's build, tests, fuzz targets and demo need, with
# apt-get only. Idempotent: when every package is already present it only
# checks (dpkg-query) and returns within a second, touching nothing.
#
# Usage: scripts/install-deps.sh [--quiet]
set -euo pipefail

pkgs=(
  build-essential pkg-config make
  libuv1-dev libcjson-dev libzstd-dev zstd libcriterion-dev
  clang libclang-rt-14-dev   # libFuzzer targets and sanitizer runtimes
  python3-torch python3-torchvision python3-numpy
  python3-dev                # Python.h: the module hooks in C (_gthooks)
  libtorch-dev               # the C++ training program of the NVTX layer tests
  util-linux                 # setpriv: the cross-user refusal test
  cppcheck                   # make analyze
  valgrind                   # make bench: instructions per step (bench_instr.py)
  linux-perf                 # make bench: where operator capture goes (bench_ops_split.py)
  librsvg2-bin               # rsvg-convert: the report --svg rendering test
  libfaketime                # a per-"host" CLOCK_REALTIME in the multi-host tests
)

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  [ "${1:-}" = "--quiet" ] || echo "install-deps: all ${#pkgs[@]} packages present"
else
  echo "install-deps: installing ${missing[*]}"
  if [ "$(id -u)" -ne 0 ]; then
    SUDO=sudo
  else
    SUDO=
  fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Torch 2.x, which Debian lacks, in a virtual environment cached outside the
# repository (reused when it imports): the autograd tests run against it as
# well as against Debian's 1.13. GRADTRACE_SKIP_TORCH2=1 skips it (those
# tests then say they were skipped); in CI a failure here is fatal, so CI
# never passes without having tested torch 2.x.
if [ "${GRADTRACE_SKIP_TORCH2:-0}" != 1 ]; then
  if ! "$(dirname "$0")/install-torch2.sh" "${1:-}"; then
    echo "install-deps: torch 2.x could not be installed (see above)" >&2
    [ -z "${CI:-}" ] || exit 1
  fi
fi

# The trace consumers (HolisticTraceAnalysis, the TensorBoard profiler
# plugin's loader) for tests/e2e/t_consumers_*.sh, in a venv cached the
# same way (scripts/install-consumers.sh: ~45 MB of wheels, no jupyterlab
# or tensorboard). GRADTRACE_SKIP_CONSUMERS=1 skips it; fatal in CI.
if [ "${GRADTRACE_SKIP_CONSUMERS:-0}" != 1 ]; then
  if ! "$(dirname "$0")/install-consumers.sh" "${1:-}"; then
    echo "install-deps: the trace consumers could not be installed (see above)" >&2
    [ -z "${CI:-}" ] || exit 1
  fi
fi
