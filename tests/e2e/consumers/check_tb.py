"""The TensorBoard profiler plugin's loader (torch-tb-profiler, in the
consumers venv of scripts/install-consumers.sh) on gradtrace traces, as
its RunLoader reads each file: the steps it finds are the files'
ProfilerStep#N, the operator view has a row per cpu_op name run inside
the steps (with at most the trace's calls), the kernel view lists the trace's kernels with
their counts and times, and no time it computes is negative.

  check_tb.py [--no-gpu] [--no-ops] TRACE.pt.trace.json...

--no-gpu: a CPU run (no kernel view expected); --no-ops: a trace without
cpu_op events (the operator view then has no rows to compare).

Exit status 0 when everything matches, else 1 with the reason.
"""
import collections
import json
import logging
import os
import sys
import tempfile
import warnings

warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)

from torch_tb_profiler import consts  # noqa: E402
from torch_tb_profiler.profiler.data import RunProfileData  # noqa: E402
from torch_tb_profiler.profiler.run_generator import RunGenerator  # noqa: E402


def fail(msg):
    sys.exit("check_tb: " + msg)


def negatives(x, where="overview"):
    """Every number in the plugin's view data that is below zero."""
    if isinstance(x, dict):
        return [n for k, v in x.items() for n in negatives(v, "%s.%s" % (where, k))]
    if isinstance(x, (list, tuple)):
        return [n for i, v in enumerate(x) for n in negatives(v, "%s[%d]" % (where, i))]
    if isinstance(x, (int, float)) and not isinstance(x, bool) and x < 0:
        return [(where, x)]
    return []


def check(path, gpu, ops):
    name = os.path.basename(path)
    m = consts.WORKER_PATTERN.match(name)
    if not m:
        fail("%s: the plugin does not take this file name" % name)
    evs = json.load(open(path))["traceEvents"]
    steps = sorted(int(e["name"].split("#")[1]) for e in evs
                   if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#"))
    # The plugin's operator view counts the operators inside the steps.
    spans = [(e["ts"], e["ts"] + e["dur"]) for e in evs
             if e.get("ph") == "X" and e.get("name", "").startswith("ProfilerStep#")]
    lo, hi = (min(a for a, _ in spans), max(b for _, b in spans)) if spans else (0, 0)
    calls = collections.Counter(e["name"] for e in evs if e.get("cat") == "cpu_op"
                                and lo <= e["ts"] and e["ts"] + e["dur"] <= hi)
    total = collections.Counter(e["name"] for e in evs if e.get("cat") == "cpu_op")
    kernels = collections.defaultdict(list)
    for e in evs:
        if e.get("cat") == "kernel":
            kernels[e["name"]].append(e["dur"])

    data = RunProfileData.parse(m.group(1), None, os.path.abspath(path),
                                tempfile.mkdtemp())
    data.process()
    data.analyze()
    prof = RunGenerator(m.group(1), None, data).generate_run_profile()

    got = [int(s) for s in data.steps_names]
    if got != steps:
        fail("%s: steps %r, the file's ProfilerStep#N %r" % (name, got, steps))
    views = [v.display_name for v in prof.views]
    if "Operator" not in views:
        fail("%s: no operator view (%r)" % (name, views))
    rows = {r["name"]: r for r in prof.operation_table_by_name["data"]}
    # Every operator name run inside the steps has its row, with at most
    # the trace's calls (the plugin counts what its per-thread trees
    # place, which is not exactly the calls inside the steps).
    for op, n in calls.items():
        if op not in rows or not 0 < rows[op]["calls"] <= total[op]:
            fail("%s: operator %s: %r, the trace has %d calls (%d in steps)"
                 % (name, op, rows.get(op), total[op], n))
    if ops and not calls:
        fail("%s: the trace has no cpu_op events" % name)
    if gpu:
        if not prof.has_kernel or "Kernel" not in views:
            fail("%s: no kernel view (%r)" % (name, views))
        krows = {r[0]: r for r in prof.kernel_table["data"]["rows"]}
        for k, durs in kernels.items():
            r = krows.get(k)
            # name, tensor cores used, calls, total, mean, max, min (us)
            if not r or r[2] != len(durs) or abs(r[3] - sum(durs)) > 1:
                fail("%s: kernel %s: %r, the trace has %d, %.0f us"
                     % (name, k, r, len(durs), sum(durs)))
    step_time = prof.overview["performance"][0]
    bad = negatives(prof.overview) + negatives(prof.operation_table_by_name, "ops")
    if bad:
        fail("%s: negative times %r" % (name, bad[:3]))
    if step_time["value"] <= 0:
        fail("%s: average step time %r" % (name, step_time["value"]))
    print("tb: %s: steps %r, %d operators, %d kernels, step %.0f us"
          % (name, got, len(rows), sum(len(v) for v in kernels.values()),
             step_time["value"]))


def main(argv):
    gpu = "--no-gpu" not in argv
    ops = "--no-ops" not in argv
    files = [a for a in argv[1:] if a not in ("--no-gpu", "--no-ops")]
    if not files:
        sys.exit(__doc__)
    for f in files:
        check(f, gpu, ops)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
