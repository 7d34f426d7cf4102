# Shared by tests/e2e/t_consumers_*.sh: the trace consumers (HTA, the
# TensorBoard profiler plugin's loader) in the venv that
# scripts/install-consumers.sh makes.
CONSUMERS_VENV=${GRADTRACE_CONSUMERS_VENV:-$HOME/.cache/gradtrace/consumers-venv}
CPY=$CONSUMERS_VENV/bin/python
. "$ROOT/tests/e2e/require.sh"
CDIR=$ROOT/tests/e2e/consumers

# consumers_require: exit 77 (skip) when the venv cannot import them, but
# fail under CI, whose install step makes it (a skip would hide that).
consumers_require() {
  "$CPY" -c 'import hta.trace_analysis, torch_tb_profiler.profiler.loader' 2>/dev/null ||
    e2e_missing "no trace consumers in $CONSUMERS_VENV (scripts/install-consumers.sh)"
}
