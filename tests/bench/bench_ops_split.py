#!/usr/bin/env python3
"""Where the operators' capture cost goes, under torch: the agent's own
callbacks against libtorch's work for them, on torch 1.13 and 2.x.

The dispatcher-bound model of bench_torch.py (24 blocks Linear -> GELU ->
Linear, hidden 32, batch 32, one intra-op thread) captures for SECONDS
with operators (GRADTRACE_OPS=1) and without (the default), each in its
own process under `perf record`, which samples only the timed step loop
(started disabled, enabled by the child through perf's control FIFO
after its warm-up). Samples per step are grouped by the object they fell
in:
  agent       libgradtrace.so and the package's _gthooks (our code)
  libtorch    libtorch_cpu, libc10, libtorch_python
  C runtime   libc, libstdc++, ld.so (malloc, strings, dynamic_cast,
              what libtorch calls)
  python      the interpreter
  kernel, other
and printed as microseconds per step (samples x the sampling period),
with operators, without, the difference and each group's share of it,
then the symbols that grew most. The agent's share is what gradtrace
can still take off operator capture; the rest is libtorch's
RecordFunction machinery, which runs while any callback is enabled.
tests/bench/bench_opcb.sh measures the agent's callbacks without torch.

Sampling attributes a slow instruction's cost to the next one, and two
processes differ by a percent or two: the figures are a split, not a
precise cost (bench_torch.py times it, bench_instr.py counts it), and
need a quiet machine (with another job on the cores, 2 s runs put
libtorch's part near zero).

Needs perf (linux-perf; scripts/install-deps.sh installs it); prints
"skipped" without it, or where perf may not sample (perf_event_paranoid
for a non-root user). Benchmarks print figures; they never pass or fail.
Usage: bench_ops_split.py [--python PY ...] [--seconds S] [--freq HZ]
"""

import argparse
import collections
import os
import subprocess
import sys
import tempfile

from bench_torch import (AGENT, HERE, ROOT, run_interpreters, tool_missing,
                         torch_version)

CHILD = r"""
import os, sys, time
sys.path.insert(0, %r)
import torch
torch.set_num_threads(1)
from bench_torch import build_model
step = build_model("dispatch")
for _ in range(20):
    step()
ctl = os.open(sys.argv[2], os.O_WRONLY)
os.write(ctl, b"enable\n")
n, t0 = 0, time.perf_counter()
while time.perf_counter() - t0 < float(sys.argv[1]):
    step()
    n += 1
os.write(ctl, b"disable\n")
os.close(ctl)
with open(sys.argv[3], "w") as f:
    f.write("%%d %%f\n" %% (n, time.perf_counter() - t0))
""" % HERE

GROUPS = [("agent", ("libgradtrace", "_gthooks")),
          ("libtorch", ("libtorch", "libc10")),
          ("C runtime", ("libc.so", "libc-", "libstdc++", "ld-linux", "libm.so",
                         "libgcc")),
          ("python", ("python", "libpython")),
          ("kernel", ("[kernel",))]


def group_of(dso):
    for name, keys in GROUPS:
        if any(k in dso for k in keys):
            return name
    return "other"


def profile(py, ops, seconds, freq, tmp):
    """(steps, {(dso, sym): samples}) of the timed loop."""
    tag = "ops" if ops else "noops"
    d = tempfile.mkdtemp(dir=tmp, prefix=tag)
    script, data = os.path.join(d, "child.py"), os.path.join(d, "perf.data")
    fifo, out = os.path.join(d, "ctl"), os.path.join(d, "steps")
    with open(script, "w") as f:
        f.write(CHILD)
    os.mkfifo(fifo)
    env = dict(os.environ, LD_PRELOAD=AGENT,
               PYTHONPATH=os.path.join(ROOT, "python"),
               GRADTRACE_FILE=os.path.join(d, "t.gtr"), GRADTRACE_CAPTURE="1")
    env.pop("GRADTRACE_SOCKET", None)
    env["GRADTRACE_OPS"] = "1" if ops else "0"  # operators are opt-in
    # perf opens the FIFO for reading before it starts the child, which
    # opens it for writing: no deadlock.
    cmd = ["perf", "record", "-q", "-F", str(freq), "-D", "-1",
           "--control", "fifo:" + fifo, "-o", data, "--",
           py, script, str(seconds), fifo, out]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0 or not os.path.exists(out):
        raise RuntimeError("perf record (%s): exit %d: %s" % (
            tag, r.returncode, (r.stderr.strip().splitlines() or [""])[-1]))
    steps = int(open(out).read().split()[0])
    rep = subprocess.run(
        ["perf", "report", "-i", data, "--stdio", "-n", "--sort",
         "comm,dso,sym", "--percent-limit", "0"],
        capture_output=True, text=True, check=True).stdout
    samples = collections.Counter()
    for line in rep.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split(None, 3)
        # "  12.34%  1234  comm  dso  [.] sym"
        if len(parts) < 4 or not parts[1].isdigit():
            continue
        rest = parts[3].split(None, 1)
        comm = parts[2]
        if comm.startswith("gt-"):  # the agent's own threads
            continue
        dso = rest[0]
        sym = rest[1] if len(rest) > 1 else ""
        samples[(dso, sym.replace("[.] ", "").replace("[k] ", "").strip())] += \
            int(parts[1])
    return steps, samples


def run_for(py, args, tmp):
    ver = torch_version(py)
    if ver is None:
        return
    period_us = 1e6 / args.freq
    try:
        (n0, s0), (n1, s1) = [profile(py, ops, args.seconds, args.freq, tmp)
                              for ops in (False, True)]
    except (RuntimeError, subprocess.CalledProcessError, ValueError) as e:
        print("bench_ops_split: torch %s: %s: skipped" % (ver, e))
        return

    def per_step(samples, steps, key):
        return sum(v for k, v in samples.items() if key(k)) * period_us / steps

    print("torch %s (%s): dispatcher-bound model, perf samples of the timed "
          "loop at %d Hz, %d steps with operators, %d without"
          % (ver, py, args.freq, n1, n0))
    tot0 = per_step(s0, n0, lambda k: True)
    tot1 = per_step(s1, n1, lambda k: True)
    diff = tot1 - tot0
    print("  %-10s %12s %12s %12s %8s" % ("", "no ops us", "ops us",
                                          "difference", "share"))
    for name in [g for g, _ in GROUPS] + ["other"]:
        a = per_step(s0, n0, lambda k: group_of(k[0]) == name)
        b = per_step(s1, n1, lambda k: group_of(k[0]) == name)
        print("  %-10s %12.1f %12.1f %+12.1f %7.1f %%" % (
            name, a, b, b - a, 100.0 * (b - a) / diff if diff else 0.0))
    print("  %-10s %12.1f %12.1f %+12.1f   (%+.1f %% of the step)" % (
        "all", tot0, tot1, diff, 100.0 * diff / tot0 if tot0 else 0.0))
    grew = sorted(set(s0) | set(s1), key=lambda k: -(
        s1.get(k, 0) / n1 - s0.get(k, 0) / n0))
    print("  grew most (us per step):")
    for k in grew[:args.top]:
        d = (s1.get(k, 0) / n1 - s0.get(k, 0) / n0) * period_us
        print("    %+8.1f  %-9s %s  [%s]" % (d, group_of(k[0]), k[1][:70],
                                              os.path.basename(k[0])))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", nargs="*")
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--freq", type=int, default=4000)
    ap.add_argument("--top", type=int, default=12)
    args = ap.parse_args()
    if tool_missing("bench_ops_split", "perf", "linux-perf"):
        return 0
    probe = subprocess.run(["perf", "record", "-q", "-o", "/dev/null", "--",
                            "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        print("bench_ops_split: perf cannot sample here (%s): skipped"
              % (probe.stderr.strip().splitlines() or ["?"])[-1])
        return 0
    return run_interpreters("bench_ops_split", args, run_for)


if __name__ == "__main__":
    sys.exit(main())
