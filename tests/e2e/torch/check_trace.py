"""End to end for issue #11: a recipe's trace (gradtrace convert) and its
report (gradtrace report --csv) against torch's truth (recipes.py) and the
model's structure.

Usage: check_trace.py TRUTH.json TRACE.json REPORT.csv
       check_trace.py --window LAYER WINDOW.json


Checks, printing each difference and exiting 1 on any:
  - nodes: EVERY backward node event has the layer torch's sequence
    numbers say: the innermost module call around its creating op; for a
    node created by a running backward node outside any module scope
    (double backward) that node's layer and `order` its order + 1; the
    same for each run over a retained graph; AccumulateGrad of a
    parameter (its hook scope "<owner>|<name>" inside the node) carries
    layer <owner> and param <name>, one of named_parameters(); other
    AccumulateGrads (input leaves) and every other node carry no param;
  - recompute: `layer_recompute` spans exist exactly for the module calls
    torch ran inside a backward node, and as many as the recipe's own
    list of checkpointed modules (extra["ckpt"]) implies;
  - layer spans: per pass group, one `layer_backward` span per layer
    credited (own nodes and descendants), `parent` the model's parent,
    and time_us/self_us/nodes/self_nodes/accumulate_grad_us/
    second_order_nodes equal to the sums over the nodes (each node's own
    time: its duration less nodes nested in it on its track); the group's
    `backward totals` instant sums every node and the unattributed ones;
  - report rows: forward calls = torch's calls that are not recomputes,
    recompute calls = torch's recomputes, fwd/rc time = the spans' sums,
    bwd/self time and nodes = the node sums (so a reused module reports
    its own nodes' time, not its wall span); containers (never called)
    are the sums of their children; parent >= sum of children; the
    top-level rows are the recipe's roots (distinct names for roots of
    one class); total = top-level rows + (unattributed) = every node.
With --window, the file of a trigger layer=LAYER,phase=backward on a
recipe recomputing LAYER once per iteration: inside the window span,
exactly one recompute span of LAYER (and only LAYER and modules under it
recomputed) and exactly one backward span of LAYER, after it.
Times: trace in us with 3 decimals (compared in whole ns), report in ms
with 3 decimals (compared within rounding).
"""

import collections
import re
import csv
import json
import sys

EPS_NS = 1          # a sum of ns values written as us with 3 decimals
EPS_MS = 0.0015     # one report value rounded to us, and its parts


class Checker:
    def __init__(self):
        self.errors = []

    def err(self, what, *a):
        self.errors.append(what % a if a else what)


def ns(v):
    return int(round(v * 1000))


def strip_call(label):
    return label.rsplit("#", 1)[0] if label else None


def model_parent(path, roots):
    if path in roots:
        return None
    if "." in path:
        return path.rpartition(".")[0]
    return roots[0]


def chain(path, roots):
    """path and its ancestors, innermost first."""
    out = []
    while path is not None:
        out.append(path)
        path = model_parent(path, roots)
    return out


def expected_layers(truth):
    """{(fwd_tid, seq): (layer or None, order)} from torch's creators."""
    creators = {(c[0], c[1]): c for c in truth["creators"]}
    memo = {}

    def get(key, depth=0):
        if key in memo:
            return memo[key]
        c = creators.get(key)
        if c is None or depth > 64:
            r = (None, 1)
        elif c[2]:
            r = (strip_call(c[2]), 1)
        elif c[4] >= 0:
            pl, po = get((c[3], c[4]), depth + 1)
            r = (pl, po + 1)
        else:
            r = (None, 1)
        memo[key] = r
        return r
    return get


def load_trace(path):
    doc = json.load(open(path))
    return doc["traceEvents"]


def os_tids(evs):
    """{(pid, tid) of a thread's `backward nodes` track: (pid, OS tid)},
    from the track names ("<name> [<tid>] backward nodes" or "thread <tid>
    backward nodes"); the thread's own track is (pid, OS tid)."""
    out = {}
    for e in evs:
        if e.get("ph") != "M" or e.get("name") != "thread_name":
            continue
        m = re.search(r"(?:\[(\d+)\]|^thread (\d+)) backward nodes$",
                      e.get("args", {}).get("name", ""))
        if m:
            out[(e["pid"], e["tid"])] = (e["pid"], int(m.group(1) or m.group(2)))
    return out


def own_times(nodes, evs):
    """Each node's own time in ns: its duration less the nodes nested
    directly in it on its track, and less the outermost recompute forwards
    (`module` spans with phase recompute) that ran inside it on its
    thread: a checkpoint's recompute is the layer's recompute time."""
    by_track = collections.defaultdict(list)
    for n in nodes:
        by_track[n["track"]].append(n)
    tids = os_tids(evs)
    rcs = collections.defaultdict(list)
    for e in evs:
        if e.get("ph") == "X" and e.get("cat") == "module" and \
                e.get("args", {}).get("phase") == "recompute":
            b = ns(e["ts"])
            rcs[(e["pid"], e["tid"])].append((b, b + ns(e["dur"])))
    for track, tevs in by_track.items():
        tevs.sort(key=lambda n: (n["b"], -(n["e"] - n["b"])))
        stack = []
        for n in tevs:
            n["own"] = n["e"] - n["b"]
            while stack and stack[-1]["e"] <= n["b"]:
                stack.pop()
            if stack and n["e"] <= stack[-1]["e"]:
                stack[-1]["own"] -= n["e"] - n["b"]
            stack.append(n)
        spans = sorted(rcs.get(tids.get(track), []),
                       key=lambda s: (s[0], -s[1]))
        outer, end = [], -1
        for b, e in spans:
            if b >= end:
                outer.append((b, e))
                end = e
        for b, e in outer:
            inside = [n for n in tevs if n["b"] <= b and e <= n["e"]]
            if inside:
                min(inside, key=lambda n: n["e"] - n["b"])["own"] -= e - b


def check_nodes(c, truth, evs, params):
    get = expected_layers(truth)
    users = sorted((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), e["name"])
                   for e in evs if e.get("ph") == "X" and e.get("cat") == "user"
                   and "|" in e["name"])
    nodes = []
    for e in evs:
        if e.get("ph") != "X" or e.get("cat") != "backward":
            continue
        a = e.get("args", {})
        b = ns(e["ts"])
        nodes.append(dict(name=e["name"], b=b, e=b + ns(e["dur"]),
                          track=(e["pid"], e["tid"]), layer=a.get("layer"),
                          param=a.get("param"), order=a.get("order", 1),
                          seq=a.get("seq"), fwd_tid=a.get("fwd_tid")))
    before = len(c.errors)
    seen_params = set()
    second = retained = acc_p = acc_l = 0
    runs = collections.Counter()
    for n in nodes:
        what = "%s seq %s" % (n["name"], n["seq"])
        if "AccumulateGrad" in n["name"]:
            hooks = [u[2] for u in users if n["b"] <= u[0] and u[1] <= n["e"]]
            hooks = [h for h in hooks if h != "leaf|"]
            if len(hooks) > 1:
                c.err("%s at %d: hooks %s", what, n["b"], hooks)
            if hooks:
                acc_p += 1
                owner, pname = hooks[0].split("|", 1)
                want = (owner, pname)
                if hooks[0] not in params:
                    c.err("hook %s is not in named_parameters()", hooks[0])
                seen_params.add(hooks[0])
            else:
                acc_l += 1
                want = (None, None)
            if (n["layer"], n["param"]) != want or n["order"] != 1:
                c.err("%s at %d: layer %r param %r order %s, want %r",
                      what, n["b"], n["layer"], n["param"], n["order"], want)
            continue
        if n["param"] is not None:
            c.err("%s carries param %r", what, n["param"])
        if n["seq"] is None:
            if n["layer"] is not None:
                c.err("%s without seq has layer %r", what, n["layer"])
            continue
        key = (n["fwd_tid"], n["seq"])
        runs[key] += 1
        if runs[key] > 1:
            retained += 1
        layer, order = get(key)
        if order > 1:
            second += 1
        if (n["layer"], n["order"]) != (layer, order):
            c.err("%s (run %d): layer %r order %s, torch says %r order %s",
                  what, runs[key], n["layer"], n["order"], layer, order)
    missing = set(params) - seen_params
    if missing:
        c.err("parameters never seen accumulated: %s", sorted(missing))
    own_times(nodes, evs)
    return nodes, len(c.errors) - before, dict(
        second=second, retained=retained, acc_params=acc_p, acc_leaves=acc_l)


def groups_of(evs, nodes):
    """Pass groups, ended by their `backward totals` instants: each node
    and layer span joins the first group ending at or after its start."""
    ends = sorted((ns(e["ts"]), e) for e in evs
                  if e.get("cat") == "backward_totals")
    keys = [t for t, _ in ends]

    def index(t):
        lo, hi = 0, len(keys)
        while lo < hi:
            m = (lo + hi) // 2
            if keys[m] < t:
                lo = m + 1
            else:
                hi = m
        return lo
    gnodes = collections.defaultdict(list)
    for n in nodes:
        gnodes[index(n["b"])].append(n)
    spans = collections.defaultdict(list)
    for e in evs:
        if e.get("ph") == "X" and e.get("cat") == "layer_backward":
            spans[index(ns(e["ts"]))].append(e)
    return ends, gnodes, spans


def sums(nodes, roots):
    """{layer: [nodes, own ns, self nodes, self ns, accg ns, order2]}"""
    out = collections.defaultdict(lambda: [0, 0, 0, 0, 0, 0])
    for n in nodes:
        if n["layer"] is None:
            continue
        s = out[n["layer"]]
        s[2] += 1
        s[3] += n["own"]
        if "AccumulateGrad" in n["name"]:
            s[4] += n["own"]
        for p in chain(n["layer"], roots):
            out[p][0] += 1
            out[p][1] += n["own"]
            if n["order"] > 1:
                out[p][5] += 1
    return out


def close_ns(a_us, b_ns, n):
    return abs(ns(a_us) - b_ns) <= EPS_NS * (n + 1)


def check_spans(c, evs, nodes, roots):
    ends, gnodes, spans = groups_of(evs, nodes)
    if len(gnodes) > len(ends):
        c.err("%d nodes after the last backward totals",
              len(gnodes.get(len(ends), [])))
    nspans = 0
    for gi, (_t, tot) in enumerate(ends):
        ns_ = gnodes.get(gi, [])
        a = tot["args"]
        un = [n for n in ns_ if n["layer"] is None]
        allns = sum(n["own"] for n in ns_)
        if a["nodes"] != len(ns_) or not close_ns(a["time_us"], allns, len(ns_)):
            c.err("group %d totals: %s nodes %s us, nodes say %d, %.3f", gi,
                  a["nodes"], a["time_us"], len(ns_), allns / 1e3)
        if a["unattributed_nodes"] != len(un) or not close_ns(
                a["unattributed_us"], sum(n["own"] for n in un), len(un)):
            c.err("group %d unattributed: %s nodes %s us, nodes say %d",
                  gi, a["unattributed_nodes"], a["unattributed_us"], len(un))
        ua = sum(1 for n in un if "AccumulateGrad" in n["name"])
        if a["unattributed_accumulate_grad"] != ua:
            c.err("group %d: unattributed_accumulate_grad %s, nodes say %d",
                  gi, a["unattributed_accumulate_grad"], ua)
        o2 = sum(1 for n in ns_ if n["order"] > 1)
        if a["second_order_nodes"] != o2:
            c.err("group %d: second_order_nodes %s, nodes say %d", gi,
                  a["second_order_nodes"], o2)
        want = sums(ns_, roots)
        got = {}
        for e in spans.get(gi, []):
            l = e["args"]["layer"]
            if l in got:
                c.err("group %d: two spans for %s", gi, l)
            got[l] = e
        nspans += len(got)
        if set(got) != set(want):
            c.err("group %d: spans only %s, nodes only %s", gi,
                  sorted(set(got) - set(want)), sorted(set(want) - set(got)))
        for l in sorted(set(got) & set(want)):
            a, w = got[l]["args"], want[l]
            ok = (a["nodes"] == w[0] and close_ns(a["time_us"], w[1], w[0])
                  and a["self_nodes"] == w[2]
                  and close_ns(a["self_us"], w[3], w[2])
                  and close_ns(a.get("accumulate_grad_us", 0), w[4], w[2])
                  and a.get("second_order_nodes", 0) == w[5]
                  and a.get("parent") == model_parent(l, roots))
            if not ok:
                c.err("group %d %s: args %s, nodes say nodes %d time %.3f "
                      "self %d/%.3f accg %.3f order2 %d parent %s", gi, l,
                      json.dumps(a), w[0], w[1] / 1e3, w[2], w[3] / 1e3,
                      w[4] / 1e3, w[5], model_parent(l, roots))
    return nspans


def truth_calls(truth):
    fwd, rc = collections.Counter(), collections.Counter()
    for k, recompute in truth["calls"].items():
        path = strip_call(k.split(":", 1)[1])
        (rc if recompute else fwd)[path] += 1
    return fwd, rc


def expected_recompute(truth, fwd):
    ck = truth["extra"].get("ckpt", {})
    out = collections.Counter()
    for path, n in fwd.items():
        p = path
        while p is not None and p not in ck:
            p = p.rpartition(".")[0] if "." in p else None
        if p is not None:
            out[path] = n * ck[p]
    return out


def span_path(e):
    """"<path> (<Class>) forward|recompute" -> path."""
    name = e["name"].rsplit(" ", 1)[0]
    if name.endswith(")") and " (" in name:
        name = name[:name.rindex(" (")]
    return name


def check_recompute(c, truth, evs, fwd, rc):
    want = expected_recompute(truth, fwd)
    got = collections.Counter(span_path(e) for e in evs
                              if e.get("cat") == "layer_recompute")
    if got != rc:
        c.err("recompute spans %s, torch ran %s", dict(got), dict(rc))
    if rc != want:
        c.err("torch recomputed %s, the recipe checkpoints %s",
              dict(rc), dict(want))
    for e in evs:
        if e.get("cat") == "module" and e["name"].endswith(" recompute") and \
                e.get("args", {}).get("phase") != "recompute":
            c.err("%s without phase recompute", e["name"])
    return sum(got.values())


def check_report(c, truth, evs, nodes, rows, fwd, rc, roots):
    by = {r["layer"]: r for r in rows}
    unat, total = by.pop("(unattributed)", None), by.pop("(total)", None)
    # The step's time outside every row (#15): not a layer; its value is
    # checked against the iterations by tests/e2e/report/check_report.py.
    # Never negative: a recompute run inside a node is not that node's
    # own time (own_times), so forward + recompute + backward fit the step.
    rest = by.pop("(rest of step)", None)
    if rest is not None:
        for k in ("fwd_ms", "bwd_ms", "recompute_ms", "step_share"):
            if k in rest and rest[k] not in ("", None) and float(rest[k]) < 0:
                c.err("(rest of step) %s is %s", k, rest[k])
    layers = [r for r in rows if r["layer"] in by]
    F = lambda r, k: float(r[k])
    I = lambda r, k: int(r[k])
    called = set(fwd) | set(rc)
    want_rows = set()
    # A module never called whose parameters accumulate (one whose weight
    # its parent uses directly, as MultiheadAttention's out_proj) has a row.
    for p in called | {n["layer"] for n in nodes if n["layer"]}:
        want_rows.update(chain(p, roots))
    if set(by) != want_rows:
        c.err("report rows only %s, model only %s", sorted(set(by) - want_rows),
              sorted(want_rows - set(by)))
    fspan, rspan = collections.Counter(), collections.Counter()
    for e in evs:
        if e.get("ph") == "X" and e.get("cat") == "layer_forward":
            fspan[span_path(e)] += ns(e["dur"])
        elif e.get("ph") == "X" and e.get("cat") == "layer_recompute":
            rspan[span_path(e)] += ns(e["dur"])
    want = sums(nodes, roots)
    kids = collections.defaultdict(list)
    for r in layers:
        if r["parent"]:
            kids[r["parent"]].append(r)
        if r["parent"] != (model_parent(r["layer"], roots) or ""):
            c.err("row %s: parent %r", r["layer"], r["parent"])
    for r in layers:
        l = r["layer"]
        if I(r, "fwd_calls") != fwd[l] or I(r, "recompute_calls") != rc[l]:
            c.err("row %s: %s forward / %s recompute calls, torch %d / %d", l,
                  r["fwd_calls"], r["recompute_calls"], fwd[l], rc[l])
        ks = kids.get(l, [])
        container = bool(ks) and fwd[l] == 0
        if I(r, "container") != container:
            c.err("row %s: container %s", l, r["container"])
        # Inclusive: a container's forward, and the recompute of a module
        # not recomputed itself, are its children's sums; otherwise the
        # sum of its own spans.
        for k, d, own in (("fwd_ms", fspan, not container),
                          ("recompute_ms", rspan, rc[l] > 0)):
            want_ms = d[l] / 1e6 if own else sum(F(x, k) for x in ks)
            if abs(F(r, k) - want_ms) > EPS_MS * (1 if own else len(ks) + 1):
                c.err("row %s: %s %s, %s %.3f", l, k, r[k],
                      "spans sum" if own else "children sum", want_ms)
        w = want.get(l, [0] * 6)
        if (I(r, "bwd_nodes") != w[0] or abs(F(r, "bwd_ms") - w[1] / 1e6) >
                EPS_MS or I(r, "bwd_self_nodes") != w[2] or
                abs(F(r, "bwd_self_ms") - w[3] / 1e6) > EPS_MS or
                abs(F(r, "accumulate_grad_ms") - w[4] / 1e6) > EPS_MS or
                I(r, "second_order_nodes") != w[5]):
            c.err("row %s: bwd %s ms %s nodes, self %s ms %s nodes, accg %s, "
                  "order2 %s; nodes say %.3f %d, %.3f %d, %.3f, %d", l,
                  r["bwd_ms"], r["bwd_nodes"], r["bwd_self_ms"],
                  r["bwd_self_nodes"], r["accumulate_grad_ms"],
                  r["second_order_nodes"], w[1] / 1e6, w[0], w[3] / 1e6, w[2],
                  w[4] / 1e6, w[5])
        if ks:
            for k in ("fwd_ms", "bwd_ms", "bwd_nodes"):
                s = sum(F(x, k) for x in ks)
                if F(r, k) + EPS_MS * (len(ks) + 1) < s:
                    c.err("row %s: %s %s < children's %.3f", l, k, r[k], s)
    for l in truth["extra"].get("reused", []):
        r = by.get(l)
        if r is None or not F(r, "bwd_ms") < F(r, "bwd_wall_ms"):
            c.err("reused %s: bwd %s ms not below its wall span %s ms", l,
                  r and r["bwd_ms"], r and r["bwd_wall_ms"])
    tops = [r for r in layers if not r["parent"]]
    if sorted(r["layer"] for r in tops) != sorted(roots):
        c.err("top-level rows %s, roots %s", [r["layer"] for r in tops], roots)
    for r in layers:
        root = chain(r["layer"], roots)[-1]
        if root != roots[0] and not (r["layer"] == root or
                                     r["layer"].startswith(root + ".")):
            c.err("row %s under root %s without its prefix", r["layer"], root)
        if root == roots[0] and any(r["layer"].startswith(o + ".") or
                                    r["layer"] == o for o in roots[1:]):
            c.err("row %s under the first root %s", r["layer"], root)
    un = [n for n in nodes if n["layer"] is None]
    if unat is None or total is None:
        c.err("no (unattributed) or (total) row")
        return len(layers)
    if I(unat, "bwd_nodes") != len(un) or abs(
            F(unat, "bwd_ms") - sum(n["own"] for n in un) / 1e6) > EPS_MS:
        c.err("(unattributed): %s ms %s nodes, nodes say %.3f %d",
              unat["bwd_ms"], unat["bwd_nodes"],
              sum(n["own"] for n in un) / 1e6, len(un))
    s = sum(F(r, "bwd_ms") for r in tops) + F(unat, "bwd_ms")
    alln = sum(n["own"] for n in nodes) / 1e6
    if abs(F(total, "bwd_ms") - s) > EPS_MS * (len(tops) + 2) or \
            abs(F(total, "bwd_ms") - alln) > EPS_MS:
        c.err("total bwd %s ms: top-level rows + unattributed %.3f, "
              "every node %.3f", total["bwd_ms"], s, alln)
    if I(total, "bwd_nodes") != len(nodes) or I(total, "bwd_nodes") != \
            sum(I(r, "bwd_nodes") for r in tops) + I(unat, "bwd_nodes"):
        c.err("total nodes %s, %d nodes in the trace", total["bwd_nodes"],
              len(nodes))
    for k in ("fwd_ms", "recompute_ms"):
        s = sum(F(r, k) for r in tops)
        if abs(F(total, k) - s) > EPS_MS * (len(tops) + 1):
            c.err("total %s %s, top-level rows %.3f", k, total[k], s)
    return len(layers)


def check_window(layer, path):
    evs = load_trace(path)
    errors = []
    X = [e for e in evs if e.get("ph") == "X"]
    win = [e for e in X if e.get("cat") == "window"]
    rcs = [e for e in X if e.get("cat") == "layer_recompute"]
    under = lambda p: p == layer or p.startswith(layer + ".")
    own_rc = [e for e in rcs if span_path(e) == layer]
    bwd = [e for e in X if e.get("cat") == "layer_backward"
           and e["args"]["layer"] == layer]
    # A segment per run of the layer's nodes: its parameters' last
    # gradients may resume the window after the counted nodes.
    if not win:
        errors.append("no window span")
    if len(own_rc) != 1 or len(bwd) != 1:
        errors.append("%d recompute and %d backward spans of %s"
                      % (len(own_rc), len(bwd), layer))
    others = [e["name"] for e in rcs if not under(span_path(e))]
    if others:
        errors.append("recompute spans of other modules: %s" % others)
    if win:
        w0 = min(ns(w["ts"]) for w in win)
        w1 = max(ns(w["ts"]) + ns(w["dur"]) for w in win)
        for e in rcs + bwd:
            if not (w0 <= ns(e["ts"]) and ns(e["ts"]) + ns(e["dur"]) <= w1):
                errors.append("%s outside the window" % e["name"])
    if own_rc and bwd and ns(bwd[0]["ts"]) < ns(own_rc[0]["ts"]):
        errors.append("backward span of %s before its recompute" % layer)
    print("window file %s: %d recompute spans (%d of %s), %d backward span"
          % (path.rsplit("/", 1)[-1], len(rcs), len(own_rc), layer, len(bwd)))
    for e in errors:
        print("  MISMATCH", e)
    return 1 if errors else 0


def main():
    if sys.argv[1] == "--window":
        sys.exit(check_window(sys.argv[2], sys.argv[3]))
    truth = json.load(open(sys.argv[1]))
    evs = load_trace(sys.argv[2])
    rows = list(csv.DictReader(open(sys.argv[3])))
    extra = truth["extra"]
    roots, params = extra["roots"], set(extra["params"])
    c = Checker()
    nodes, node_errs, info = check_nodes(c, truth, evs, params)
    nspans = check_spans(c, evs, nodes, roots)
    fwd, rc = truth_calls(truth)
    nrc = check_recompute(c, truth, evs, fwd, rc)
    nrows = check_report(c, truth, evs, nodes, rows, fwd, rc, roots)
    print("%s (torch %s): %d nodes compared (%d second order, %d reruns "
          "over a retained graph, AccumulateGrad %d of parameters + %d "
          "leaves), %d node mismatches; %d recompute spans, %d layer spans, "
          "%d report rows; %d mismatches in all"
          % (truth["case"], truth["torch"], len(nodes), info["second"],
             info["retained"], info["acc_params"], info["acc_leaves"],
             node_errs, nrc, nspans, nrows, len(c.errors)))
    for e in c.errors[:60]:
        print("  MISMATCH", e)
    if len(c.errors) > 60:
        print("  ... %d more" % (len(c.errors) - 60))
    sys.exit(1 if c.errors else 0)


if __name__ == "__main__":
    main()
