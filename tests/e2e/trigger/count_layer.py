#!/usr/bin/env python3
"""Prints how many events of a trace belong to layer L (exact path or a
child of it): backward nodes whose layer arg is one, module forward spans
named after one, and its "L [(Class)] backward" layer spans, as
"nodes forward spans".

usage: count_layer.py LAYER FILE...
"""

import json
import sys


def mine(layer, path):
    return path == layer or (path or "").startswith(layer + ".")


def main():
    layer, files = sys.argv[1], sys.argv[2:]
    nodes = fwd = spans = 0
    for f in files:
        with open(f) as fp:
            doc = json.load(fp)
        for e in doc["traceEvents"]:
            if e.get("ph") != "X":
                continue
            cat, name = e.get("cat"), e.get("name", "")
            if cat == "backward" and mine(layer, e.get("args", {}).get("layer")):
                nodes += 1
            elif cat == "module" and mine(layer, name.split(" ")[0]):
                fwd += 1
            elif cat == "layer_backward" and name.split(" ")[0] == layer and \
                    name.endswith(" backward"):
                spans += 1
    print(nodes, fwd, spans)


if __name__ == "__main__":
    main()
