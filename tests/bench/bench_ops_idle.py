#!/usr/bin/env python3
"""Per-operator cost of the agent around a capture, on torch 1.13 and 2.x.

A loop of two tiny aten operators (torch.add, torch.mul on 4 floats,
about 0.8 us each from Python) in one process per configuration, driven
in interleaved rounds:
  bare      no agent
  idle      agent + package, never captured
  after     agent + package after a short capture (the operator callback
            was registered by it, then paused: agent/ops.c)
  capture   agent + package capturing (every operator recorded into a
            .gtr file)
"after" against "idle" is what a finished capture window leaves behind:
while any RecordFunction callback is enabled libtorch builds a
RecordFunction per operator, so without the pause it stays above idle
for the rest of the run.

Figures: ns per operator, the median over rounds of each round's median
(training thread CPU time), the spread over rounds, the difference to
bare. Benchmarks print figures; they never pass or fail on time.
Usage: bench_ops_idle.py [--rounds R] [--python PY ...]
"""

import argparse
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("ROOT") or os.path.abspath(os.path.join(HERE, "..", ".."))
BUILD = os.environ.get("BUILD", "build")
AGENT = os.path.join(ROOT, BUILD, "libgradtrace.so")
VENV_PY = os.path.expanduser("~/.cache/gradtrace/torch2-venv/bin/python")
CONFIGS = ["bare", "idle", "after", "capture"]

CHILD = r'''
import statistics, sys, time
import torch
torch.set_num_threads(1)
mode = sys.argv[1]
if mode != "bare":
    import gradtrace
    gradtrace.install()
x = torch.ones(4)
def ops(n):
    t = time.thread_time_ns()
    for _ in range(n):
        torch.add(x, x); torch.mul(x, x)
    return (time.thread_time_ns() - t) / (2 * n)
if mode in ("after", "capture"):
    # A module and a node while capturing: the callback is registered.
    m = torch.nn.Linear(4, 4)
    m(torch.ones(2, 4, requires_grad=True)).sum().backward()
    ops(100)
if mode == "after":
    gradtrace.capture_stop()
ops(20000)
print(statistics.median(ops(20000) for _ in range(9)))
'''


def run(py, mode, tmp):
    env = dict(os.environ)
    env.pop("GRADTRACE_FILE", None)
    if mode != "bare":
        env.update(LD_PRELOAD=AGENT, PYTHONPATH=os.path.join(ROOT, "python"),
                   GRADTRACE_FILE=os.path.join(tmp, "b.gtr"),
                   GRADTRACE_CAPTURE="0" if mode == "idle" else "1")
    out = subprocess.run([py, "-c", CHILD, mode], env=env, check=True,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         text=True).stdout
    return float(out.split()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--python", action="append")
    a = ap.parse_args()
    pys = a.python or [os.environ.get("PYTHON", "/usr/bin/python3")] + \
        ([VENV_PY] if os.path.exists(VENV_PY) else [])
    if not os.path.exists(AGENT):
        print("bench_ops_idle: no agent at %s (run make)" % AGENT)
        return 1
    import tempfile
    with tempfile.TemporaryDirectory(prefix="gt-bench-") as tmp:
        for py in pys:
            try:
                v = subprocess.run([py, "-c", "import torch; print(torch.__version__)"],
                                   check=True, stdout=subprocess.PIPE,
                                   text=True).stdout.strip()
            except (OSError, subprocess.CalledProcessError):
                print("%s: no torch, skipped" % py)
                continue
            res = {c: [] for c in CONFIGS}
            for _ in range(a.rounds):
                for c in CONFIGS:
                    res[c].append(run(py, c, tmp))
            bare = statistics.median(res["bare"])
            print("torch %s, %d rounds, ns per operator (2-op Python loop):"
                  % (v, a.rounds))
            for c in CONFIGS:
                r = res[c]
                print("  %-8s %7.1f  (%.1f..%.1f)  %+6.1f vs bare"
                      % (c, statistics.median(r), min(r), max(r),
                         statistics.median(r) - bare))
    return 0


if __name__ == "__main__":
    sys.exit(main())
