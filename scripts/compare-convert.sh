#!/usr/bin/env bash
# compare-convert.sh: a developer's check that a change to the converter
# (daemon/convert/) changes no output byte. It builds `gradtrace` at a
# base revision in a temporary git worktree under /tmp, runs the base's
# and this tree's `gradtrace convert` and `gradtrace report` on every
# input of a corpus, and compares what each wrote: trace files (names and
# bytes), stdout, stderr and exit status. One line per difference; exit 1
# when there is any, 0 when every output is identical.
#
#   scripts/compare-convert.sh BASE_REV [CORPUS_DIR...]
#   scripts/compare-convert.sh --record DIR
#
# The corpus is
#   - tests/fuzz/corpus/fuzz_file: the seeds that are .gtr files (start
#     with the hello magic);
#   - tests/fuzz/corpus/fuzz_convert: raw records, wrapped here into .gtr
#     files as the fuzzer cuts them into chunks (its first byte picks the
#     piece size) behind the fuzzer's hello;
#   - every *.gtr under each CORPUS_DIR (default: /tmp/gtr-corpus when it
#     exists), for instance what --record made.
# Per input, with each build: `convert IN -o out.json`, `convert IN`
# (default names), `convert IN -o rot.json --max-file-events 300`
# (rotation), and `report` as a table, with --include-warmup, as
# --format json (with and without --include-warmup) and as --csv
# --totals. Each command runs in its own directory on a link named in.gtr,
# so the two builds see the same paths.
#
# --record DIR records the standard set into DIR with this tree's build:
# the synthetic streams the e2e tests generate (tests/progs/gen_gtr: GPU
# activity, capture windows, worker threads, operators), C programs under
# the agent (tests/progs: the C API's layers, NVTX layers and backward
# ranges, threads), real torch models (examples/train_small.py with and
# without operators, tests/e2e/report/models.py, a capture window of
# tests/e2e/trigger/model48.py, alone and shared; the torch 2.x venv's
# when it exists) and hostile mutations of some of them
# (tests/tools/mutate_gtr.py, fixed seeds).
#
# Environment: BUILD (this tree's build directory, default build), JOBS
# (inputs compared at once, default 2), KEEP=1 (keep the work directory),
# PYTHON (with torch, default /usr/bin/python3), FUZZ=0 (leave the fuzz
# seeds out: a quicker run on the corpus directories alone). Needs git, make, cmp and
# python3; the base build is cached in /tmp/gt-compare-<commit>.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
JOBS=${JOBS:-2}
PY=${PYTHON:-/usr/bin/python3}

die() { echo "compare-convert: $*" >&2; exit 2; }

usage() {
  sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
}

# ------------------------------------------------------------- recording

# rec NAME VAR=VALUE... -- CMD...: CMD under the agent into DIR/NAME.gtr.
rec() {
  local name=$1 envs=()
  shift
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  echo "record: $name"
  env -u GRADTRACE_TRIGGER -u GRADTRACE_LAYERS "${envs[@]}" \
    GRADTRACE_FILE="$OUTDIR/$name.gtr" LD_PRELOAD="$B/libgradtrace.so" \
    PYTHONPATH="$ROOT/python" GRADTRACE_SOCKET="$OUTDIR/.none/a.sock" \
    GRADTRACE_CONTROL="$OUTDIR/.none/c.sock" "$@" >"$OUTDIR/$name.log" 2>&1 ||
    echo "record: $name failed (see $OUTDIR/$name.log)" >&2
  [ -s "$OUTDIR/$name.gtr" ] || rm -f "$OUTDIR/$name.gtr"
}

gen() { # NAME ARGS...: a synthetic stream
  local name=$1
  shift
  echo "record: $name"
  "$B/progs/gen_gtr" -o "$OUTDIR/$name.gtr" "$@" >/dev/null ||
    echo "record: gen_gtr $* failed" >&2
}

record() {
  OUTDIR=$1
  B=$ROOT/$BUILD
  mkdir -p "$OUTDIR" || die "cannot make $OUTDIR"
  OUTDIR=$(cd "$OUTDIR" && pwd)
  make -C "$ROOT" -s -j2 all >/dev/null || die "make all failed"
  gen gen_gpu_ops --iterations 5 --layers 3 --gpu --steps --ops --scale 1000
  gen gen_gpu_win --iterations 5 --layers 3 --gpu --steps --ops --scale 1000 --window 2
  gen gen_gpu_l0 --level 0 --chunk-kb 8 --gpu --steps --iterations 4
  gen gen_worker --level 0 --chunk-kb 64 --layers 4 --worker
  gen gen_worker40 --iterations 40 --layers 4 --worker
  gen gen_gpu30 --iterations 30 --layers 3 --gpu
  gen gen_steps --level 0 --layers 2 --steps --iterations 2
  gen gen_gpu_steps --iterations 5 --layers 3 --gpu --steps
  gen gen_win_worker --iterations 6 --layers 4 --worker --window 3
  local P=$B/progs
  [ -x "$P/capi_layers" ] && {
    rec capi -- "$P/capi_layers" capi "$OUTDIR/capi.txt"
    rec capi_nvtx GRADTRACE_LAYERS=nvtx -- "$P/capi_layers" nvtx "$OUTDIR/capi_nvtx.txt"
    rec capi_trig GRADTRACE_TRIGGER=layer=blocks.2,phase=backward,iteration=2 \
      -- "$P/capi_layers" capi "$OUTDIR/capi_trig.txt"
  }
  [ -x "$P/nvtx_bwd_layers" ] && {
    rec nvtx_ranges "GRADTRACE_LAYERS=nvtx::block.*" -- "$P/nvtx_bwd_layers" nvtx "$OUTDIR/nr.txt"
    rec nvtx_ranges_trig "GRADTRACE_LAYERS=nvtx::block.*" \
      GRADTRACE_TRIGGER=layer=block.2,phase=both,iteration=1 \
      -- "$P/nvtx_bwd_layers" nvtx "$OUTDIR/nrt.txt"
  }
  [ -x "$P/torch_layers" ] && rec torch_layers -- "$P/torch_layers" capi "$OUTDIR/tl.txt"
  rec threads -- "$P/agent_threads" 3 2000
  rec threads_tiny GRADTRACE_BUFFER_KB=4 GRADTRACE_BUFFER_BLOCKS=2 -- "$P/agent_threads" 4 20000
  if "$PY" -c 'import torch' 2>/dev/null; then
    rec torch_small -- "$PY" "$ROOT/examples/train_small.py"
    rec torch_small_ops GRADTRACE_OPS=1 -- "$PY" "$ROOT/examples/train_small.py"
    local R=$ROOT/tests/e2e/report/models.py
    rec torch_demo -- "$PY" "$R" demo 4
    rec torch_mine -- "$PY" "$R" mine 5
    rec torch_mine_ops GRADTRACE_OPS=1 -- "$PY" "$R" mine 3
    "$PY" -c 'import torchvision' 2>/dev/null && rec torch_resnet18 -- "$PY" "$R" resnet18 3
    local M=$ROOT/tests/e2e/trigger/model48.py
    rec torch_win GRADTRACE_CAPTURE=0 GRADTRACE_TRIGGER=layer=blocks.17,phase=backward,iteration=2 \
      -- "$PY" "$M" --iters 4
    rec torch_win_shared GRADTRACE_CAPTURE=1 GRADTRACE_TRIGGER=layer=blocks.17,phase=both,iteration=1 \
      -- "$PY" "$M" --iters 3
  fi
  local V=${GRADTRACE_TORCH2_VENV:-$HOME/.cache/gradtrace/torch2-venv}/bin/python
  if [ -x "$V" ] && "$V" -c 'import torch' 2>/dev/null; then
    rec torch2_mine -- "$V" "$ROOT/tests/e2e/report/models.py" mine 4
    rec torch2_small_ops GRADTRACE_OPS=1 -- "$V" "$ROOT/examples/train_small.py"
  fi
  # Hostile variants: times, sizes, types and chunks mutated (CRCs fixed).
  mkdir -p "$OUTDIR/mutated"
  local src
  for src in gen_gpu_win gen_worker torch_small torch_win_shared capi_trig nvtx_ranges; do
    [ -s "$OUTDIR/$src.gtr" ] || continue
    echo "record: mutations of $src"
    python3 "$ROOT/tests/tools/mutate_gtr.py" "$OUTDIR/$src.gtr" "$OUTDIR/mutated/$src-m" 25 7 ||
      echo "record: mutate_gtr $src failed" >&2
  done
  rm -rf "$OUTDIR/.none"
  echo "recorded $(find "$OUTDIR" -name '*.gtr' | wc -l) files in $OUTDIR"
}

# ------------------------------------------------------------- inputs

# The fuzz_convert seeds as .gtr files, cut as the fuzzer cuts them.
wrap_records() { # SRC_DIR DST_DIR
  python3 - "$1" "$2" "$ROOT/tests/tools" <<'PY'
import os, struct, sys
sys.path.insert(0, sys.argv[3])
from mutate_gtr import crc32c  # the tests' one CRC-32C in Python
src, dst = sys.argv[1], sys.argv[2]
cmd = b"fuzz"
for name in sorted(os.listdir(src)):
    data = open(os.path.join(src, name), "rb").read()
    if len(data) < 1:
        continue
    # tests/fuzz/fuzz_convert.c: pid 1234, rank -1, start 1 ms, "fuzz".
    out = [b"GTRACE\0\0" + struct.pack("<HHIIIiiiIQQHHI", 1, 0, 64 + len(cmd),
                                        1234, 0, -1, 0, 0, 0, 1000000, 0, 0,
                                        len(cmd), 0) + cmd]
    piece = 1 + (data[0] >> 3) * 16
    body, seq = data[1:], 0
    for off in range(0, len(body), piece):
        p = body[off:off + piece]
        h = struct.pack("<IBBHIIIIQQII", 0x4B435447, 1, 0, 1, 48, len(p), len(p),
                        0, seq, 0, 0, 0)
        c = crc32c(h + p)
        out.append(h[:40] + struct.pack("<I", c) + h[44:] + p)
        seq += 1
    open(os.path.join(dst, name + ".gtr"), "wb").write(b"".join(out))
PY
}

list_inputs() { # WORK CORPUS_DIR...
  local work=$1 f
  shift
  if [ "${FUZZ:-1}" != 0 ]; then
    for f in "$ROOT"/tests/fuzz/corpus/fuzz_file/*; do
      head -c 6 "$f" 2>/dev/null | cmp -s - <(printf GTRACE) && echo "$f"
    done
    mkdir -p "$work/wrapped"
    wrap_records "$ROOT/tests/fuzz/corpus/fuzz_convert" "$work/wrapped" ||
      die "wrapping fuzz_convert seeds failed"
    ls "$work"/wrapped/*.gtr
  fi
  for f in "$@"; do
    find "$f" -name '*.gtr' -type f | sort
  done
}

# ------------------------------------------------------------- running

# run_all GRADTRACE IN DIR: every command on IN, outputs under DIR.
run_all() {
  local gt=$1 in=$2 d=$3 k
  mkdir -p "$d"
  run() { # NAME ARGS...: in its own directory
    local n=$1
    shift
    mkdir "$d/$n"
    ln -s "$in" "$d/$n/in.gtr"
    (cd "$d/$n" && timeout 120 "$gt" "$@" >stdout 2>stderr; echo "rc=$?" >>stderr)
    rm "$d/$n/in.gtr"
  }
  run conv convert in.gtr -o out.json
  run conv_default convert in.gtr
  run conv_rot convert in.gtr -o rot.json --max-file-events 300 --quiet
  run rep report in.gtr
  run rep_warm report --include-warmup in.gtr
  run rep_json report --format json in.gtr
  run rep_json_warm report --format json --include-warmup in.gtr
  run rep_csv_totals report --csv --totals in.gtr
}

# compare_one IDX IN: both builds, then one line per difference.
compare_one() {
  local i=$1 in=$2 d=$WORK/run/$1 f
  run_all "$BASE_GT" "$in" "$d/old"
  run_all "$NEW_GT" "$in" "$d/new"
  (cd "$d/old" && find . -type f | sort) >"$d/old.list"
  (cd "$d/new" && find . -type f | sort) >"$d/new.list"
  if ! cmp -s "$d/old.list" "$d/new.list"; then
    comm -3 "$d/old.list" "$d/new.list" | sed "s|^\t|only new: |; t; s|^|only old: |" |
      while read -r line; do echo "DIFF $in: $line"; done
  fi
  while read -r f; do
    [ -f "$d/new/$f" ] && ! cmp -s "$d/old/$f" "$d/new/$f" && echo "DIFF $in: ${f#./}"
  done <"$d/old.list"
  [ "${KEEP:-0}" = 1 ] || rm -rf "$d"
  return 0
}

compare() {
  local rev=$1 sha
  shift
  sha=$(git -C "$ROOT" rev-parse --verify --quiet "$rev^{commit}") || die "no revision $rev"
  local cache=/tmp/gt-compare-$sha
  if [ ! -x "$cache/gradtrace" ]; then
    local wt=/tmp/gt-compare-wt-$$
    echo "building gradtrace at ${sha:0:12} in $wt"
    git -C "$ROOT" worktree add --detach --quiet "$wt" "$sha" || die "git worktree add failed"
    if make -C "$wt" -s -j2 BUILD=build build/gradtrace >"$wt.log" 2>&1; then
      mkdir -p "$cache" && cp "$wt/build/gradtrace" "$cache/gradtrace"
    fi
    git -C "$ROOT" worktree remove --force "$wt"
    [ -x "$cache/gradtrace" ] || die "building $rev failed: see $wt.log"
    rm -f "$wt.log"
  fi
  make -C "$ROOT" -s -j2 "$BUILD/gradtrace" >/dev/null || die "make $BUILD/gradtrace failed"
  WORK=$(mktemp -d /tmp/gt-compare.XXXXXX)
  # A copy: a rebuild while the comparison runs must not change it.
  cp "$ROOT/$BUILD/gradtrace" "$WORK/gradtrace-new" || die "no $BUILD/gradtrace"
  export BASE_GT=$cache/gradtrace NEW_GT=$WORK/gradtrace-new
  export WORK KEEP
  local dirs=("$@")
  [ ${#dirs[@]} -eq 0 ] && [ -d /tmp/gtr-corpus ] && dirs=(/tmp/gtr-corpus)
  list_inputs "$WORK" "${dirs[@]}" >"$WORK/inputs"
  local n
  n=$(wc -l <"$WORK/inputs")
  echo "comparing $n inputs: base ${sha:0:12} vs $NEW_GT" >&2
  export -f compare_one run_all
  awk '{ print NR "\t" $0 }' "$WORK/inputs" |
    xargs -P "$JOBS" -d '\n' -n 1 bash -c 'IFS=$(printf "\t") read -r i f <<<"$1"; compare_one "$i" "$f"' _ |
    tee "$WORK/diffs"
  local nd
  nd=$(wc -l <"$WORK/diffs")
  echo "compare-convert: $n inputs, $nd differences" >&2
  [ "${KEEP:-0}" = 1 ] && echo "work directory kept: $WORK" >&2 || rm -rf "$WORK"
  [ "$nd" -eq 0 ]
}

case ${1:-} in
  "" | -h | --help) usage ;;
  --record) [ $# -eq 2 ] || usage; record "$2" ;;
  -*) usage ;;
  *) compare "$@" ;;
esac
