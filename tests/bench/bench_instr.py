#!/usr/bin/env python3
"""Instructions per training step of the training thread, counted by
valgrind (callgrind), with and without gradtrace, on torch 1.13 and 2.x.

Step times on a shared machine move by a percent or two from one process
to the next (bench_torch.py's "control" row shows how much), which is
more than the idle target (<= 0.5 %) it is meant to resolve. An
instruction count does not move: the same program runs the same
instructions. So this benchmark counts them, for the overhead-bound model
of bench_torch.py (24 blocks Linear -> GELU -> Linear, hidden 8, batch 1),
in these configurations:
  none           no agent, no package
  idle           agent + package, nothing captured or armed
  capture-noops  capturing layers, nodes and steps (GRADTRACE_OPS=0)

Each configuration runs twice under callgrind (--separate-threads=yes),
for SHORT and LONG steps after the same start-up (torch, the model, five
warm-up steps, then gc.freeze(); PYTHONHASHSEED=0); the training
thread's difference over the LONG - SHORT steps is its per-step count,
with start-up and warm-up cancelled out. The agent's streamer thread is not
in it (as in bench_torch.py's thread CPU time).

Instructions are not time: a cache miss costs no instruction, and under
valgrind the agent may read CLOCK_MONOTONIC where it would read the TSC
natively (more instructions per capture timestamp, not while idle). The
idle row is the one this is for: while idle the agent takes no
timestamps, and what it and the package execute is what it costs.

Benchmarks print figures; they never pass or fail.
Usage: bench_instr.py [--python PY ...] [--short N] [--long N]
"""

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

from bench_torch import AGENT, HERE, ROOT, run_interpreters, torch_version

CONFIGS = ["none", "idle", "capture-noops"]

# Five warm-up steps, then gc.freeze(): the objects made so far (torch,
# the model, the package's registry) leave the collector's generations,
# so a full collection landing in one run's window and not in another's
# does not move the count by tens of thousands of instructions per step.
# PYTHONHASHSEED=0 gives every run the same dict layouts.
CHILD = r"""
import gc, os, sys
sys.path.insert(0, %r)
import torch
torch.set_num_threads(1)
from bench_torch import build_model
step = build_model("overhead")
for _ in range(5):
    step()
gc.collect()
gc.freeze()
for _ in range(int(sys.argv[1])):
    step()
os._exit(0)
""" % HERE


def env_for(config, tmp):
    env = dict(os.environ, PYTHONHASHSEED="0")
    for k in ("LD_PRELOAD", "PYTHONPATH", "GRADTRACE_OPS", "GRADTRACE_CAPTURE",
              "GRADTRACE_FILE", "GRADTRACE_TRIGGER", "GRADTRACE_SOCKET"):
        env.pop(k, None)
    if config != "none":
        env["LD_PRELOAD"] = AGENT
        env["PYTHONPATH"] = os.path.join(ROOT, "python")
        env["GRADTRACE_FILE"] = os.path.join(tmp, config + ".gtr")
        env["GRADTRACE_CAPTURE"] = "0" if config == "idle" else "1"
        if config == "capture-noops":
            env["GRADTRACE_OPS"] = "0"
    return env


def main_thread_instr(prefix):
    """Ir of the first thread (the training thread) in callgrind's
    per-thread files <prefix>-01 (and <prefix>.<pid>-01)."""
    files = sorted(glob.glob(prefix + "*-01"))
    if not files:
        raise RuntimeError("no callgrind output at %s" % prefix)
    with open(files[0]) as f:
        for line in f:
            if line.startswith("totals:") or line.startswith("summary:"):
                return int(line.split()[1])
    raise RuntimeError("no totals in %s" % files[0])


def count(py, config, steps, tmp):
    d = tempfile.mkdtemp(dir=tmp)
    prefix = os.path.join(d, "cg")
    script = os.path.join(d, "child.py")
    with open(script, "w") as f:
        f.write(CHILD)
    cmd = ["valgrind", "--tool=callgrind", "--separate-threads=yes",
           "--callgrind-out-file=" + prefix, py, script, str(steps)]
    r = subprocess.run(cmd, env=env_for(config, d), capture_output=True,
                       text=True)
    if r.returncode != 0:
        raise RuntimeError("%s %s: valgrind exit %d: %s" % (
            py, config, r.returncode, r.stderr.strip().splitlines()[-1:]))
    return main_thread_instr(prefix)


def run_for(py, args, tmp):
    ver = torch_version(py)
    if ver is None:
        return
    jobs = [(c, n) for c in CONFIGS for n in (args.short, args.long)]
    with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as ex:
        res = dict(zip(jobs, ex.map(lambda j: count(py, j[0], j[1], tmp),
                                    jobs)))
    per = {c: (res[(c, args.long)] - res[(c, args.short)]) /
           (args.long - args.short) for c in CONFIGS}
    print("torch %s (%s): training-thread instructions per step, overhead-"
          "bound model (callgrind, %d - %d steps)"
          % (ver, py, args.long, args.short))
    base = per["none"]
    for c in CONFIGS:
        print("  %-14s %12.0f  %+7.2f %%  %+9.0f per step%s" % (
            c, per[c], 100.0 * (per[c] / base - 1), per[c] - base,
            "   target <= 0.5 % (as time)" if c == "idle" else ""))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", nargs="*")
    ap.add_argument("--short", type=int, default=10)
    ap.add_argument("--long", type=int, default=210)
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        print("bench_instr: valgrind not installed (scripts/install-deps.sh "
              "installs it): skipped")
        return 0
    if args.long <= args.short:
        ap.error("--long must exceed --short")
    return run_interpreters("bench_instr", args, run_for)


if __name__ == "__main__":
    sys.exit(main())
