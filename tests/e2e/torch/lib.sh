# Shared by tests/e2e/t_torch*.sh: runs an attribution case from
# tests/e2e/torch/attrib.py with the agent preloaded, capturing into a .gtr
# file (no daemon), then compares the file with torch's own profiler data
# (tests/e2e/torch/check.py).
ROOT=${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)}
BUILD=${BUILD:-build}
E2E_TMP=${E2E_TMP:-$(mktemp -d /tmp/gt-e2e.XXXXXX)}
AGENT=$ROOT/$BUILD/libgradtrace.so
TORCH_DIR=$ROOT/tests/e2e/torch
. "$ROOT/tests/e2e/require.sh"

# torch_require PY [modules...]: exit 77 (skip) when PY lacks them, but
# fail when CI is set (CI installs them: a skip there hides a missing
# install step); fail when the agent is not built (a build problem).
torch_require() {
  local py=$1; shift
  if [ ! -f "$AGENT" ]; then
    echo "agent not built: $AGENT" >&2
    exit 1
  fi
  local m
  for m in torch "$@"; do
    "$py" -c "import $m" 2>/dev/null || e2e_missing "$py cannot import $m"
  done
}

# torch2_require: sets PY to the torch 2.x venv's interpreter (VENV,
# GRADTRACE_TORCH2_VENV), or exits 77 (fails in CI) without one.
torch2_require() {
  VENV=${GRADTRACE_TORCH2_VENV:-$HOME/.cache/gradtrace/torch2-venv}
  PY=$VENV/bin/python
  [ -x "$PY" ] || e2e_missing "no torch 2.x venv at $VENV (scripts/install-torch2.sh)"
  torch_require "$PY" "$@"
  "$PY" -c 'import torch, sys; sys.exit(not torch.__version__.startswith("2."))' ||
    e2e_missing "$VENV does not hold torch 2.x"
}

# torch_case PY CASE [--no-modules]: one scenario, end to end.
torch_case() {
  local py=$1 case=$2 mode=${3:-}
  local out=$E2E_TMP/$case$mode
  local pp=$ROOT/python
  [ "$mode" = "--no-modules" ] && pp=
  rm -f "$out.gtr" "$out.json"
  echo "== $case $mode ($py)"
  env LD_PRELOAD="$AGENT" GRADTRACE_FILE="$out.gtr" GRADTRACE_CAPTURE=1 \
      PYTHONPATH="$pp" "$py" "$TORCH_DIR/attrib.py" "$case" "$out.json" \
      >"$out.stdout" 2>"$out.stderr" || {
    echo "attrib.py $case failed:"; cat "$out.stderr"; return 1; }
  # The agent must never print to the host's stdout.
  if [ -s "$out.stdout" ]; then
    echo "unexpected stdout:"; cat "$out.stdout"; return 1
  fi
  "$py" "$TORCH_DIR/check.py" "$out.json" "$out.gtr" $mode
}
