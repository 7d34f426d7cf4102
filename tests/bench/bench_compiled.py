#!/usr/bin/env python3
"""The step cost of recording a torch.compile'd model (issue 26): a
compiled MLP (8 blocks, Linear -> GELU -> Linear with LayerNorm and a
residual, hidden 256, batch 64, CPU inductor, whole model compiled,
fullgraph=True), one intra-op thread, SGD. Configurations, each in its own
process (interleaved over rounds, so drift on a shared machine hits all
alike), compile and warm-up excluded:

  none      no agent
  idle      agent + Python package, capture off (maps sent, regions idle)
  capture   agent + package capturing (GRADTRACE_FILE, default capture:
            the regions' kernel scopes and extern ops, no --ops)
  kineto    no agent, torch.profiler.profile(activities=[CPU]) around the
            timed steps (every operator)
  toggle    agent + package in one process, capture switched on and off
            every 5 steps (gradtrace.capture_start/stop): the same
            generated code and memory layout for both, so the difference
            is capture's alone (separate processes differ by several %
            from run to run, more than the budget)
  ktoggle   no agent, one process, torch.profiler.profile(activities=[CPU])
            entered and left every 5 steps: torch.profiler's twin of toggle

Printed: the median step per configuration and its overhead against
"none". Needs torch 2.x (TORCH2_PY or the torch2 venv of
scripts/install-deps.sh); prints a line and exits 0 without it.
Benchmarks print figures; they never pass or fail on time.
Usage: bench_compiled.py [--rounds R] [--iters N]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("ROOT") or os.path.abspath(os.path.join(HERE, "..", ".."))
BUILD = os.environ.get("BUILD", "build")
AGENT = os.path.join(ROOT, BUILD, "libgradtrace.so")
CONFIGS = ["none", "idle", "capture", "kineto", "toggle", "ktoggle"]
TOGGLED = ("toggle", "ktoggle")


def torch2():
    py = os.environ.get("TORCH2_PY") or os.path.expanduser(
        "~/.cache/gradtrace/torch2-venv/bin/python")
    return py if os.access(py, os.X_OK) else None


def child(args):
    import torch
    from torch import nn

    torch.set_num_threads(1)
    torch.manual_seed(0)

    class Block(nn.Module):
        def __init__(self, w):
            super().__init__()
            self.norm = nn.LayerNorm(w)
            self.up = nn.Linear(w, 4 * w)
            self.down = nn.Linear(4 * w, w)

        def forward(self, x):
            return x + self.down(nn.functional.gelu(self.up(self.norm(x))))

    model = nn.Sequential(*[Block(args.hidden) for _ in range(8)])
    cm = torch.compile(model, fullgraph=True)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(64, args.hidden)

    def step():
        opt.zero_grad()
        cm(x).pow(2).mean().backward()
        opt.step()

    for _ in range(3):  # compile, then warm up
        step()
    times = []

    def run():
        for _ in range(args.iters):
            t0 = time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)

    if args.child == "kineto":
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU]):
            run()
    elif args.child in TOGGLED:
        if args.child == "toggle":
            import gradtrace
            switch = [gradtrace.capture_stop, gradtrace.capture_start]
        else:
            from torch.profiler import ProfilerActivity, profile
            prof = []

            def kineto_on():
                prof.append(profile(activities=[ProfilerActivity.CPU]))
                prof[-1].__enter__()

            def kineto_off():
                if prof:
                    prof.pop().__exit__(None, None, None)
            switch = [kineto_off, kineto_on]
        on, off = [], []
        for block in range(max(2, args.iters // 5)):
            switch[block % 2]()
            step()  # the switch settles at a step boundary
            del times[:]
            for _ in range(5):
                t0 = time.perf_counter()
                step()
                times.append(time.perf_counter() - t0)
            (on if block % 2 else off).extend(times)
        print(" ".join("%.9f" % t for t in on))
        print(" ".join("%.9f" % t for t in off))
        if args.child == "ktoggle":
            # torch 2.15 crashes at exit (SIGSEGV after "Requested callback
            # is not found") once profiler sessions were entered and left
            # repeatedly around compiled graphs: the figures are out.
            sys.stdout.flush()
            os._exit(0)
        return
    else:
        run()
    print(" ".join("%.9f" % t for t in times))


def launch(py, config, args, tmp):
    env = dict(os.environ)
    for k in ("LD_PRELOAD", "PYTHONPATH"):
        env.pop(k, None)
    env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(tmp, "inductor-" + config)
    if config in ("idle", "capture", "toggle"):
        env["LD_PRELOAD"] = AGENT
        env["PYTHONPATH"] = os.path.join(ROOT, "python")
        env["GRADTRACE_FILE"] = os.path.join(tmp, config + ".gtr")
        env["GRADTRACE_CAPTURE"] = "1" if config == "capture" else "0"
    cmd = [py, os.path.abspath(__file__), "--child", config,
           "--iters", str(args.iters), "--hidden", str(args.hidden)]
    out = subprocess.run(cmd, env=env, check=True, capture_output=True,
                         text=True).stdout
    if config in TOGGLED:  # two lines: capture on, then off
        return [[float(v) for v in line.split()] for line in out.splitlines()[:2]]
    return [float(v) for v in out.split()]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--child")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--hidden", type=int, default=256)
    args = ap.parse_args()
    if args.child:
        child(args)
        return 0
    py = torch2()
    if py is None:
        print("   no torch 2.x (TORCH2_PY, scripts/install-deps.sh): skipped")
        return 0
    times = {c: [] for c in CONFIGS}
    toggled = {c: ([], []) for c in TOGGLED}
    with tempfile.TemporaryDirectory(prefix="gt-bench-compiled-") as tmp:
        for _ in range(args.rounds):
            for c in CONFIGS:
                got = launch(py, c, args, tmp)
                if c in TOGGLED:
                    toggled[c][0].extend(got[0])
                    toggled[c][1].extend(got[1])
                    times[c].extend(got[0] + got[1])
                else:
                    times[c].extend(got)
    base = statistics.median(times["none"])
    print("compiled MLP, 8 blocks, hidden %d, batch 64, CPU inductor, "
          "%d rounds x %d steps:" % (args.hidden, args.rounds, args.iters))
    for c in CONFIGS:
        if c in TOGGLED:
            continue
        m = statistics.median(times[c])
        print("  %-8s median step %8.3f ms  %+6.1f %%  (separate processes)"
              % (c, m * 1e3, (m / base - 1) * 100))
    for c, what in (("toggle", "gradtrace capture"), ("ktoggle", "torch.profiler")):
        on, off = statistics.median(toggled[c][0]), statistics.median(toggled[c][1])
        print("  in one process: %s on %.3f ms, off %.3f ms: %+.1f %%"
              % (what, on * 1e3, off * 1e3, (on / off - 1) * 100))
    return 0


if __name__ == "__main__":
    sys.exit(main())
