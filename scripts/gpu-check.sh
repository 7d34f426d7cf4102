#!/usr/bin/env bash
# gpu-check.sh: proves gradtrace's GPU behaviour on a machine with a GPU.
#
#   scripts/gpu-check.sh --prepare      on the build machine (toolkit, -dev
#                                       packages): builds build-gpu/ to carry
#   scripts/gpu-check.sh OUTDIR         on the GPU machine: runs and checks
#
# The GPU machine has torch 2.x and CUDA's driver but no libuv/cJSON/zstd
# -dev packages and no network, so --prepare builds everything here into
# build-gpu/ (agent, daemon, CLI, test programs, kernels/ with nvcc, static
# cudart) and puts the runtime libraries it links (libuv, libcjson,
# libzstd; needs glibc >= 2.34 there) in build-gpu/lib, plus their headers
# in build-gpu/deps so the GPU machine can rebuild with its own compiler if
# the prebuilt binaries do not load. Carry build-gpu/ (about 10 MB).
#
# The check (well under 8 minutes on one H200):
#   1. kernels/mlp_train --check with and without the agent: same results,
#      both match the host reference;
#   2. mlp_train (4 blocks, all visible devices up to 2: pipeline stages)
#      under `gradtrace record --raw`, then again with its NVTX ranges as
#      the only layer source (GRADTRACE_LAYERS=nvtx::block.*: kernels per
#      NVTX block and phase, optimizer kernels untagged, per-layer spans);
#   3. a small torch 2.x model on the GPU (module scopes, autograd hooks,
#      one iteration under emit_nvtx) under `gradtrace record --raw`;
#   4. an NCCL DDP job (one rank per GPU, at most 2): its NCCL kernels in
#      the traces' collectives, and with 2 GPUs `gradtrace merge` aligning
#      the ranks by them;
#   5. torch.compile'd models on the GPU (tests/e2e/torch/compiled_models.py,
#      whole-model and per-block, inductor's Triton kernels), plainly and
#      recorded: same losses, every Triton kernel joined to the compile-time
#      map with a layer or mark, one launch per kernel (driver-API launches
#      included), the heavy block first by GPU backward time
#      (tests/e2e/torch/check_compiled_gpu.py);
#   then reads the raw streams (build-gpu/progs/cuda_gtr_dump) and the
#   Chrome traces, and prints a pass/fail table:
#     kernels captured with names; each mlp_train kernel attributed (CUPTI
#     external correlation) to the block and phase its launch was in (NVTX
#     ranges); per-device clock offsets with uncertainty; kernel start >=
#     its launch on the host timeline; cross-device order of pipeline
#     stages; torch autograd interposition (nodes, backward nodes, seq
#     layout) and torch kernels attributed to layers in forward and
#     backward; NVTX seq correlation; CUPTI dropped-record count reported;
#     no CUPTI warning; traces valid and with ac2g flows; torch operators
#     (cpu_op) linked by External id to their launches and kernels, with
#     the launch's correlation naming the kernel; and, when a Python with
#     HolisticTraceAnalysis is given (GT_HTA_PYTHON, default the consumers
#     venv of scripts/install-consumers.sh if present), HTA on the torch
#     trace: steps, kernel breakdown, launch statistics, operator-to-kernel
#     delay and critical path (SKIP rows when there is no HTA).
# Everything (traces, dumps, logs, table.txt) goes to OUTDIR.
# Exit 0 when every row passes, 1 otherwise, 2 on usage.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
B=${GT_GPU_BUILD:-build-gpu}

if [ "${1:-}" = --prepare ]; then
  set -e
  make BUILD="$B" -j2 "$B/libgradtrace.so" "$B/gradtrace" "$B/gradtraced" \
    "$B/progs/cuda_gtr_dump" "$B/progs/nvtx_ranges" "$B/kernels/mlp_train"
  mkdir -p "$B/lib" "$B/deps/include/cjson"
  for l in libuv.so.1 libcjson.so.1 libzstd.so.1; do
    p=$(ldconfig -p | awk -v l="$l" '$1 == l && /x86-64/ {print $NF; exit}')
    [ -n "$p" ] || { echo "gpu-check: $l not found here" >&2; exit 1; }
    cp -L "$p" "$B/lib/$l"
    ln -sf "$l" "$B/lib/${l%.1}"
  done
  cp -r /usr/include/uv.h /usr/include/uv "$B/deps/include/"
  cp /usr/include/cjson/cJSON.h "$B/deps/include/cjson/"
  cp /usr/include/zstd.h /usr/include/zstd_errors.h /usr/include/zdict.h "$B/deps/include/"
  du -sh "$B"
  echo "gpu-check: carry $B to the GPU machine and run scripts/gpu-check.sh OUTDIR there"
  exit 0
fi

if [ $# -ne 1 ] || [ "${1#-}" != "$1" ]; then
  sed -n '2,6p' "$0" >&2
  exit 2
fi
OUT=$(mkdir -p "$1" && cd "$1" && pwd)
export GT_MLP_ITERS=${GT_MLP_ITERS:-30}
PY=${PYTHON:-python3}
START=$(date +%s)
LOG=$OUT/gpu-check.log
: >"$LOG"
say() { echo "gpu-check: $*" | tee -a "$LOG" >&2; }
ROWS=$OUT/rows.txt
: >"$ROWS"
row() { printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$ROWS"; }

finish() {
  {
    printf '%-40s %-5s %s\n' CHECK RESULT DETAIL
    while IFS=$'\t' read -r name res detail; do
      printf '%-40s %-5s %s\n' "$name" "$res" "$detail"
    done <"$ROWS"
    echo "elapsed $(($(date +%s) - START)) s; traces and logs in $OUT"
  } | tee "$OUT/table.txt"
  grep -q $'\tFAIL\t' "$ROWS" && exit 1
  exit 0
}

# --------------------------------------------------------------- analysis
analyze() {
VALIDATE=tests/tools/validate_trace.py
"$PY" - "$OUT" "$MLP_OK" "$TORCH_OK" "$USE_DEV" "$VALIDATE" >>"$ROWS" 2>>"$LOG" <<'PYEOF'
import glob, json, os, re, subprocess, sys
from collections import defaultdict

out, mlp_ok, torch_ok, use_dev, validate = sys.argv[1], sys.argv[2] == "1", sys.argv[3] == "1", int(sys.argv[4]), sys.argv[5]
rows = []
def row(name, ok, detail):
    rows.append("%s\t%s\t%s" % (name, "PASS" if ok else "FAIL", detail))

class Dump:
    def __init__(self, path):
        self.kernels, self.api, self.ext, self.clock = [], {}, defaultdict(list), []
        self.scopes = defaultdict(list)   # tid -> [(begin, end, kind, name)]
        self.lost, self.warnings, self.nodes, self.bwd = {}, [], 0, []
        self.memcpy = []
        tid, stack = 0, defaultdict(list)
        for line in open(path, encoding="utf-8", errors="replace"):
            f = line.rstrip("\n").split("\t")
            t = f[0]
            if t == "thread": tid = int(f[1])
            elif t == "begin": stack[tid].append((int(f[4]), int(f[1]), f[2]))
            elif t == "end":
                st = stack[tid]
                for i in range(len(st) - 1, -1, -1):
                    if st[i][2] == f[2] and st[i][1] == int(f[1]):
                        b = st.pop(i)
                        self.scopes[tid].append((b[0], int(f[3]), b[1], b[2]))
                        break
            elif t == "kernel":
                self.kernels.append(dict(dev=int(f[1]), stream=int(f[2]), corr=int(f[3]),
                                         start=int(f[4]), end=int(f[5]), name=f[6]))
            elif t == "memcpy":
                self.memcpy.append(dict(dev=int(f[1]), corr=int(f[3]), start=int(f[5]), end=int(f[6])))
            elif t == "api":
                self.api[int(f[2])] = dict(tid=int(f[1]), start=int(f[3]), end=int(f[4]), name=f[5])
            elif t == "ext": self.ext[int(f[2])].append((int(f[1]), int(f[3]), f[4]))
            elif t == "clock": self.clock.append((int(f[1]), int(f[2]), int(f[4]), int(f[5])))
            elif t == "lost": self.lost[(int(f[1]), int(f[2]))] = int(f[3])
            elif t == "warning": self.warnings.append(f[2] if len(f) > 2 else "")
            elif t == "node": self.nodes += 1
            elif t == "bwd_begin": self.bwd.append(int(f[1]))

    def enclosing(self, tid, ts):
        """NVTX/module scopes on thread tid containing ts, outermost first."""
        return sorted([s for s in self.scopes.get(tid, []) if s[0] <= ts <= s[1]])

    def phase_layer(self, corr):
        phase = layer = None
        for kind, ext, name in self.ext.get(corr, []):
            if kind in (1, 2):
                phase, layer = ("forward" if kind == 1 else "backward"), name
        return phase, layer

def common_checks(tag, d):
    launch = [(k["start"] - d.api[k["corr"]]["start"]) for k in d.kernels if k["corr"] in d.api]
    bad = sum(1 for g in launch if g < 0)
    if launch:
        s = sorted(launch)
        row("%s: kernel start >= launch" % tag, bad == 0,
            "%d kernels with launch, %d start before it; gap min %.1f us median %.1f us"
            % (len(launch), bad, s[0] / 1e3, s[len(s) // 2] / 1e3))
    else:
        row("%s: kernel start >= launch" % tag, False, "no kernel matched to its launch call")
    cupti_lost = [v for (tid, what), v in d.lost.items() if what == 2]
    row("%s: CUPTI dropped records" % tag, bool(cupti_lost),
        ("reported: %d dropped" % max(cupti_lost)) if cupti_lost else "no GT_LOST_CUPTI record in the stream")
    cw = [w for w in d.warnings if "CUPTI" in w or "CUDA" in w]
    row("%s: no CUDA/CUPTI warning" % tag, not cw, "; ".join(cw[:3]) or "%d warning(s), none about CUDA" % len(d.warnings))
    devs = sorted({k["dev"] for k in d.kernels})
    cl = {}
    for dev, mono, dts, unc in d.clock:
        if dev >= 0:
            cl[dev] = (mono - dts, unc)
    missing = [x for x in devs if x not in cl]
    row("%s: per-device clock offset" % tag, bool(devs) and not missing,
        ", ".join("GPU%d offset %+d ns +- %d ns" % (x, cl[x][0], cl[x][1]) for x in sorted(cl))
        + ("; missing for GPU %s" % missing if missing else ""))

def check_traces(tag, pattern):
    files = sorted(glob.glob(pattern))
    if not files:
        row("%s: Chrome trace valid" % tag, False, "no trace written")
        return
    if os.path.exists(validate):
        r = subprocess.run([sys.executable, validate] + files, capture_output=True, text=True)
        row("%s: Chrome trace valid" % tag, r.returncode == 0, (r.stdout + r.stderr).strip().splitlines()[-1:][0] if (r.stdout + r.stderr).strip() else "")
    flows = tagged = 0
    clocks = {}
    def find_clock(o):
        if isinstance(o, dict):
            cl = o.get("clock")
            if isinstance(cl, dict) and isinstance(cl.get("devices"), list):
                for dv in cl["devices"]:
                    if isinstance(dv, dict) and "device" in dv:
                        clocks[dv["device"]] = dv.get("uncertainty_ns")
            for v in o.values():
                if isinstance(v, dict):
                    find_clock(v)
    for fn in files:
        try:
            t = json.load(open(fn))
        except Exception as e:
            row("%s: trace loads" % tag, False, "%s: %s" % (fn, e))
            return
        evs = t.get("traceEvents", [])
        flows += sum(1 for e in evs if e.get("cat") == "ac2g")
        tagged += sum(1 for e in evs if e.get("ph") == "X" and isinstance(e.get("args"), dict)
                      and "layer" in e["args"] and "phase" in e["args"])
        find_clock({k: v for k, v in t.items() if k != "traceEvents"})
    row("%s: CPU->GPU flows (ac2g)" % tag, flows > 0, "%d flow events" % flows)
    row("%s: trace GPU events with layer+phase" % tag, tagged > 0, "%d events" % tagged)
    row("%s: trace metadata clock offsets" % tag,
        any(d >= 0 and (u or 0) > 0 for d, u in clocks.items()),
        ", ".join("GPU%s +-%s ns" % (d, u) for d, u in sorted(clocks.items())) or "none")

def check_op_links(pattern):
    """Operator -> launch -> kernel (schema/trace-output.md, "Kineto
    conventions"): a kernel's External id names a cpu_op, its launch
    (same correlation) names the same one, and the launch lies inside that
    operator's time on the operator's thread's process."""
    ops, api, ks = {}, {}, []
    for fn in sorted(glob.glob(pattern)):
        try:
            evs = json.load(open(fn)).get("traceEvents", [])
        except Exception:
            continue
        for e in evs:
            a = e.get("args") or {}
            if e.get("cat") == "cpu_op":
                ops[a.get("External id")] = e
            elif e.get("cat") == "cuda_runtime":
                api[a.get("correlation")] = e
            elif e.get("cat") == "kernel":
                ks.append(e)
    linked = bad = 0
    for k in ks:
        a = k["args"]
        op = ops.get(a.get("External id"))
        r = api.get(a.get("correlation"))
        if op is None or a.get("External id", 0) == 0:
            continue
        if r is None or r["args"].get("External id") != a["External id"] or \
                not (op["ts"] <= r["ts"] and r["ts"] + r["dur"] <= op["ts"] + op["dur"]):
            bad += 1
        else:
            linked += 1
    row("torch: operator -> launch -> kernel", len(ops) > 0 and linked > 0 and bad == 0,
        "%d cpu_op, %d kernels linked to their operator through their launch, %d "
        "inconsistent, %d kernels in all" % (len(ops), linked, bad, len(ks)))

def check_hta(d):
    """HTA on the torch run's trace, in its own interpreter."""
    py = os.environ.get("GT_HTA_PYTHON") or os.path.expanduser(
        "~/.cache/gradtrace/consumers-venv/bin/python")
    if not os.path.exists(py) or subprocess.run([py, "-c", "import hta"],
                                                capture_output=True).returncode:
        rows.append("torch: HTA\tSKIP\tno Python with HTA (GT_HTA_PYTHON, "
                    "scripts/install-consumers.sh)")
        return
    code = r"""
import sys, os, io, contextlib, warnings, logging
warnings.filterwarnings("ignore"); logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
with contextlib.redirect_stdout(io.StringIO()):
    ta = TraceAnalysis(trace_dir=sys.argv[1], include_last_profiler_step=True)
steps = [int(s) for s in ta.get_profiler_steps()]
kt, km = ta.get_gpu_kernel_breakdown(visualize=False)
ls = ta.get_cuda_kernel_launch_stats(ranks=[0], visualize=False)[0]
aten = ta.get_aten_op_kernels_and_delay(ranks=[0])[0]
with contextlib.redirect_stdout(io.StringIO()):
    g, ok = ta.critical_path_analysis(rank=0, annotation="ProfilerStep",
                                      instance_id=len(steps) // 2)
print("%d steps, %d kernel names, %d launches, %d aten op sequences, "
      "critical path %s" % (len(steps), len(km), len(ls), len(aten), ok))
sys.exit(0 if steps and len(km) and len(ls) and len(aten) and ok else 1)
"""
    r = subprocess.run([py, "-c", code, d], capture_output=True, text=True)
    lines = (r.stdout + r.stderr).strip().splitlines()
    row("torch: HTA analyses", r.returncode == 0, lines[-1] if lines else "")

MLP_ITERS = int(os.environ.get("GT_MLP_ITERS", "30"))
FWD = {"gemm_nn", "gelu_fwd"}
BWD = {"gemm_tn", "gemm_nt", "gelu_bwd", "bias_grad"}

def mlp_attribution(tag, d, layer_fmt):
    """Each block kernel's ext layer/phase is the NVTX block and phase its
    launch was in; layer_fmt names the layer of block k."""
    good = bad = unattr = 0
    examples = []
    for k in d.kernels:
        if k["name"] not in FWD | BWD:
            continue
        phase, layer = d.phase_layer(k["corr"])
        a = d.api.get(k["corr"])
        nv_phase = nv_block = None
        if a:
            for b, e, kind, name in d.enclosing(a["tid"], a["start"]):
                if kind == 2 and name in ("forward", "backward", "optimizer"):
                    nv_phase = name
                if kind == 2 and re.fullmatch(r"block\.\d+", name):
                    nv_block = name.split(".")[1]
        exp_phase = "forward" if k["name"] in FWD else "backward"
        if phase is None:
            unattr += 1
        elif (phase == exp_phase == nv_phase and layer == layer_fmt % nv_block):
            good += 1
        else:
            bad += 1
            if len(examples) < 3:
                examples.append("%s: ext %s/%s nvtx %s/block.%s" % (k["name"], phase, layer, nv_phase, nv_block))
    exp_n = MLP_ITERS * 4 * (3 + 7)  # per block: 3 forward, 7 backward kernels
    row("%s: kernels -> block and phase" % tag, good == exp_n and bad == 0 and unattr == 0,
        "%d/%d right, %d wrong, %d unattributed %s" % (good, exp_n, bad, unattr, "; ".join(examples)))
if mlp_ok and os.path.exists(os.path.join(out, "mlp.dump")):
    d = Dump(os.path.join(out, "mlp.dump"))
    names = {k["name"] for k in d.kernels}
    want = FWD | BWD | {"loss_grad", "sgd_update"}
    row("mlp: kernels captured with names", want <= names,
        "%d kernels; names %s%s" % (len(d.kernels), ",".join(sorted(names)[:12]),
                                   "; missing %s" % sorted(want - names) if want - names else ""))
    mlp_attribution("mlp", d, "blocks.%s")
    common_checks("mlp", d)
    if use_dev >= 2:
        # Stage 1's first forward kernel of each iteration after stage 0's last.
        it_ranges = []
        for tid, sc in d.scopes.items():
            it_ranges += [(b, e) for b, e, kind, name in sc if kind == 2 and name.startswith("iter ")]
        viol = checked = 0
        for b, e in it_ranges:
            ks = [k for k in d.kernels if k["name"] in FWD and k["corr"] in d.api and b <= d.api[k["corr"]]["start"] <= e]
            k0 = [k for k in ks if k["dev"] == 0]
            k1 = [k for k in ks if k["dev"] == 1]
            if k0 and k1:
                checked += 1
                if min(k["start"] for k in k1) < max(k["end"] for k in k0):
                    viol += 1
        row("mlp: cross-device stage order", checked > 0 and viol == 0,
            "%d iterations checked, %d with GPU1 forward starting before GPU0's ended" % (checked, viol))
    check_traces("mlp", os.path.join(out, "mlp", "*.json"))
elif mlp_ok is False:
    row("mlp: recorded run", False, "mlp_train under gradtrace record failed (see mlp.err)")

# NVTX ranges as the only layer source (GRADTRACE_LAYERS=nvtx::block.*):
# layers are the NVTX blocks "block.<k>", kernels tagged by the ranges'
# phase ("forward" / "backward"), the optimizer's kernels by no layer, and
# the trace's per-layer spans one forward call and one backward span per
# block and iteration: mlp_train reports its backward nodes through the C
# API inside its NVTX backward ranges, so the node-derived spans win and
# no span comes from a range (schema/trace-output.md, "Backward ranges").
nv_dump = os.path.join(out, "mlp_nvtx.dump")
if os.path.exists(nv_dump) and os.path.getsize(nv_dump) > 0:
    d = Dump(nv_dump)
    mlp_attribution("mlp nvtx layers", d, "block.%s")
    sgd_tagged = sum(1 for k in d.kernels if k["name"] == "sgd_update" and d.phase_layer(k["corr"])[1])
    row("mlp nvtx layers: optimizer kernels untagged", sgd_tagged == 0,
        "%d sgd_update kernels with a layer" % sgd_tagged)
    spans = defaultdict(lambda: [0, 0])
    ranged = 0
    for fn in glob.glob(os.path.join(out, "mlp_nvtx", "*.json")):
        for e in json.load(open(fn)).get("traceEvents", []):
            if e.get("cat") in ("layer_forward", "layer_backward"):
                lay = (e.get("args") or {}).get("layer") or e.get("name", "").split(" ")[0]
                spans[lay][0 if e["cat"] == "layer_forward" else 1] += 1
                ranged += (e.get("args") or {}).get("source") == "range"
    okb = all(spans["block.%d" % i] == [MLP_ITERS, MLP_ITERS] for i in range(4)) and ranged == 0
    row("mlp nvtx layers: per-layer spans", okb,
        ", ".join("%s fwd %d bwd %d" % (k, v[0], v[1]) for k, v in sorted(spans.items())) +
        (", %d from ranges" % ranged) if spans else "none")
elif os.path.exists(os.path.join(out, "mlp_nvtx.err")):
    row("mlp nvtx layers: recorded run", False, "mlp_train with GRADTRACE_LAYERS=nvtx failed (see mlp_nvtx.err)")

if torch_ok and os.path.exists(os.path.join(out, "torch.dump")):
    d = Dump(os.path.join(out, "torch.dump"))
    known = sum(1 for s in d.bwd if s >= 0)
    tw = [w for w in d.warnings if "torch" in w.lower() or "autograd" in w.lower() or "layout" in w.lower()]
    row("torch: autograd interposition", d.nodes > 0 and len(d.bwd) > 0 and known == len(d.bwd),
        "%d nodes created, %d backward nodes (%d with seq)%s" % (d.nodes, len(d.bwd), known,
                                                                 "; " + "; ".join(tw[:2]) if tw else ""))
    fwd = defaultdict(int); bwd = defaultdict(int)
    for k in d.kernels:
        phase, layer = d.phase_layer(k["corr"])
        if phase == "forward": fwd[layer] += 1
        elif phase == "backward": bwd[layer] += 1
    row("torch: kernels captured with names", len(d.kernels) > 0,
        "%d kernels, e.g. %s" % (len(d.kernels), d.kernels[0]["name"][:60] if d.kernels else "-"))
    row("torch: kernels -> layer, forward", any(l and l.startswith("blocks.") for l in fwd),
        ", ".join("%s:%d" % kv for kv in sorted(fwd.items())[:6]) or "none")
    row("torch: kernels -> layer, backward", any(l and l.startswith("blocks.") for l in bwd),
        ", ".join("%s:%d" % kv for kv in sorted(bwd.items())[:6]) or "none")
    seqs = sum(1 for v in d.ext.values() for kind, _, _ in v if kind == 3)
    row("torch: NVTX seq correlation", seqs > 0, "%d launches tagged with an emit_nvtx seq" % seqs)
    common_checks("torch", d)
    check_traces("torch", os.path.join(out, "torch", "*.json"))
    check_op_links(os.path.join(out, "torch", "*.json"))
    check_hta(os.path.join(out, "torch"))
elif os.path.exists(os.path.join(out, "torch_train.py")) and not torch_ok:
    row("torch: recorded run", False, "torch_train.py under gradtrace record failed (see torch.err)")

print("\n".join(rows))
PYEOF
[ $? -eq 0 ] || row analysis FAIL "analyzer crashed (see gpu-check.log)"
}

# GT_GPU_CHECK_ANALYZE_ONLY=1: only re-read the dumps and traces in OUTDIR
# (from an earlier run) and print the table again.
if [ -n "${GT_GPU_CHECK_ANALYZE_ONLY:-}" ]; then
  MLP_OK=$([ -s "$OUT/mlp.dump" ] && echo 1 || echo 0)
  TORCH_OK=$([ -s "$OUT/torch.dump" ] && echo 1 || echo 0)
  USE_DEV=${GT_USE_DEV:-1}
  analyze
  finish
fi

# --------------------------------------------------------------- machine
{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version --format=csv; } \
  >"$OUT/gpus.txt" 2>&1
NDEV=$(grep -c '^GPU ' "$OUT/gpus.txt" || true)
if [ "${NDEV:-0}" -lt 1 ]; then
  row machine FAIL "no GPU visible (nvidia-smi -L)"
  finish
fi
row machine PASS "$NDEV GPU(s): $(sed -n 1p "$OUT/gpus.txt")"
USE_DEV=$((NDEV >= 2 ? 2 : 1))

# --------------------------------------------------------------- build
export LD_LIBRARY_PATH=$ROOT/$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
loads() { # every file loads: no "not found" from ldd
  for f in "$@"; do
    [ -e "$f" ] || return 1
    ldd "$f" 2>&1 | grep -q 'not found\|GLIBC_.*not found' && return 1
  done
  return 0
}
TOOLS=("$B/libgradtrace.so" "$B/gradtrace" "$B/gradtraced" "$B/progs/cuda_gtr_dump")
if loads "${TOOLS[@]}" && "$B/gradtrace" --help >/dev/null 2>&1; then
  row build PASS "prebuilt $B"
elif command -v cc >/dev/null && [ -d "$B/deps/include" ]; then
  say "prebuilt binaries do not load here; rebuilding with the carried deps"
  NB=build-gpu-local
  if make BUILD=$NB -j8 EXTRA_CPPFLAGS="-I$ROOT/$B/deps/include -I$ROOT/$B/deps/include/cjson" \
       EXTRA_LDFLAGS="-L$ROOT/$B/lib" EXTRA_CFLAGS="-L$ROOT/$B/lib" \
       "$NB/libgradtrace.so" "$NB/gradtrace" "$NB/gradtraced" "$NB/progs/cuda_gtr_dump" \
       >>"$LOG" 2>&1; then
    mkdir -p "$NB/kernels"
    cp -p "$B/kernels/mlp_train" "$NB/kernels/" 2>/dev/null || true
    B=$NB
    row build PASS "rebuilt here as $NB"
  else
    row build FAIL "prebuilt binaries do not load and the rebuild failed (see gpu-check.log)"
    finish
  fi
else
  row build FAIL "prebuilt binaries do not load (ldd) and no compiler to rebuild"
  finish
fi
MLP=$B/kernels/mlp_train
if ! [ -x "$MLP" ] && command -v nvcc >/dev/null; then
  make BUILD="$B" NVCC="$(command -v nvcc)" "$MLP" >>"$LOG" 2>&1 || true
fi
GT=$ROOT/$B/gradtrace
AGENT=$ROOT/$B/libgradtrace.so
DUMP=$ROOT/$B/progs/cuda_gtr_dump

# --------------------------------------------------------------- 1. --check
if [ -x "$MLP" ]; then
  timeout 120 "$MLP" --check >"$OUT/check_plain.out" 2>"$OUT/check_plain.err"
  rc1=$?
  timeout 120 env GRADTRACE_FILE="$OUT/check.gtr" LD_PRELOAD="$AGENT" "$MLP" --check \
    >"$OUT/check_agent.out" 2>"$OUT/check_agent.err"
  rc2=$?
  l1=$(grep -o 'loss_first=[0-9.e+-]*' "$OUT/check_plain.out")
  l2=$(grep -o 'loss_first=[0-9.e+-]*' "$OUT/check_agent.out")
  if [ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && grep -q check=ok "$OUT/check_agent.out" \
     && [ -n "$l1" ] && [ "$l1" = "$l2" ]; then
    row "mlp_train --check" PASS "host reference matches, same $l1 with and without agent"
  else
    row "mlp_train --check" FAIL "rc $rc1/$rc2, '$l1' vs '$l2' (see check_*.err)"
  fi
else
  row "mlp_train --check" FAIL "no $MLP (build it with nvcc: scripts/gpu-check.sh --prepare)"
fi

# --------------------------------------------------------------- 2. kernels/
run_recorded() { # name timeout cmd...
  local name=$1 t=$2
  shift 2
  rm -rf "$OUT/$name"
  timeout "$t" "$GT" record -o "$OUT/$name" --raw -- "$@" \
    >"$OUT/$name.out" 2>"$OUT/$name.err"
  local rc=$?
  local gtr
  gtr=$(find "$OUT/$name" -name '*.gtr' -size +0 2>/dev/null | head -1)
  if [ -n "$gtr" ]; then
    "$DUMP" "$gtr" >"$OUT/$name.dump" 2>>"$OUT/$name.err"
  else
    : >"$OUT/$name.dump"
  fi
  return $rc
}
MLP_OK=0
if [ -x "$MLP" ]; then
  # Long enough (a second or more) for the clock-sync thread to see the
  # devices' contexts and record start events while the program runs.
  run_recorded mlp 180 "$MLP" --blocks 4 --iters "$GT_MLP_ITERS" --dim 1024 \
    --hidden 4096 --batch 1024 --devices "$USE_DEV" && MLP_OK=1
  [ $MLP_OK -eq 1 ] || say "mlp_train under record failed: $(tail -n 3 "$OUT/mlp.err")"
  # The same workload with its NVTX ranges as the only layer source.
  GRADTRACE_LAYERS='nvtx::block.*' run_recorded mlp_nvtx 180 "$MLP" --blocks 4 \
    --iters "$GT_MLP_ITERS" --dim 1024 --hidden 4096 --batch 1024 --devices "$USE_DEV" \
    || say "mlp_train with NVTX layers failed: $(tail -n 3 "$OUT/mlp_nvtx.err")"
fi

# --------------------------------------------------------------- 3. torch
cat >"$OUT/torch_train.py" <<'PYEOF'
"""Small torch 2.x GPU training loop for gpu-check: two Linear-GELU-Linear
blocks, 6 iterations, the last under torch.autograd.profiler.emit_nvtx so
op ranges carry 'seq = N'."""
import sys
import torch
import torch.nn as nn

class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.fc1 = nn.Linear(d, h)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(h, d)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))

class Net(nn.Module):
    def __init__(self, d=256, h=512):
        super().__init__()
        self.proj = nn.Linear(64, d)
        self.blocks = nn.ModuleList([Block(d, h), Block(d, h)])
        self.head = nn.Linear(d, 10)

    def forward(self, x):
        x = self.proj(x)
        for b in self.blocks:
            x = b(x)
        return self.head(x)

def main():
    if not torch.cuda.is_available():
        print("torch_train: CUDA not available", file=sys.stderr)
        return 1
    torch.manual_seed(0)
    dev = torch.device("cuda")
    model = Net().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(128, 64, device=dev)
    y = torch.randint(0, 10, (128,), device=dev)
    for it in range(6):
        ctx = torch.autograd.profiler.emit_nvtx() if it == 5 else None
        if ctx:
            ctx.__enter__()
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if ctx:
            ctx.__exit__(None, None, None)
    torch.cuda.synchronize()
    print("torch_train torch=%s loss=%.4f" % (torch.__version__, loss.item()))
    return 0

sys.exit(main())
PYEOF
TORCH_OK=0
if "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' \
   >>"$LOG" 2>&1; then
  # Operators are opt-in: this run checks operator -> launch -> kernel.
  GRADTRACE_OPS=1 run_recorded torch 240 "$PY" "$OUT/torch_train.py" && TORCH_OK=1
  [ $TORCH_OK -eq 1 ] || say "torch run under record failed: $(tail -n 3 "$OUT/torch.err")"
  "$PY" -c 'import torch; print(torch.__version__, torch.version.cuda)' >"$OUT/torch_version.txt" 2>&1
else
  row "torch run" FAIL "$PY has no torch with CUDA"
fi

# ------------------------------------------------ 4. NCCL collectives (merge)
# NCCL kernels become collectives in the traces' metadata (group >= 2^31,
# daemon/convert/stream.c), which `gradtrace merge` aligns ranks by; with
# two GPUs, two ranks are recorded and merged (one GPU: one rank, so only
# the metadata is checked: NCCL will not put two ranks on one device).
cat >"$OUT/nccl_train.py" <<'PYEOF'
import os, sys, torch, torch.distributed as dist
dist.init_process_group("nccl")
r = dist.get_rank()
torch.cuda.set_device(r)
m = torch.nn.Linear(256, 256).cuda()
ddp = torch.nn.parallel.DistributedDataParallel(m, device_ids=[r])
opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
for it in range(20):
    loss = ddp(torch.randn(64, 256, device="cuda")).square().mean()
    opt.zero_grad(); loss.backward(); opt.step()
    dist.all_reduce(loss.detach())
torch.cuda.synchronize()
dist.destroy_process_group()
PYEOF
NR=$((NDEV >= 2 ? 2 : 1))
if [ $TORCH_OK -eq 1 ]; then
  NPORT=$(( 20000 + RANDOM % 20000 ))
  for ((r = 0; r < NR; r++)); do
    RANK=$r WORLD_SIZE=$NR LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$NPORT \
      timeout 240 "$GT" record -o "$OUT/nccl$r" -- "$PY" "$OUT/nccl_train.py" \
      >"$OUT/nccl$r.out" 2>"$OUT/nccl$r.err" &
  done
  wait
  "$PY" - "$OUT" "$NR" "$GT" >>"$ROWS" 2>>"$LOG" <<'PYEOF' || row "nccl: analysis" FAIL "see gpu-check.log"
import glob, json, subprocess, sys
out, nr, gt = sys.argv[1], int(sys.argv[2]), sys.argv[3]
files = []
for r in range(nr):
    fs = sorted(glob.glob("%s/nccl%d/*.json" % (out, r)))
    if not fs:
        print("nccl: rank %d trace\tFAIL\tno trace (see nccl%d.err)" % (r, r)); sys.exit(0)
    files.append(fs[0])
    g = json.load(open(fs[0]))["gradtrace"]
    nccl = [c for c in g.get("collectives", []) if c["group"] >= 2**31]
    print("nccl: kernels as collectives, rank %d\t%s\t%d NCCL kernels of %d collectives"
          % (r, "PASS" if nccl else "FAIL", len(nccl), len(g.get("collectives", []))))
if nr == 2:
    rc = subprocess.run([gt, "merge"] + files + ["-o", out + "/nccl-merged.json"]).returncode
    ranks = json.load(open(out + "/nccl-merged.json"))["gradtrace"]["merge"]["ranks"] if rc == 0 else []
    ok = rc == 0 and ranks[1]["method"] == "collectives"
    print("nccl: merge aligned by NCCL kernels\t%s\t%s" % ("PASS" if ok else "FAIL",
          "correction %s ns +/- %s ns" % (ranks[1]["correction_ns"], ranks[1]["uncertainty_ns"])
          if ranks else "merge failed"))
PYEOF
fi

# ------------------------------------------- 5. torch.compile (Triton kernels)
# Issue 26's CUDA case: tests/e2e/torch/compiled_models.py on the GPU,
# plainly and recorded at once (each with its own inductor cache: the two
# must not share compiled code), checked by check_compiled_gpu.py.
CCASES="mlp:whole mlp:block decoder:whole mlp:eager"
if [ $TORCH_OK -eq 1 ]; then
  export TRITON_CACHE_DIR=$OUT/triton-cache
  GT_DEVICE=cuda TORCHINDUCTOR_CACHE_DIR=$OUT/inductor-plain timeout 300 \
    "$PY" tests/e2e/torch/compiled_models.py $CCASES \
    >"$OUT/compiled_plain.out" 2>"$OUT/compiled_plain.err" &
  cplain=$!
  GT_DEVICE=cuda GRADTRACE_CAPTURE=1 TORCHINDUCTOR_CACHE_DIR=$OUT/inductor-rec \
    run_recorded compiled 300 "$PY" tests/e2e/torch/compiled_models.py $CCASES ||
    say "compiled models under record failed: $(tail -n 3 "$OUT/compiled.err")"
  wait $cplain || say "compiled models (plain) failed: $(tail -n 3 "$OUT/compiled_plain.err")"
  "$PY" tests/e2e/torch/check_compiled_gpu.py "$OUT" "$GT" $CCASES >>"$ROWS" 2>>"$LOG" ||
    row "compiled gpu: analysis" FAIL "see gpu-check.log"
fi

analyze
finish
