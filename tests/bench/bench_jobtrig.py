#!/usr/bin/env python3
"""Per-step cost of job-wide triggers (python/gradtrace/_jobtrig.py).

Nothing of _jobtrig runs inside a training step: its watcher thread is
blocked on the job's store and its poller wakes 10 times a second for one
ctypes call. This measures what that costs a step anyway (the poller's
GIL hand-offs, the blocked thread): a one-rank gloo job (so the store and
the threads exist) runs a small model's training steps with the agent
preloaded and capture off, GRADTRACE_JOBTRIG=1 against =0, in alternating
processes over several rounds; printed are the per-step medians and their
difference, and the cost of one poll (gt_job_trigger_take via ctypes).
Benchmarks print figures; they never pass or fail on time.
Usage: bench_jobtrig.py [--rounds R] [--steps N]
"""

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("ROOT") or os.path.abspath(os.path.join(HERE, "..", ".."))
BUILD = os.environ.get("BUILD", "build")
AGENT = os.path.join(ROOT, BUILD, "libgradtrace.so")

CHILD = r"""
import ctypes, statistics, sys, time
import torch, torch.distributed as dist
dist.init_process_group("gloo")
torch.set_num_threads(1)
m = torch.nn.Sequential(*[torch.nn.Linear(8, 8) for _ in range(8)])
opt = torch.optim.SGD(m.parameters(), lr=0.01)
x = torch.randn(1, 8)
time.sleep(0.5)  # the job-trigger threads are up
ts = []
for i in range(int(sys.argv[1])):
    t0 = time.perf_counter_ns()
    loss = m(x).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    ts.append(time.perf_counter_ns() - t0)
poll = None
lib = ctypes.CDLL(None)
if hasattr(lib, "gt_job_trigger_take"):
    f = lib.gt_job_trigger_take
    f.restype, f.argtypes = ctypes.c_int, [ctypes.c_char_p, ctypes.c_size_t]
    buf = ctypes.create_string_buffer(4096)
    t0 = time.perf_counter_ns()
    for _ in range(20000):
        f(buf, 4096)
    poll = (time.perf_counter_ns() - t0) / 20000
import threading
names = sorted(t.name for t in threading.enumerate())
print(statistics.median(ts[len(ts) // 5:]), poll, names.count("gradtrace-jobtrig"))
dist.destroy_process_group()
"""


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def run(jobtrig, steps, tmp):
    env = dict(os.environ, LD_PRELOAD=AGENT, PYTHONPATH=os.path.join(ROOT, "python"),
               GRADTRACE_CAPTURE="0", GRADTRACE_FILE=os.path.join(tmp, "b.gtr"),
               GRADTRACE_JOBTRIG=jobtrig, RANK="0", WORLD_SIZE="1",
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
               OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", CHILD, str(steps)], env=env,
                         capture_output=True, text=True, check=True).stdout.split()
    return float(out[0]), (float(out[1]) if out[1] != "None" else None), int(out[2])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=3000)
    a = ap.parse_args()
    if not os.path.exists(AGENT):
        print("agent not built: " + AGENT)
        return 1
    res = {"0": [], "1": []}
    polls, threads = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(a.rounds):
            for jt in ("0", "1"):
                step, poll, nthreads = run(jt, a.steps, tmp)
                res[jt].append(step)
                threads[jt] = nthreads
                if poll is not None:
                    polls.append(poll)
    off, on = statistics.median(res["0"]), statistics.median(res["1"])
    print("step (tiny 8-layer model, median of %d rounds x %d steps):" % (a.rounds, a.steps))
    print("  job triggers off: %8.1f us   (%d gradtrace-jobtrig threads)" % (off / 1e3, threads["0"]))
    print("  job triggers on:  %8.1f us   (%d gradtrace-jobtrig threads)" % (on / 1e3, threads["1"]))
    print("  difference:       %+8.2f us per step (%+.2f%%); rounds off %s, on %s"
          % ((on - off) / 1e3, 100 * (on - off) / off,
             [round(x / 1e3, 1) for x in res["0"]], [round(x / 1e3, 1) for x in res["1"]]))
    if polls:
        print("  one poll (gt_job_trigger_take via ctypes): %.0f ns, 10 per second: "
              "%.1f us of CPU per second, none inside a step" % (
                  statistics.median(polls), statistics.median(polls) * 10 / 1e3))
    return 0


if __name__ == "__main__":
    sys.exit(main())
