#!/usr/bin/env python3
"""Instructions per training step of the training thread, counted by
valgrind (callgrind), with and without gradtrace, on torch 1.13 and 2.x.

Step times on a shared machine move by a percent or two from one process
to the next (bench_torch.py's "control" row shows how much), which is
more than the idle target (<= 0.5 %) it is meant to resolve. An
instruction count does not move: the same program runs the same
instructions. So this benchmark counts them, for two models of
bench_torch.py, in these configurations:
  overhead-bound (24 blocks Linear -> GELU -> Linear, hidden 8, batch 1),
  the idle target's model:
    none           no agent, no package
    idle           agent + package, nothing captured or armed
    capture-noops  capturing layers, nodes and steps (GRADTRACE_OPS=0)
  dispatcher-bound (the same, hidden 32, batch 32), and the small decoder
  (4 layers, d 64, seq 32, batch 4), the capture targets' models:
    none, capture-noops, and
    capture        capturing with every aten operator (the default)

Each configuration runs twice under callgrind (--separate-threads=yes),
for SHORT and LONG steps (for the models whose steps take longer, fewer:
the dispatcher-bound model SHORT + (LONG - SHORT) / 2, the decoder
SHORT + (LONG - SHORT) / 10) after the same start-up (torch, the model, five
warm-up steps, then gc.freeze(); PYTHONHASHSEED=0); the training
thread's difference over the LONG - SHORT steps is its per-step count,
with start-up and warm-up cancelled out. The agent's streamer thread is not
in it (as in bench_torch.py's thread CPU time).

Instructions are not time: a cache miss costs no instruction, and a TSC
read one instruction and tens of cycles (callgrind counts the agent
reading the TSC, as natively; where its calibration fails it reads
CLOCK_MONOTONIC, more instructions per capture timestamp). The idle row is the one this is for: while idle the agent takes no
timestamps, and what it and the package execute is what it costs. The
capture rows count what capturing executes on the training thread (the
streamer's compression is on its own thread and not in them), which
step times on this machine resolve only to a percent or two.

Benchmarks print figures; they never pass or fail.
Usage: bench_instr.py [--python PY ...] [--short N] [--long N]
"""

import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

from bench_torch import (AGENT, HERE, ROOT, run_interpreters, tool_missing,
                         torch_version)

# (model, configurations) counted, in the order printed.
MODELS = [("overhead", ["none", "idle", "capture-noops"]),
          ("dispatch", ["none", "capture-noops", "capture"]),
          ("decoder", ["none", "capture-noops", "capture"])]
TITLE = {"overhead": "overhead-bound", "dispatch": "dispatcher-bound",
         "decoder": "small decoder"}
TARGET = {"overhead": "target <= 0.5 % (idle, as time)",
          "dispatch": "target <= 2 % (as time)",
          "decoder": "target <= 1 % (as time)"}

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
step = build_model(sys.argv[2])
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
        # Under valgrind the streamer runs in turns with the training
        # thread and falls behind: with the default 2 MiB ring a 60-step
        # dispatcher-bound capture with operators dropped 64,071 records
        # (29 %), and dropping executes less than keeping. A 64 MiB ring
        # holds a whole run; count() checks what was lost.
        env["GRADTRACE_BUFFER_KB"] = "1024"
        env["GRADTRACE_BUFFER_BLOCKS"] = "64"
        # Operators are opt-in: each configuration says which it is.
        env["GRADTRACE_OPS"] = "0" if config == "capture-noops" else "1"
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


def count(py, model, config, steps, tmp):
    d = tempfile.mkdtemp(dir=tmp)
    prefix = os.path.join(d, "cg")
    script = os.path.join(d, "child.py")
    with open(script, "w") as f:
        f.write(CHILD)
    cmd = ["valgrind", "--tool=callgrind", "--separate-threads=yes",
           "--callgrind-out-file=" + prefix, py, script, str(steps), model]
    r = subprocess.run(cmd, env=env_for(config, d), capture_output=True,
                       text=True)
    if r.returncode != 0:
        raise RuntimeError("%s %s: valgrind exit %d: %s" % (
            py, config, r.returncode, r.stderr.strip().splitlines()[-1:]))
    return main_thread_instr(prefix), lost_records(config, d)


def lost_records(config, d):
    """Records the capture lost (gradtrace convert's count), 0 when
    nothing was captured, None when it cannot tell."""
    if not config.startswith("capture"):
        return 0
    r = subprocess.run([os.path.join(ROOT, os.environ.get("BUILD", "build"),
                                     "gradtrace"), "convert", "-o",
                        os.path.join(d, "t.json"),
                        os.path.join(d, config + ".gtr")],
                       capture_output=True, text=True)
    m = re.search(r"; lost (\d+) events", r.stderr + r.stdout)
    return int(m.group(1)) if m else None


def run_for(py, args, tmp):
    ver = torch_version(py)
    if ver is None:
        return
    span = args.long - args.short
    lengths = {"overhead": (args.short, args.long),
               "dispatch": (args.short, args.short + max(1, span // 2)),
               "decoder": (args.short, args.short + max(1, span // 10))}
    jobs = [(m, c, n) for m, configs in MODELS for c in configs
            for n in lengths[m]]
    with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as ex:
        res = dict(zip(jobs, ex.map(lambda j: count(py, j[0], j[1], j[2], tmp),
                                    jobs)))
    for m, configs in MODELS:
        short, long_ = lengths[m]
        per = {c: (res[(m, c, long_)][0] - res[(m, c, short)][0]) /
               (long_ - short) for c in configs}
        lost = {c: [res[(m, c, n)][1] for n in (short, long_)] for c in configs}
        print("torch %s (%s): training-thread instructions per step, %s "
              "model (callgrind, %d - %d steps)"
              % (ver, py, TITLE[m], long_, short))
        base = per["none"]
        for c in configs:
            note = ""
            if c == "idle" or (m != "overhead" and c != "none"):
                note = "   " + TARGET[m]
            if any(x != 0 for x in lost[c]):
                note += "   (records lost: %s; the count is low)" % "/".join(
                    "?" if x is None else str(x) for x in lost[c])
            print("  %-14s %12.0f  %+7.2f %%  %+9.0f per step%s" % (
                c, per[c], 100.0 * (per[c] / base - 1), per[c] - base, note))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", nargs="*")
    ap.add_argument("--short", type=int, default=10)
    ap.add_argument("--long", type=int, default=210)
    args = ap.parse_args()
    if tool_missing("bench_instr", "valgrind", "valgrind"):
        return 0
    if args.long <= args.short:
        ap.error("--long must exceed --short")
    return run_interpreters("bench_instr", args, run_for)


if __name__ == "__main__":
    sys.exit(main())
