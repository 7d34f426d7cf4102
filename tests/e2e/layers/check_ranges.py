#!/usr/bin/env python3
"""Checks backward ranges as layer backward spans (tests/progs/nvtx_bwd_layers.c).

The program writes one line per backward range it opened:
"<iteration> <block> <begin ns> <end ns>", its own clock just outside the
NVTX push and pop, so a range's recorded duration is a little shorter.

  check_ranges.py trace RANGES TRACE
      every block has one `block.<k> backward` span (cat layer_backward,
      on `Layers backward`) per iteration, in order, whose duration and
      time_us match the program's range; one `block.<k> forward` span per
      iteration; no nodes
  check_ranges.py report RANGES CSV
      `gradtrace report --csv` has a row per block with one backward span
      per iteration, bwd_ms the sum of its ranges, and block.2 the largest
  check_ranges.py window RANGES PHASE LAYER K TRACE
      a capture window holds exactly LAYER's backward span of iteration K
      (and, for PHASE both, its forward span) and no other layer span

Exit 0 when it holds, 1 with the differences on stderr.
"""
import csv
import json
import sys

BLOCKS = 4


def load_ranges(path):
    r = {}
    with open(path) as f:
        for line in f:
            it, k, b, e, spin = (int(x) for x in line.split())
            r.setdefault(k, []).append((it, (e - b) / 1000.0, b, e, spin))
    for k in r:
        r[k].sort()
    return r


SLACK_US = 20.0  # the agent's TSC-mapped clock against CLOCK_MONOTONIC


def close(got_us, outer_us, spin_us):
    # The program's clock reads enclose the range (outer), which lasts at
    # least its spin: bounds that hold however loaded the machine is. The
    # agent's clock is the program's CLOCK_MONOTONIC (TSC-mapped: a few us).
    return spin_us - SLACK_US <= got_us <= outer_us + SLACK_US


def spans(path):
    with open(path) as f:
        ev = json.load(f)["traceEvents"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    out = []
    for e in ev:
        if e.get("ph") == "X" and e.get("cat", "").startswith("layer_"):
            out.append(dict(e, track=names.get((e["pid"], e["tid"]), "")))
    return out, ev


def check_trace(ranges, path):
    got, ev = spans(path)
    err = []
    for k in range(BLOCKS):
        bwd = sorted((e for e in got if e["name"] == f"block.{k} backward"),
                     key=lambda e: e["ts"])
        fwd = [e for e in got if e["name"] == f"block.{k} forward"]
        want = ranges.get(k, [])
        if len(bwd) != len(want) or len(fwd) != len(want):
            err.append(f"block.{k}: {len(bwd)} backward, {len(fwd)} forward "
                       f"spans, {len(want)} iterations")
            continue
        for e, (it, us, _, _, spin) in zip(bwd, want):
            a = e.get("args", {})
            if (e["cat"] != "layer_backward" or e["track"] != "Layers backward"
                    or a.get("source") != "range" or a.get("nodes") != 0):
                err.append(f"block.{k} iteration {it}: {e}")
            if not close(e["dur"], us, spin) or abs(a.get("time_us", -1) - e["dur"]) > 0.002:
                err.append(f"block.{k} iteration {it}: {e['dur']} us, "
                           f"time_us {a.get('time_us')}, the program {us:.3f} us")
    if any(e.get("cat") == "backward" for e in ev):
        err.append("backward nodes in a program without autograd")
    if err:
        print("\n".join(err[:20]), file=sys.stderr)
        return 1
    print(f"ok: {BLOCKS} blocks x {len(ranges[0])} backward spans as long as "
          "the program's ranges")
    return 0


def check_report(ranges, path):
    rows = {r["layer"]: r for r in csv.DictReader(open(path))}
    err = []
    ms = {}
    for k in range(BLOCKS):
        r = rows.get(f"block.{k}")
        want = ranges.get(k, [])
        if r is None:
            err.append(f"no row for block.{k}: {sorted(rows)}")
            continue
        ms[k] = float(r["bwd_ms"])
        want_ms = sum(w[1] for w in want) / 1000.0
        spin_ms = sum(w[4] for w in want) / 1000.0
        if (int(r["bwd_spans"]) != len(want) or int(r["fwd_calls"]) != len(want)
                or int(r["bwd_nodes"]) != 0
                or not close(ms[k] * 1000.0, want_ms * 1000.0, spin_ms * 1000.0)):
            err.append(f"block.{k}: {r}; the program: {len(want)} ranges, "
                       f"{want_ms:.3f} ms")
    if len(ms) == BLOCKS and max(ms, key=ms.get) != 2:
        err.append(f"block.2 is not the slowest backward: {ms}")
    if err:
        print("\n".join(err), file=sys.stderr)
        return 1
    print("ok: report backward ms per block " +
          ", ".join(f"block.{k} {v:.3f}" for k, v in sorted(ms.items())))
    return 0


def check_window(ranges, phase, layer, k, path):
    got, _ = spans(path)
    with open(path) as f:
        segs = json.load(f)["gradtrace"]["windows"]
    block = int(layer.rsplit(".", 1)[1])
    _, want_us, b, e, spin = [w for w in ranges[block] if w[0] == k][0]
    # The backward segment lies inside that iteration's range, give or take
    # the agent's TSC mapping onto the program's CLOCK_MONOTONIC (a few
    # us; seen 3 ns past the range's end on 2 busy cores), as close() allows.
    bseg = [w for w in segs if w["layer"] is None]
    slack = int(SLACK_US * 1000)
    if len(bseg) != 1 or not (b - slack <= bseg[0]["begin_ns"] <=
                              bseg[0]["end_ns"] <= e + slack):
        print(f"backward segments {bseg}, the range of iteration {k}: [{b}, {e}]",
              file=sys.stderr)
        return 1
    names = sorted(e["name"] for e in got)
    want = [f"{layer} backward"] + ([f"{layer} forward"] if phase == "both" else [])
    bwd = [e for e in got if e["name"] == f"{layer} backward"]
    if names != sorted(want) or not close(bwd[0]["dur"], want_us, spin):
        print(f"window spans {[(e['name'], e['dur']) for e in got]}; want {want}"
              f" with a backward of {want_us:.3f} us", file=sys.stderr)
        return 1
    print(f"ok: the window holds {layer}'s {phase} of iteration {k} only "
          f"({bwd[0]['dur']} us)")
    return 0


def main(argv):
    if len(argv) == 4 and argv[1] == "trace":
        return check_trace(load_ranges(argv[2]), argv[3])
    if len(argv) == 4 and argv[1] == "report":
        return check_report(load_ranges(argv[2]), argv[3])
    if len(argv) == 7 and argv[1] == "window":
        return check_window(load_ranges(argv[2]), argv[3], argv[4],
                            int(argv[5]), argv[6])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
