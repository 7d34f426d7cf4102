"""Checks traces of tests/e2e/torch/wrapped.py (t_torch_ddp.sh).

  check_wrapped.py paths FILE...        module names are the user's paths
                                        (no wrapper segment, each once per
                                        call: Net, blocks.N, blocks.N.up, head)
  check_wrapped.py compiled FILE        torch.compile: the model is "Net",
                                        once per call, no _orig_mod
  check_wrapped.py ranks R,R... FILE... the files' ranks (metadata and
                                        process name), one file per rank
"""

import json
import re
import sys

WRAPPER_SEGMENTS = ("module", "_orig_mod", "_fsdp_wrapped_module",
                    "_checkpoint_wrapped_module")
USER = {"Net", "head"} | {"blocks.%d" % i for i in range(3)} | \
    {"blocks.%d.up" % i for i in range(3)}


def events(path):
    return json.load(open(path))["traceEvents"]


def module_paths(path):
    out = {}
    for e in events(path):
        if e.get("cat") != "module":
            continue
        m = re.match(r"(\S+) \((\w+)\) (forward|recompute)$", e["name"])
        if not m:
            sys.exit("%s: module event name %r" % (path, e["name"]))
        out.setdefault((m.group(1), m.group(3)), []).append(e)
    return out


def check_paths(files):
    for f in files:
        paths = module_paths(f)
        names = {p for p, _ in paths}
        for p in names:
            if any(seg in WRAPPER_SEGMENTS for seg in p.split(".")):
                sys.exit("%s: wrapper segment in %s" % (f, p))
        if names != USER:
            sys.exit("%s: paths %s, want %s" % (f, sorted(names), sorted(USER)))
        fwd = {p: len(v) for (p, ph), v in paths.items() if ph == "forward"}
        if len(set(fwd.values())) != 1:
            sys.exit("%s: forward calls per path differ (a wrapper pair "
                     "opened two scopes?): %s" % (f, fwd))


def check_compiled(f):
    paths = module_paths(f)
    for p, _ in paths:
        if any(seg in WRAPPER_SEGMENTS for seg in p.split(".")):
            sys.exit("%s: wrapper segment in %s" % (f, p))
    n = len(paths.get(("Net", "forward"), []))
    if n != 4:
        sys.exit("%s: %d Net forward scopes, want 4 (one per call): %s"
                 % (f, n, sorted(paths)))


def check_ranks(want, files):
    got = []
    for f in files:
        d = json.load(open(f))
        rank = d.get("distributedInfo", {}).get("rank")
        names = [e["args"]["name"] for e in d["traceEvents"]
                 if e.get("ph") == "M" and e.get("name") == "process_name"]
        if not names or "[rank %s]" % rank not in names[-1]:
            sys.exit("%s: rank %s, process name %s" % (f, rank, names))
        got.append(rank)
    if sorted(got) != want:
        sys.exit("ranks %s, want %s" % (sorted(got), want))


if __name__ == "__main__":
    if sys.argv[1] == "paths":
        check_paths(sys.argv[2:])
    elif sys.argv[1] == "compiled":
        check_compiled(sys.argv[2])
    elif sys.argv[1] == "ranks":
        check_ranks([int(x) for x in sys.argv[2].split(",")], sys.argv[3:])
    else:
        sys.exit("usage: check_wrapped.py paths|ranks ...")
