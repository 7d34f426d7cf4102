#!/usr/bin/env python3
"""Checks layer attribution against the structure a program declares.

A test program (tests/progs/torch_layers.cpp, tests/progs/capi_layers.c)
writes one line per layer call: "<path> <first seq> <end seq>", the
autograd sequence numbers handed out while that layer ran. The node
created with sequence number s belongs to the innermost call whose range
holds s (the longest path among them), or to no layer.

  check.py attrib STRUCTURE TRACE...
      every backward node with a sequence number in the traces has exactly
      the layer the structure gives (null outside every layer), and every
      top-level layer of the structure has backward nodes
  check.py window STRUCTURE LAYER K TRACE...
      the traces (one capture window) hold the backward nodes of exactly
      the K-th call of LAYER (from 0: one call per iteration; all its
      nodes, its sub-layers' included) and no other node with a sequence
      number

Exit 0 when it holds, 1 with the differences on stderr.
"""
import json
import sys


def load_structure(path):
    calls = []
    with open(path) as f:
        for line in f:
            name, lo, hi = line.split()
            calls.append((name, int(lo), int(hi)))
    return calls


def layer_of(calls, seq):
    best = None
    for name, lo, hi in calls:
        if lo <= seq < hi and (best is None or len(name) > len(best)):
            best = name
    return best


def backward_nodes(paths):
    nodes = []
    for p in paths:
        with open(p) as f:
            trace = json.load(f)
        for e in trace["traceEvents"]:
            if e.get("cat") == "backward" and e.get("ph") == "X":
                args = e.get("args", {})
                if "seq" in args:
                    nodes.append((args["seq"], args.get("layer"), e["name"]))
    return nodes


def attrib(calls, paths):
    nodes = backward_nodes(paths)
    bad = [(s, got, layer_of(calls, s), n) for s, got, n in nodes
           if got != layer_of(calls, s)]
    for s, got, want, n in bad[:20]:
        print(f"node {n} seq {s}: layer {got!r}, the program says {want!r}",
              file=sys.stderr)
    tops = sorted({name for name, _, _ in calls if name.count(".") == 1})
    per = {t: sum(1 for s, got, _ in nodes if got and (got == t or got.startswith(t + ".")))
           for t in tops}
    empty = [t for t in tops if per[t] == 0]
    if empty:
        print(f"layers without backward nodes: {empty}", file=sys.stderr)
    if not nodes:
        print("no backward nodes with sequence numbers", file=sys.stderr)
    if bad or empty or not nodes:
        return 1
    print(f"ok: {len(nodes)} backward nodes, each in the layer the program "
          f"declared; per layer {per}")
    return 0


def window(calls, layer, k, paths):
    nodes = backward_nodes(paths)
    got = sorted(s for s, _, _ in nodes)
    # A call's nodes are the sequence numbers handed out during it (its
    # sub-layers' calls lie inside it).
    options = [list(range(lo, hi)) for name, lo, hi in calls if name == layer]
    if k < len(options) and got == options[k]:
        print(f"ok: the window holds exactly call {k} of {layer}: seq {got}")
        return 0
    print(f"window nodes {got}; calls of {layer}: {options}", file=sys.stderr)
    return 1


def main(argv):
    if len(argv) >= 4 and argv[1] == "attrib":
        return attrib(load_structure(argv[2]), argv[3:])
    if len(argv) >= 6 and argv[1] == "window":
        return window(load_structure(argv[2]), argv[3], int(argv[4]), argv[5:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
