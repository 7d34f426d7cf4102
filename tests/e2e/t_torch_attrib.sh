#!/usr/bin/env bash
# Per-layer attribution of backward nodes on Debian's torch 1.13, checked
# exactly against torch's own profiler in the same process: the demo model
# (3 training iterations) and torchvision's resnet18 (one training step).
set -u
. "$(dirname "$0")/torch/lib.sh"
PY=${PYTHON:-/usr/bin/python3}
torch_require "$PY" torchvision
rc=0
for c in small resnet18; do
  torch_case "$PY" "$c" || rc=1
done
exit $rc
