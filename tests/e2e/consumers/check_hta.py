"""HolisticTraceAnalysis (HTA) on gradtrace traces, run by the consumers
venv (scripts/install-consumers.sh). Every number HTA gives is compared
with the same number computed here from the trace's own events, so a
trace that HTA misreads (ranks merged, steps or kernels not found,
launches not linked) fails.

  check_hta.py ranks DIR R1,R2,...   every rank loads, steps as in the files
  check_hta.py gpu DIR               the analyses on one GPU trace
  check_hta.py window DIR IT         a capture window's file alone: its
                                     step is IT and the critical path runs

Exit status 0 when everything matches, else 1 with the reason.
"""
import collections
import glob
import json
import logging
import os
import sys
import warnings

warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)

import pandas as pd  # noqa: E402
from hta.trace_analysis import TraceAnalysis  # noqa: E402


def fail(msg):
    sys.exit("check_hta: " + msg)


def near(a, b, what, tol=1.0):
    if abs(float(a) - float(b)) > tol:
        fail("%s: HTA %r, trace %r" % (what, a, b))


def load_events(path):
    with open(path) as f:
        return json.load(f)["traceEvents"]


def steps_of(evs):
    return sorted(int(e["name"].split("#")[1]) for e in evs
                  if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#"))


def analysis(d):
    # Quiet: HTA prints its parsing progress on stdout.
    with open(os.devnull, "w") as null:
        old, sys.stdout = sys.stdout, null
        try:
            return TraceAnalysis(trace_dir=d, include_last_profiler_step=True)
        finally:
            sys.stdout = old


def check_ranks(d, want):
    ta = analysis(d)
    got = sorted(ta.t.traces.keys())
    if got != want:
        fail("ranks %r, want %r (HTA merged or lost files)" % (got, want))
    steps = set()
    for f in glob.glob(os.path.join(d, "*.json")):
        steps.update(steps_of(load_events(f)))
    hs = [int(s) for s in ta.get_profiler_steps()]
    if not hs or hs != sorted(steps):
        fail("get_profiler_steps %r, the files' ProfilerStep#N %r" % (hs, sorted(steps)))
    print("hta: ranks %r, steps %r" % (got, hs))


class Gpu:
    """What one GPU trace holds, in HTA's units (microseconds)."""

    def __init__(self, path, need_ops=True):
        evs = load_events(path)
        self.kernels = [e for e in evs if e.get("cat") == "kernel"]
        self.runtime = {e["args"]["correlation"]: e for e in evs
                        if e.get("cat") == "cuda_runtime"}
        self.ops = {e["args"]["External id"]: e for e in evs if e.get("cat") == "cpu_op"}
        self.steps = sorted((e for e in evs if e.get("name", "").startswith("ProfilerStep#")),
                            key=lambda e: e["ts"])
        if not self.kernels or not self.runtime or (need_ops and not self.ops):
            fail("the trace lacks kernels, launches or operators")

    def busy(self, ks):
        return sum(k["dur"] for k in ks)

    def span(self, ks):
        return max(k["ts"] + k["dur"] for k in ks) - min(k["ts"] for k in ks)


def check_temporal(ta, g):
    t = ta.get_temporal_breakdown(visualize=False).iloc[0]
    busy, span = g.busy(g.kernels), g.span(g.kernels)
    near(t["compute_time(us)"], busy, "temporal compute time")
    near(t["kernel_time(us)"], span, "temporal kernel time (first start to last end)")
    near(t["idle_time(us)"], span - busy, "temporal idle time")
    return t


def check_kernels(ta, g):
    kt, km = ta.get_gpu_kernel_breakdown(visualize=False)
    near(kt["sum"].sum(), g.busy(g.kernels), "kernel breakdown total")
    by_name = collections.Counter()
    for k in g.kernels:
        by_name[k["name"]] += k["dur"]
    for name, us in by_name.items():
        near(km[km["name"] == name]["sum (us)"].sum(), us, "kernel breakdown of %s" % name)


def check_idle(ta, g, temporal):
    idle = ta.get_idle_time_breakdown(visualize=False)
    idle = idle[0] if isinstance(idle, tuple) else idle
    if (idle["idle_time"] < 0).any():
        fail("negative idle time: %r" % idle)
    near(idle["idle_time"].sum(), temporal["idle_time(us)"], "idle breakdown total")


def check_queue(ta, g):
    # HTA: +1 when a launch starts, -1 when its kernel starts.
    pts = sorted([(r["ts"], 1) for c, r in g.runtime.items()] +
                 [(k["ts"], -1) for k in g.kernels])
    q = top = 0
    for _, d in pts:
        q += d
        top = max(top, q)
    s = ta.get_queue_length_summary(ranks=[0])
    ql = s["queue_length"]
    near(ql["count"].sum(), 2 * len(g.kernels), "queue length points")
    near(ql["max"].max(), top, "longest queue", tol=0)


def check_launches(ta, g):
    st = ta.get_cuda_kernel_launch_stats(ranks=[0], visualize=False)[0]
    if len(st) != len(g.kernels):
        fail("launch stats for %d kernels, trace has %d" % (len(st), len(g.kernels)))
    for k in g.kernels:
        r = g.runtime[k["args"]["correlation"]]
        row = st[st["correlation"] == k["args"]["correlation"]].iloc[0]
        near(row["cpu_duration"], r["dur"], "launch %s cpu duration" % r["args"]["correlation"])
        near(row["gpu_duration"], k["dur"], "kernel %s duration" % k["args"]["correlation"])
        near(row["launch_delay"], k["ts"] - r["ts"] - r["dur"], "launch delay")


def check_aten(ta, g):
    # From gradtrace's own links: each launch's External id names its
    # operator; HTA finds the operator by time instead. Both must agree.
    want = collections.defaultdict(list)
    for k in g.kernels:
        r = g.runtime[k["args"]["correlation"]]
        op = g.ops.get(r["args"]["External id"])
        if op is None:
            continue
        if k["args"]["External id"] != op["args"]["External id"]:
            fail("kernel %s and its launch name different operators" % k["name"])
        want[op["name"]].append((r["ts"] - op["ts"], k["ts"] - r["ts"]))
    if not want:
        fail("no launch is linked to an operator by External id")
    got = ta.get_aten_op_kernels_and_delay(ranks=[0])[0]
    for name, ds in want.items():
        row = got[got["aten_op_name"] == name]
        if row.empty:
            fail("HTA found no kernels of %s" % name)
        row = row.iloc[0]
        near(row["occurrence_count"], len(ds), "%s launches" % name, tol=0)
        near(row["avg_aten_op_launch_delay"], sum(a for a, _ in ds) / len(ds),
             "%s operator-to-launch delay" % name, tol=0.01)
        near(row["avg_runtime_delay"], sum(b for _, b in ds) / len(ds),
             "%s launch-to-kernel delay" % name, tol=0.01)
    return want


def check_critical_path(ta, g, instance=1):
    # instance_id is the position of the ProfilerStep, not its number.
    step = g.steps[instance]
    ok_graph, ok = ta.critical_path_analysis(rank=0, annotation="ProfilerStep",
                                             instance_id=instance)
    if not ok:
        fail("critical path analysis refused the trace")
    # The host waits for nothing here: the path is the step's kernel chain,
    # GPU time for the kernels and kernel-to-kernel overhead for the gaps.
    # HTA takes the GPU work whose launch is in the step.
    ks = [k for k in g.kernels
          if step["ts"] <= g.runtime[k["args"]["correlation"]]["ts"] <= step["ts"] + step["dur"]]
    share = 100.0 * g.busy(ks) / g.span(ks)
    s = ok_graph.summary()
    near(s.get("gpu_compute_bound", 0.0), share, "critical path GPU-compute share (%)",
         tol=0.01)
    near(s.sum(), 100.0, "critical path shares", tol=0.01)
    return s


def check_gpu(d):
    files = glob.glob(os.path.join(d, "*.json"))
    if len(files) != 1:
        fail("want one trace in %s, got %r" % (d, files))
    g = Gpu(files[0])
    ta = analysis(d)
    if sorted(ta.t.traces.keys()) != [0]:
        fail("ranks %r" % sorted(ta.t.traces.keys()))
    hs = [int(s) for s in ta.get_profiler_steps()]
    if hs != steps_of(load_events(files[0])):
        fail("steps %r" % hs)
    t = check_temporal(ta, g)
    check_kernels(ta, g)
    check_idle(ta, g, t)
    check_queue(ta, g)
    check_launches(ta, g)
    want = check_aten(ta, g)
    cp = check_critical_path(ta, g)
    print("hta: steps %r; compute %.0f us, idle %.0f us; %s; critical path %s"
          % (hs, t["compute_time(us)"], t["idle_time(us)"],
             ", ".join("%s x%d" % (n, len(v)) for n, v in sorted(want.items())),
             ", ".join("%s %.1f%%" % kv for kv in cp.items())))


def check_window(d, it):
    files = glob.glob(os.path.join(d, "*.json"))
    if len(files) != 1:
        fail("want one window trace in %s, got %r" % (d, files))
    g = Gpu(files[0], need_ops=False)
    ta = analysis(d)
    hs = [int(s) for s in ta.get_profiler_steps()]
    if hs != [it]:
        fail("window steps %r, want [%d] (the window's iteration)" % (hs, it))
    cp = check_critical_path(ta, g, instance=0)
    print("hta: window: step %r, %d kernels; critical path %s"
          % (hs, len(g.kernels), ", ".join("%s %.1f%%" % kv for kv in cp.items())))


def main(argv):
    if len(argv) == 4 and argv[1] == "window":
        check_window(argv[2], int(argv[3]))
        return 0
    if len(argv) == 4 and argv[1] == "ranks":
        check_ranks(argv[2], [int(r) for r in argv[3].split(",")])
    elif len(argv) == 3 and argv[1] == "gpu":
        check_gpu(argv[2])
    else:
        sys.exit(__doc__)
    return 0


if __name__ == "__main__":
    pd.set_option("display.width", 200)
    sys.exit(main(sys.argv))
