#!/usr/bin/env bash
# Installs the trace consumers the Kineto-compatibility tests run against
# (tests/e2e/t_consumers_*.sh): HolisticTraceAnalysis and the TensorBoard
# profiler plugin's loader, from PyPI, into a virtual environment cached
# outside the repository. Reused when it imports; called by
# scripts/install-deps.sh.
#
# Why this shape: HTA 0.5 declares jupyterlab and pytest as dependencies
# and torch-tb-profiler declares tensorboard; none of them is needed to
# load traces and run the analyses (about 200 MB together), so both are
# installed --no-deps with the packages their trace code imports: numpy,
# pandas (< 3: HTA 0.5's critical path breaks on pandas 3), networkx,
# plotly, pydot and its pyparsing, psutil, pyyaml: about 45 MB of wheels
# (290 MB installed), a few seconds to install.
# Environment:
#   GRADTRACE_CONSUMERS_VENV  venv path (default ~/.cache/gradtrace/consumers-venv)
#   PYTHON_CONSUMERS          interpreter that creates the venv (default python3)
#
# Usage: scripts/install-consumers.sh [--quiet]
set -euo pipefail

venv="${GRADTRACE_CONSUMERS_VENV:-$HOME/.cache/gradtrace/consumers-venv}"
py="${PYTHON_CONSUMERS:-python3}"
quiet="${1:-}"

say() { [ "$quiet" = "--quiet" ] || echo "install-consumers: $*"; }

check() {
  "$venv/bin/python" - <<'PY' >/dev/null 2>&1
import hta.trace_analysis, hta.analyzers.critical_path_analysis
import torch_tb_profiler.profiler.loader
import pandas
assert int(pandas.__version__.split(".")[0]) < 3
PY
}

if [ -x "$venv/bin/python" ] && check; then
  say "HTA and torch-tb-profiler ready in $venv"
  exit 0
fi

say "creating $venv"
mkdir -p "$(dirname "$venv")"
"$py" -m venv --clear "$venv"
pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check)
"${pip[@]}" "numpy<3" "pandas>=1.5.2,<3" "networkx>=3.1" "plotly>=5.11" \
    "pydot>=1.3" pyparsing psutil pyyaml
"${pip[@]}" --no-deps "HolisticTraceAnalysis==0.5.0" "torch-tb-profiler==0.4.3"

if check; then
  say "HTA and torch-tb-profiler ready in $venv"
else
  echo "install-consumers: the consumers in $venv do not import" >&2
  "$venv/bin/python" -c 'import hta.trace_analysis, torch_tb_profiler.profiler.loader' >&2 || true
  exit 1
fi
