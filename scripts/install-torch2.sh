#!/usr/bin/env bash
# Installs a CPU-usable PyTorch 2.x into a virtual environment cached outside
# the repository, for the torch 2.x autograd end-to-end tests
# (tests/e2e/t_torch2_*.sh). Reused when it already imports; called by
# scripts/install-deps.sh.
#
# Why this shape: the only PyPI Linux x86-64 wheel of torch 2.x is the CUDA
# build (2.15.0+cu132 when written), and its declared dependencies pull
# several GB of nvidia-* wheels plus triton. Importing torch does need the
# CUDA libraries (libtorch_python links libtorch_cuda, which links cuDNN,
# NCCL, cuSPARSELt, cuFile, NVSHMEM, cuBLAS, ...), but running on the CPU
# never calls them. The lightest install that imports and runs on the CPU:
#   - torch --no-deps, plus the pure-Python packages it imports;
#   - the four nvidia wheels the CUDA 13 toolkit in $CUDA_HOME does not
#     provide or provides too old (cufile, cusparselt, nvshmem, and nccl:
#     the toolkit's NCCL lacks ncclCommResume), pinned as torch's METADATA
#     pins them, --no-deps (~700 MB);
#   - every other CUDA library symlinked from $CUDA_HOME/lib64 into
#     site-packages/nvidia/cu13/lib, a directory on torch's RPATH, so no
#     LD_LIBRARY_PATH is needed.
# Without a CUDA 13 toolkit the script falls back to the full dependency set
# (a plain pip install of torch). It verifies the result by running a small
# forward/backward on the CPU.
# Environment:
#   GRADTRACE_TORCH2_VENV   venv path (default ~/.cache/gradtrace/torch2-venv)
#   GRADTRACE_TORCH2_VERSION torch version to pin (default: newest on PyPI)
#   PYTHON                  interpreter that creates the venv (default python3)
#
# Usage: scripts/install-torch2.sh [--quiet]
set -euo pipefail

venv="${GRADTRACE_TORCH2_VENV:-$HOME/.cache/gradtrace/torch2-venv}"
py="${PYTHON_TORCH2:-python3}"
version="${GRADTRACE_TORCH2_VERSION:-}"
quiet="${1:-}"

say() { [ "$quiet" = "--quiet" ] || echo "install-torch2: $*"; }

check() {
  "$venv/bin/python" - <<'PY' >/dev/null 2>&1
import torch
x = torch.randn(4, 3, requires_grad=True)
torch.nn.functional.gelu(x @ torch.randn(3, 2)).sum().backward()
assert x.grad is not None and torch.__version__.startswith("2.")
PY
}

if [ -x "$venv/bin/python" ] && check; then
  say "torch $("$venv/bin/python" -c 'import torch; print(torch.__version__)') ready in $venv"
  exit 0
fi

say "creating $venv"
mkdir -p "$(dirname "$venv")"
"$py" -m venv --clear "$venv"
pip=("$venv/bin/python" -m pip install --quiet --disable-pip-version-check)

# Pure-Python packages torch 2.x imports at start-up (its Requires-Dist
# minus the CUDA wheels and triton, which only GPU use needs).
"${pip[@]}" filelock typing-extensions sympy mpmath networkx jinja2 markupsafe fsspec setuptools numpy pillow
spec=torch
[ -n "$version" ] && spec="torch==$version"
"${pip[@]}" --no-deps "$spec"
# torchvision for the resnet18 test: also a CUDA wheel, and without
# --no-deps it would pull torch's full dependency set again. The newest
# torchvision matches the newest torch; with a pinned torch, pin
# GRADTRACE_TORCHVISION_VERSION to the matching release.
tv=torchvision
[ -n "${GRADTRACE_TORCHVISION_VERSION:-}" ] && tv="torchvision==$GRADTRACE_TORCHVISION_VERSION"
"${pip[@]}" --no-deps "$tv" || say "torchvision not installed (resnet test will skip)"

site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
cuda_home="${CUDA_HOME:-/usr/local/cuda}"
# torch/version.py: cuda: Optional[str] = '13.2' (None on CPU-only builds).
cuda_major="$(sed -n "s/^cuda.*= *'\([0-9]*\)\..*/\1/p" "$site/torch/version.py")"
if [ -n "$cuda_major" ] && [ -e "$cuda_home/lib64/libcudart.so.$cuda_major" ]; then
  # The nvidia wheels torch pins that the toolkit cannot stand in for.
  pins=$(sed -n 's/^Requires-Dist: \(nvidia-\(cusparselt\|nvshmem\|nccl\)-cu[0-9]*==[0-9.]*\).*/\1/p' \
         "$site"/torch-*.dist-info/METADATA)
  "${pip[@]}" --no-deps $pins nvidia-cufile
  lib="$site/nvidia/cu$cuda_major/lib"
  mkdir -p "$lib"
  for f in "$cuda_home"/lib64/lib*.so.[0-9]*; do
    b=$(basename "$f")
    case $b in *.so.*.*) continue ;; esac            # SONAME links only
    ls "$site"/nvidia/*/lib/"$b" >/dev/null 2>&1 || ln -sf "$f" "$lib/$b"
  done
else
  say "no CUDA $cuda_major toolkit in $cuda_home: installing torch's full dependencies"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$spec"
fi

if check; then
  say "torch $("$venv/bin/python" -c 'import torch; print(torch.__version__)') ready in $venv"
else
  echo "install-torch2: torch in $venv does not run on the CPU" >&2
  exit 1
fi
