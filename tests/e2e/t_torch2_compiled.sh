#!/usr/bin/env bash
# Per-layer forward and backward inside torch.compile'd models (issue 26;
# torch 2.x, inductor on CPU): tests/e2e/torch/compiled_models.py trains
# an MLP whose blocks.2 is made far heavier, a decoder with attention and
# layer norms, a model with a block checkpointed inside the graph and one
# with a graph break, compiled whole and per block, once plainly and once
# under `gradtrace record` with two triggers armed inside compiled
# regions. tests/e2e/torch/check_compiled.py then checks:
#   - losses are bit-identical with and without gradtrace;
#   - every operator a region ran is joined to its map (a layer, or an
#     explicit fused / unowned mark), none unmatched;
#   - the report's rows rank the blocks as the eager run does (blocks.2
#     heaviest, forward and backward), block rows hold their layers'
#     backward (no longer a single CompiledFunctionBackward), and the
#     torch.compile lines say where the compiled time went;
#   - the backward trigger on blocks.1 inside the whole-model graph and
#     the forward trigger on blocks.2.up inside a per-block graph each
#     wrote a window holding that layer's kernels.
# Inductor compiles every graph with g++ (about 150 s here for both runs).
# e2e-timeout: 900
set -u
. "$(dirname "$0")/torch/lib.sh"
torch2_require
GT=$ROOT/$BUILD/gradtrace
M=$TORCH_DIR/compiled_models.py
export TORCHINDUCTOR_CACHE_DIR=$E2E_TMP/inductor TRITON_CACHE_DIR=$E2E_TMP/triton
export GRADTRACE_SOCKET=$E2E_TMP/none/agent.sock GRADTRACE_CONTROL=$E2E_TMP/none/control.sock
# Iterations are the process's optimizer steps, 4 per case: 0-3 mlp:whole,
# 4-7 mlp:block, ...
CASES="mlp:whole mlp:block decoder:whole ckpt:whole brk:whole mlp:eager"
cd "$E2E_TMP"
# Both at once (compiling dominates; two cores): separate inductor caches,
# since gradtrace's kernel profiling scopes change the generated code.
TORCHINDUCTOR_CACHE_DIR=$E2E_TMP/inductor-plain env -u LD_PRELOAD \
  "$PY" "$M" $CASES >plain.out 2>plain.err &
plain=$!
# A full capture with the triggers' windows in it (GRADTRACE_CAPTURE=1:
# the rows need every iteration, the windows their own files).
GRADTRACE_CAPTURE=1 "$GT" record --raw -o rec \
  --trigger layer=blocks.1,phase=backward,iteration=2 \
  --trigger layer=blocks.2.up,phase=forward,iteration=6 \
  -- "$PY" "$M" $CASES >rec.out 2>rec.err ||
  { echo "recorded run failed"; tail -20 rec.err; kill $plain; exit 1; }
wait $plain || { echo "plain run failed"; tail -20 plain.err; exit 1; }
"$GT" report rec/*.pt.trace.json >report.txt 2>report.err ||
  { echo "report failed"; cat report.err; exit 1; }
"$GT" report --format json rec/*.gtr >report.json 2>>report.err ||
  { echo "report of the .gtr failed"; cat report.err; exit 1; }
"$PY" "$TORCH_DIR/check_compiled.py" "$E2E_TMP"
