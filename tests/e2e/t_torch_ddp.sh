#!/usr/bin/env bash
# Wrapped models and distributed ranks on torch 2.x (the venv of
# scripts/install-torch2.sh), real processes under `gradtrace record`:
#   - DDP, two gloo ranks under python -m torch.distributed.run: files
#     named by the training script and rank, layer paths without
#     DDP's `module.`, and `--trigger layer=blocks.1,...,ranks=1` (the
#     plain path) fires on rank 1 only; a trigger naming no layer is
#     reported with the closest paths;
#   - DDP under torch.multiprocessing.spawn (no RANK): the rank comes from
#     torch.distributed, names the processes in the traces and their
#     files (renamed from the pid-only stem; the workers' python -c takes
#     the parent's script name), and a ranks=1 trigger fires on rank 1
#     only;
#   - torch.compile (aot_eager): the model is "Net", no `_orig_mod`, and
#     nothing from gradtrace on the job's stderr;
#   - checkpoint_wrapper: plain paths (torch 1.13).
set -u
. "$(dirname "$0")/daemon_lib.sh"
need "$B/gradtrace" "$B/gradtraced" "$B/libgradtrace.so"
GT=$B/gradtrace
TORCH_DIR=$ROOT/tests/e2e/torch
VENV=${GRADTRACE_TORCH2_VENV:-$HOME/.cache/gradtrace/torch2-venv}
PY2=$VENV/bin/python
PY1=${PYTHON:-/usr/bin/python3}
missing() { [ -n "${CI:-}" ] && die "$* (CI)"; skip "$*"; }
[ -x "$PY2" ] || missing "no torch 2.x venv at $VENV (scripts/install-torch2.sh)"
"$PY2" -c 'import torch, sys; import torch.distributed as d
sys.exit(not (torch.__version__.startswith("2.") and d.is_gloo_available()))' \
  || missing "$VENV lacks torch 2.x with gloo"
export OMP_NUM_THREADS=1
cd "$E2E_TMP"
check() { "$PY2" "$TORCH_DIR/check_wrapped.py" "$@"; }
free_port() { "$PY2" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# dist_record NAME ARGS...: `gradtrace record -o NAME ARGS...` (record's
# options, --, the command), output in NAME.stdout/stderr, every @PORT@
# in ARGS a fresh port for each try. Processes of torch 2.15 with a gloo
# process group sometimes abort after Python has finished ("terminate
# called without an active exception", no Python frame; 2 runs in 10
# here without any agent): such a run is tried again, at most twice. Any
# other failure fails the test.
dist_record() {
  local name=$1 try port a; shift
  for try in 1 2 3; do
    rm -rf "$name"
    port=$(free_port)
    local args=()
    for a in "$@"; do args+=("${a//@PORT@/$port}"); done
    "$GT" record -o "$name" "${args[@]}" >"$name.stdout" 2>"$name.stderr" && return 0
    grep -q "terminate called without an active exception" "$name.stderr" || break
    echo "(torch aborted at exit, try $try: again)"
  done
  die "$name failed: $(tail -20 "$name.stderr")"
}
TORCHRUN=("$PY2" -m torch.distributed.run --nproc_per_node 2 --master_port @PORT@)

echo "== torch.distributed.run, DDP, ranks=1 trigger on the plain path"
dist_record run --trigger layer=blocks.1,phase=backward,iteration=2,ranks=1 \
    --trigger layer=blocks.9 -- "${TORCHRUN[@]}" "$TORCH_DIR/wrapped.py" dist
files=$(ls run)
[ "$files" = "$(ls run | grep -E -- '^wrapped-rank1-pid[0-9]*-w1-blocks.1-backward-it2(\.pt\.trace)?\.json$')" ] \
  && [ -n "$files" ] || die "want one window file of rank 1, got: $files"
validate run/*.json
grep -q "trigger layer=blocks.9,.* matched no layer of the run; closest paths: blocks.0, blocks.1, blocks.2$" run.stderr \
  || die "no report of the unmatched trigger: $(tail -5 run.stderr)"

echo "== torch.distributed.run (python -u), DDP, full capture"
dist_record full -- "$PY2" -u -m torch.distributed.run --nproc_per_node 2 \
    --master_port @PORT@ "$TORCH_DIR/wrapped.py" dist
ls full/wrapped-rank0-pid*.json full/wrapped-rank1-pid*.json >/dev/null \
  || die "files not named by script and rank: $(ls full)"
validate full/wrapped-rank*.json
check paths full/wrapped-rank*.json || die "layer paths under DDP"
check ranks 0,1 full/wrapped-rank*.json || die "ranks under torch.distributed.run"

echo "== torch.multiprocessing.spawn, DDP"
dist_record spawn -- "$PY2" "$TORCH_DIR/wrapped.py" spawn
sf=$(sed -n 's/^  \(.*\.json\)$/\1/p' spawn.stderr)
[ "$(echo "$sf" | grep -c .)" = 2 ] || die "want two files under spawn: $(cat spawn.stderr)"
validate $sf
check paths $sf || die "layer paths under spawn"
check ranks 0,1 $sf || die "rank not learnt from torch.distributed"
# Named by rank, and by the parent's script (the workers run python -c).
echo "$sf" | grep -Eq -- '/wrapped-rank0-pid[0-9]*(\.pt\.trace)?\.json$' && echo "$sf" | grep -Eq -- '/wrapped-rank1-pid[0-9]*(\.pt\.trace)?\.json$' \
  || die "spawn files not named by script and rank: $sf"

echo "== torch.multiprocessing.spawn, DDP, ranks=1 trigger"
dist_record spawnt --trigger layer=blocks.1,phase=backward,iteration=2,ranks=1 \
    -- "$PY2" "$TORCH_DIR/wrapped.py" spawn
files=$(ls spawnt)
[ -n "$files" ] && [ "$files" = "$(ls spawnt | grep -E -- '^wrapped-rank1-pid[0-9]*-w1-blocks.1-backward-it2(\.pt\.trace)?\.json$')" ] \
  || die "want one window file of rank 1 under spawn, got: $files"
validate spawnt/*.json

echo "== torch.compile (aot_eager)"
"$GT" record -o comp -- "$PY2" "$TORCH_DIR/wrapped.py" compile >comp.stdout 2>comp.stderr \
  || die "compile failed: $(tail -20 comp.stderr)"
validate comp/wrapped-pid*.json
check compiled comp/wrapped-pid*.json || die "names under torch.compile"
# The job's own stderr, up to record's summary: nothing of gradtrace's.
sed '/^gradtrace: 1 trace file:$/,$d' comp.stderr >comp.job
grep -iE "gradtrace|global hooks" comp.job && die "gradtrace on the job's stderr"
[ -s comp.stdout ] && die "output on stdout: $(cat comp.stdout)"

# On 1.13 (the same package code serves 2.x), to keep the test short.
if "$PY1" -c "import torch.distributed.algorithms._checkpoint.checkpoint_wrapper" 2>/dev/null; then
  echo "== checkpoint_wrapper ($PY1)"
  "$GT" record -o ckpt -- "$PY1" "$TORCH_DIR/wrapped.py" ckpt >ckpt.stdout 2>ckpt.stderr \
    || die "ckpt failed: $(tail -20 ckpt.stderr)"
  validate ckpt/wrapped-pid*.json
  check paths ckpt/wrapped-pid*.json || die "layer paths with checkpoint_wrapper"
else
  [ -n "${CI:-}" ] && die "$PY1 lacks checkpoint_wrapper (CI)"
  echo "(no checkpoint_wrapper in $PY1: skipped that case)"
fi
echo ok
