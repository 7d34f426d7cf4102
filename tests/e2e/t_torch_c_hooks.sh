#!/usr/bin/env bash
# The module hooks in C (python/gradtrace/_hooks.c, built by make) give
# exactly the scopes the Python hooks do (tests/e2e/torch/hooks_c.py), on
# torch 1.13 and, when its venv exists, torch 2.x; and the package uses
# them when they load, its Python hooks when GRADTRACE_C_HOOKS=0.
set -u
. "$(dirname "$0")/torch/lib.sh"
PY=${PYTHON:-/usr/bin/python3}
torch_require "$PY"
VENV=${GRADTRACE_TORCH2_VENV:-$HOME/.cache/gradtrace/torch2-venv}
pys=("$PY")
[ -x "$VENV/bin/python" ] && pys+=("$VENV/bin/python")
rc=0
for py in "${pys[@]}"; do
  echo "== $py"
  env LD_PRELOAD="$AGENT" GRADTRACE_FILE="$E2E_TMP/c.gtr" PYTHONPATH="$ROOT/python" \
    "$py" "$TORCH_DIR/hooks_c.py" || rc=1
  # The C nn.Module.__call__ gives way to the Python one when dynamo
  # compiles (2.x; 1.13 has no torch.compile and says so), and TorchScript
  # and FX work through the C form.
  got=$(env LD_PRELOAD="$AGENT" GRADTRACE_FILE="$E2E_TMP/cc.gtr" GRADTRACE_CAPTURE=1 \
          PYTHONPATH="$ROOT/python" "$py" "$TORCH_DIR/c_call_compile.py" 2>&1 |
        grep -v "triton not found")
  case "$got" in
    ok*) echo "compile: $got" ;;
    *) echo "compile: $got"; rc=1 ;;
  esac
  for v in 1 0; do
    got=$(env LD_PRELOAD="$AGENT" GRADTRACE_FILE="$E2E_TMP/c$v.gtr" GRADTRACE_C_HOOKS=$v \
            PYTHONPATH="$ROOT/python" "$py" -c '
import gradtrace._scopes as S
print("C" if type(S._fast_pre).__name__ == "builtin_function_or_method" else "python")')
    want=$([ $v = 1 ] && echo C || echo python)
    [ "$got" = "$want" ] || { echo "GRADTRACE_C_HOOKS=$v: $got hooks, want $want"; rc=1; }
  done
done
exit $rc
