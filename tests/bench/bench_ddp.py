#!/usr/bin/env python3
"""The step cost of recording a DDP job (issue 27: DDP's reducer is
interposed and every torch.distributed call is a communication scope): two
gloo ranks (torch.multiprocessing.spawn) of an MLP (6 blocks, Linear ->
GELU -> Linear with LayerNorm and a residual, hidden 256, batch 32), one
intra-op thread each, DDP with 1 MB buckets (several all-reduces per
step), SGD. Configurations, each in its own pair of processes, interleaved
over rounds; warm-up excluded; rank 0's step times:

  none      no agent
  toggle    agent + Python package in one job, capture switched on and
            off every 5 steps on both ranks (gradtrace.capture_start/stop):
            "idle" and "capture" from the same processes, so the
            difference is capture's alone
  kineto    no agent, torch.profiler.profile(activities=[CPU]) around the
            timed steps on both ranks (every operator)

Printed: the median step per configuration and its overhead against
"none" and, for capture, against idle in the same processes. Runs with
PYTHON (Debian's torch 1.13) and, when present, the torch 2.x venv.
Benchmarks print figures; they never pass or fail on time.
Usage: bench_ddp.py [--rounds R] [--iters N]
"""

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("ROOT") or os.path.abspath(os.path.join(HERE, "..", ".."))
BUILD = os.environ.get("BUILD", "build")
AGENT = os.path.join(ROOT, BUILD, "libgradtrace.so")
CONFIGS = ["none", "toggle", "kineto"]


def rank_main(rank, config, iters, port, out):
    import torch
    import torch.distributed as dist
    from torch import nn

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port,
                            rank=rank, world_size=2)
    torch.manual_seed(0)

    class Block(nn.Module):
        def __init__(self, w):
            super().__init__()
            self.norm = nn.LayerNorm(w)
            self.up = nn.Linear(w, 2 * w)
            self.down = nn.Linear(2 * w, w)

        def forward(self, x):
            return x + self.down(nn.functional.gelu(self.up(self.norm(x))))

    model = nn.parallel.DistributedDataParallel(
        nn.Sequential(*[Block(256) for _ in range(6)]), bucket_cap_mb=1)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(32, 256)

    def step():
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()

    for _ in range(5):
        step()
    times = []
    on, off = [], []
    if config == "toggle":
        import gradtrace
        for block in range(max(2, iters // 5)):
            (gradtrace.capture_start if block % 2 else gradtrace.capture_stop)()
            step()  # the switch settles at a step boundary
            del times[:]
            for _ in range(5):
                t0 = time.perf_counter()
                step()
                times.append(time.perf_counter() - t0)
            (on if block % 2 else off).extend(times)
    else:
        def run():
            for _ in range(iters):
                t0 = time.perf_counter()
                step()
                times.append(time.perf_counter() - t0)
        if config == "kineto":
            from torch.profiler import ProfilerActivity, profile
            with profile(activities=[ProfilerActivity.CPU]):
                run()
        else:
            run()
    dist.barrier()
    dist.destroy_process_group()
    if rank == 0:
        with open(out, "w") as f:
            if config == "toggle":
                f.write(" ".join("%.9f" % t for t in on) + "\n")
                f.write(" ".join("%.9f" % t for t in off) + "\n")
            else:
                f.write(" ".join("%.9f" % t for t in times) + "\n")


def child(args):
    import torch.multiprocessing as mp
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(rank_main, args=(args.child, args.iters, port, args.out), nprocs=2)


def launch(py, config, args, tmp):
    env = dict(os.environ)
    for k in ("LD_PRELOAD", "PYTHONPATH"):
        env.pop(k, None)
    if config == "toggle":
        env["LD_PRELOAD"] = AGENT
        env["PYTHONPATH"] = os.path.join(ROOT, "python")
        env["GRADTRACE_FILE"] = os.path.join(tmp, config + ".gtr")
        env["GRADTRACE_CAPTURE"] = "0"
    out = os.path.join(tmp, config + ".times")
    cmd = [py, os.path.abspath(__file__), "--child", config,
           "--iters", str(args.iters), "--out", out]
    subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
    with open(out) as f:
        lines = f.read().splitlines()
    rows = [[float(v) for v in line.split()] for line in lines]
    return rows if config == "toggle" else rows[0]


def bench(py, args):
    ver = subprocess.run([py, "-c", "import torch; print(torch.__version__)"],
                         capture_output=True, text=True)
    if ver.returncode != 0:
        print("  %s: no torch, skipped" % py)
        return
    times = {"none": [], "idle": [], "capture": [], "kineto": []}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.rounds):
            for config in CONFIGS:
                got = launch(py, config, args, tmp)
                if config == "toggle":
                    times["capture"].extend(got[0])
                    times["idle"].extend(got[1])
                else:
                    times[config].extend(got)
    med = {k: statistics.median(v) * 1e3 for k, v in times.items() if v}
    print("  torch %s (%s), 2 gloo ranks, rank 0, %d rounds x %d steps"
          % (ver.stdout.strip(), py, args.rounds, args.iters))
    for k in ("none", "idle", "capture", "kineto"):
        extra = ""
        if k == "capture":
            extra = "   (%+.1f %% against idle in the same processes)" % (
                100 * (med["capture"] / med["idle"] - 1))
        print("    %-8s %8.3f ms/step  %+6.1f %%%s"
              % (k, med[k], 100 * (med[k] / med["none"] - 1), extra))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--child")
    ap.add_argument("--out")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=30)
    args = ap.parse_args()
    if args.child:
        return child(args)
    if not os.path.exists(AGENT):
        print("  %s missing: run make" % AGENT)
        return 1
    pys = [os.environ.get("PYTHON", "/usr/bin/python3")]
    t2 = os.environ.get("TORCH2_PY") or os.path.expanduser(
        "~/.cache/gradtrace/torch2-venv/bin/python")
    if os.access(t2, os.X_OK):
        pys.append(t2)
    for py in pys:
        bench(py, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
