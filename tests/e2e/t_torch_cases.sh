#!/usr/bin/env bash
# Attribution edge cases on Debian's torch 1.13, each checked against
# torch's profiler: a custom autograd.Function (PyNode), nested modules, a
# module called twice in one forward (two calls, nodes on the right call),
# two Python threads training different models at once, and no_grad
# regions (module scopes but no nodes).
set -u
. "$(dirname "$0")/torch/lib.sh"
PY=${PYTHON:-/usr/bin/python3}
torch_require "$PY"
rc=0
for c in custom nested twice threads nograd; do
  torch_case "$PY" "$c" || rc=1
done
exit $rc
