#!/usr/bin/env bash
# HTA and the TensorBoard profiler plugin on a real two-rank torch run
# (DDP over gloo under torch.multiprocessing.spawn, `gradtrace record`):
# HTA keeps both ranks (it reads each file's rank with "rank":\s+(\d+))
# and get_profiler_steps gives the files' ProfilerStep#N; the plugin's
# loader takes both files by name, finds the same steps, an operator row
# per aten operator with the trace's call count (agent/ops.c), and
# computes no negative time (the "-18446744073709551616 us" step of a
# trace it could not read).
set -u
. "$(dirname "$0")/daemon_lib.sh"
. "$ROOT/tests/e2e/consumers/lib.sh"
consumers_require
need "$B/gradtrace" "$B/gradtraced" "$B/libgradtrace.so"
VENV=${GRADTRACE_TORCH2_VENV:-$HOME/.cache/gradtrace/torch2-venv}
PY=$VENV/bin/python
[ -x "$PY" ] || PY=${PYTHON:-/usr/bin/python3}
"$PY" -c 'import torch.distributed as d, sys; sys.exit(not d.is_gloo_available())' \
  || { [ -n "${CI:-}" ] && die "$PY lacks torch with gloo (CI)"; skip "$PY lacks torch with gloo"; }
export OMP_NUM_THREADS=1
cd "$E2E_TMP"
# torch's gloo processes sometimes abort after Python finished (see
# t_torch_ddp.sh): such a run is tried again, at most twice.
for try in 1 2 3; do
  rm -rf spawn
  "$B/gradtrace" record -o spawn --ops -- "$PY" "$ROOT/tests/e2e/torch/wrapped.py" spawn \
    >spawn.stdout 2>spawn.stderr && break
  grep -q "terminate called without an active exception" spawn.stderr && [ $try -lt 3 ] \
    || die "spawn failed: $(tail -20 spawn.stderr)"
done
files=$(ls spawn/*.json)
[ "$(echo "$files" | grep -c '\.pt\.trace\.json$')" = 2 ] || die "want two .pt.trace.json files: $files"
validate $files
"$CPY" "$CDIR/check_hta.py" ranks spawn 0,1 | grep '^hta:' || die "HTA"
"$CPY" "$CDIR/check_tb.py" --no-gpu $files 2>/dev/null || die "TensorBoard plugin"
echo ok
