#!/usr/bin/env bash
# The same attribution checks on PyPI torch 2.x, from the virtual
# environment scripts/install-torch2.sh keeps outside the repository.
# Skips (77) when that environment is absent. The two-thread case is left
# out here: torch 2.x's legacy profiler cannot run in two threads at once
# (Kineto refuses a second thread's registration), so it has no ground
# truth to compare with; the agent's own thread handling is the same code
# that t_torch_cases.sh checks on 1.13.
set -u
. "$(dirname "$0")/torch/lib.sh"
VENV=${GRADTRACE_TORCH2_VENV:-$HOME/.cache/gradtrace/torch2-venv}
PY=$VENV/bin/python
if [ ! -x "$PY" ]; then
  echo "skip: no torch 2.x venv at $VENV (scripts/install-torch2.sh)"
  exit 77
fi
torch_require "$PY" torchvision
"$PY" -c 'import torch, sys; sys.exit(not torch.__version__.startswith("2."))' || {
  echo "skip: $VENV does not hold torch 2.x"; exit 77; }
rc=0
for c in small resnet18 custom nested twice nograd; do
  torch_case "$PY" "$c" || rc=1
done
torch_case "$PY" small --no-modules || rc=1
exit $rc
