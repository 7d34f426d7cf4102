"""Checks the iterations of a trace that a control captured
(tests/e2e/t_cli_start_steps.sh).

  check_steps.py TRACE.json [N]

Every ProfilerStep#K of the main trace must be there from the first to
the last (consecutive K), exactly N of them when N is given, and every
one must hold the same backward nodes as the last one, with as many of
them attributed to a layer: a capture's first iteration is as whole as
its others (issue 24, items 2 and 4). Prints what it found; exit 1 when
a rule fails.
"""
import json
import sys


def main():
    ev = json.load(open(sys.argv[1]))["traceEvents"]
    want = int(sys.argv[2]) if len(sys.argv) > 2 else None
    steps = sorted((e for e in ev if e.get("ph") == "X" and
                    e.get("name", "").startswith("ProfilerStep#") and
                    "window" not in e.get("args", {})),
                   key=lambda e: e["ts"])
    nodes = [e for e in ev if e.get("ph") == "X" and e.get("cat") == "backward"]
    rows = []
    for s in steps:
        inside = [n for n in nodes if s["ts"] <= n["ts"] <= s["ts"] + s["dur"]]
        rows.append((s["args"]["step"], len(inside),
                     sum(1 for n in inside if n["args"].get("layer"))))
    print("steps (number, backward nodes, with a layer):", rows)
    err = []
    if want is not None and len(rows) != want:
        err.append("%d steps captured, asked for %d" % (len(rows), want))
    if not rows:
        err.append("no step in the trace")
    else:
        nums = [r[0] for r in rows]
        if nums != list(range(nums[0], nums[0] + len(nums))):
            err.append("steps not consecutive: %s" % nums)
        last = rows[-1]
        if last[2] == 0:
            err.append("no backward node has a layer")
        for r in rows:
            if r[1:] != last[1:]:
                err.append("step %d: %d nodes, %d with a layer; step %d: %d, %d"
                           % (r[0], r[1], r[2], last[0], last[1], last[2]))
    if err:
        print("FAIL: " + "; ".join(err))
        sys.exit(1)


main()
