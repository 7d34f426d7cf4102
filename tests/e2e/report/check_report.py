"""Recomputes every number of `gradtrace report` from the trace's events,
independently of the C code (stdlib only), and checks the table's shape:

  check_report.py TRACE.json REPORT.csv REPORT.json SCHEMA.md [A-B]

With A-B (the report ran with --iterations A-B): only the events whose
start falls in ProfilerStep#A..#B count, the unattributed remainder too.

- per row: forward calls and time (layer_forward spans), recompute
  (layer_recompute), backward spans, time, self time, nodes and
  AccumulateGrad time (the args of layer_backward spans); containers
  (no forward call of their own) get their children's forward sums;
  recompute is inclusive;
- share = (fwd + rc + bwd) / the ProfilerStep spans' time;
- per-iteration count, p50, p95: spans placed in the ProfilerStep span
  their start falls in, or, for backward spans emitted after it closed,
  the same (the span's start is inside it), nearest-rank quantiles;
- parent >= children (fwd, bwd); total bwd = top-level rows +
  unattributed; rest of step = step - fwd - rc - bwd;
- the JSON output has exactly the fields schema/report.md lists, with
  their types, and the same numbers as the CSV.
"""
import bisect
import collections
import csv
import json
import math
import re
import sys

TOL = 0.0015  # the CSV's ms have three decimals


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def path_of(name, phase):
    base = name[: -len(phase) - 1]
    m = re.match(r"^(.*) \(([^()]*)\)$", base)
    return m.group(1) if m else base


def load_trace(paths):
    evs = []
    for p in paths:
        evs += json.load(open(p))["traceEvents"]
    return evs


def step_no(e):
    m = re.match(r"ProfilerStep#(\d+)$", e.get("name", ""))
    return int(m.group(1)) if m else None


def recompute(evs, sel=None):
    rows = collections.defaultdict(lambda: collections.defaultdict(float))
    all_iters = sorted((e["ts"], e["ts"] + e["dur"], step_no(e)) for e in evs
                       if step_no(e) is not None and "window" not in e.get("args", {}))
    starts = [s for s, _, _ in all_iters]
    # per_it[path][k] = [fwd calls, fwd us, rc calls, rc us, bwd us]
    per_it = collections.defaultdict(
        lambda: collections.defaultdict(lambda: [0, 0.0, 0, 0.0, 0.0]))
    un = 0.0

    def iteration(ts):
        k = bisect.bisect_right(starts, ts) - 1
        return k if k >= 0 and ts < all_iters[k][1] else None

    def selected(k):
        return sel is None or (k is not None and all_iters[k][2] is not None
                               and sel[0] <= all_iters[k][2] <= sel[1])
    iters = [(s, e) for k, (s, e, _) in enumerate(all_iters) if selected(k)]
    for e in evs:
        cat = e.get("cat", "")
        if sel is not None and (cat == "backward_totals" or cat.startswith("layer_")
                                or cat == "kernel") and not selected(iteration(e["ts"])):
            continue
        if cat == "kernel" and "layer" in e.get("args", {}):
            ph = "gpu_bwd" if e["args"]["phase"] == "backward" else "gpu_fwd"
            rows[e["args"]["layer"]][ph] += e["dur"]
            rows[e["args"]["layer"]]["gpu_kernels"] += 1
            if ph == "gpu_bwd":
                kn = rows[e["args"]["layer"]].setdefault("kernels", collections.Counter())
                kn[e["name"]] += e["dur"]
            continue
        if cat == "backward_totals":
            un += e["args"].get("unattributed_us", 0)
            continue
        if not cat.startswith("layer_"):
            continue
        phase = cat[len("layer_"):]
        path = path_of(e["name"], phase)
        r = rows[path]
        a = e.get("args", {})
        if phase == "forward":
            r["fwd_calls"] += 1; r["fwd_us"] += e["dur"]; v = (0, e["dur"])
        elif phase == "recompute":
            r["rc_calls"] += 1; r["rc_us"] += e["dur"]; v = (2, e["dur"])
        else:
            r["bwd_spans"] += 1; r["bwd_us"] += a["time_us"]; v = (4, a["time_us"])
            r["self_us"] += a.get("self_us", 0); r["nodes"] += a.get("nodes", 0)
            r["accg_us"] += a.get("accumulate_grad_us", 0)
            if a.get("parent"):
                r["parent"] = a["parent"]
            t = a.get("top_node")
            if t is not None:  # the report's top-1 rule (agg.h)
                if r.get("top") == t:
                    r["top_us"] += a["top_node_us"]
                elif r.get("top") is None or a["top_node_us"] > r["top_us"]:
                    r["top"], r["top_us"] = t, a["top_node_us"]
        k = iteration(e["ts"])
        if k is not None:
            slot = per_it[path][k]
            if v[0] == 4:
                slot[4] += v[1]
            else:  # calls, then time
                slot[v[0]] += 1
                slot[v[0] + 1] += v[1]
    return rows, iters, per_it, un


def quantile(vals, p):
    v = sorted(vals)
    k = math.ceil(p * len(v))
    return v[max(k, 1) - 1]


def near(a, b, what, tol=TOL):
    if abs(float(a) - float(b)) > tol + 1e-9 * abs(float(b)):
        fail(f"{what}: report {a} != recomputed {b}")


def iter_values(p, per_it, kids):
    """{iteration: (fwd, rc, bwd us)} of row p in the iterations where it or
    a descendant has a span: its own forward (recompute) when it was called
    (recomputed) itself in that iteration, else its children's."""
    out = {}
    sub = {q["layer"]: iter_values(q["layer"], per_it, kids) for q in kids[p]}
    ks = set(per_it.get(p, {})) | {k for v in sub.values() for k in v}
    for k in ks:
        fc, f, rcc, rc, b = per_it.get(p, {}).get(k, (0, 0.0, 0, 0.0, 0.0))
        if not fc:
            f = sum(v[k][0] for v in sub.values() if k in v)
        if not rcc:
            rc = sum(v[k][1] for v in sub.values() if k in v)
        out[k] = (f, rc, b)
    return out


def check_rows(table, rows, iters, per_it, un, sel=None):
    layers = [r for r in table if not r["layer"].startswith("(")]
    extra = {r["layer"]: r for r in table if r["layer"].startswith("(")}
    step = sum(e - s for s, e in iters)
    by = {r["layer"]: r for r in layers}
    kids = collections.defaultdict(list)
    for r in layers:
        if r["parent"]:
            kids[r["parent"]].append(r)
    for r in layers:
        p, x = r["layer"], rows[r["layer"]]
        cont = r["container"] == "1"
        if not cont:
            near(r["fwd_calls"], x["fwd_calls"], p + " fwd_calls", 0)
            near(r["fwd_ms"], x["fwd_us"] / 1e3, p + " fwd_ms")
        else:
            near(r["fwd_ms"], sum(float(k["fwd_ms"]) for k in kids[p]), p + " container fwd",
                 TOL * (len(kids[p]) + 1))
        rc = x["rc_us"] / 1e3 if x["rc_calls"] else sum(float(k["recompute_ms"]) for k in kids[p])
        near(r["recompute_ms"], rc, p + " recompute_ms", TOL * (len(kids[p]) + 1))
        near(r["recompute_calls"], x["rc_calls"], p + " recompute_calls", 0)
        near(r["bwd_ms"], x["bwd_us"] / 1e3, p + " bwd_ms")
        near(r["bwd_self_ms"], x["self_us"] / 1e3, p + " bwd_self_ms")
        near(r["bwd_nodes"], x["nodes"], p + " bwd_nodes", 0)
        near(r["bwd_spans"], x["bwd_spans"], p + " bwd_spans", 0)
        near(r["accumulate_grad_ms"], x["accg_us"] / 1e3, p + " accumulate_grad_ms")
        sub, pending = [], [r]
        while pending:  # the row and its descendants, by the table's parents
            q = pending.pop()
            sub.append(q)
            pending += kids[q["layer"]]
        if sel is None:  # names and GPU columns: the whole input's
            for col, key in (("gpu_fwd_ms", "gpu_fwd"), ("gpu_bwd_ms", "gpu_bwd")):
                want = sum(rows[q["layer"]][key] for q in sub) / 1e3
                near(r[col], want, f"{p} {col} (inclusive)", TOL * (len(sub) + 1))
            near(r["gpu_kernels"], x["gpu_kernels"], p + " gpu_kernels", 0)
            kn = x.get("kernels")
            if kn and len(kn) <= 4:  # exact below the report's top-4
                name, us = max(kn.items(), key=lambda t: t[1])
                if r["top_bwd_kernel"] != name:
                    fail(f"{p}: top_bwd_kernel {r['top_bwd_kernel']!r} != {name!r}")
                near(r["top_bwd_kernel_ms"], us / 1e3, p + " top_bwd_kernel_ms")
            if r["top_node"] != (x.get("top") or ""):
                fail(f"{p}: top_node {r['top_node']!r} != {x.get('top')!r}")
            near(r["top_node_ms"] or 0, x.get("top_us", 0) / 1e3, p + " top_node_ms")
        if step > 0:
            tot = float(r["fwd_ms"]) + float(r["recompute_ms"]) + float(r["bwd_ms"])
            near(r["share"], tot / (step / 1e3), p + " share", 0.0002 + 3 * TOL / (step / 1e3))
        its = iter_values(p, per_it, kids)
        if its:
            vals = [f + b + rc for f, rc, b in its.values()]
            near(r["iterations"], len(vals), p + " iterations", 0)
            near(r["iter_p50_ms"], quantile(vals, 0.5) / 1e3, p + " p50",
                 TOL * (len(kids[p]) + 1))
            near(r["iter_p95_ms"], quantile(vals, 0.95) / 1e3, p + " p95",
                 TOL * (len(kids[p]) + 1))
        elif r["iterations"] not in ("", "0"):
            fail(f"{p}: {r['iterations']} iterations, the trace has none")
        ks = kids[p]
        for col in ("fwd_ms", "bwd_ms"):
            s = sum(float(k[col]) for k in ks)
            if float(r[col]) + TOL * (len(ks) + 1) < s:
                fail(f"{p}: {col} {r[col]} < its children's sum {s:.3f}")
    roots = [r for r in layers if not r["parent"]]
    near(extra["(unattributed)"]["bwd_ms"], un / 1e3, "unattributed")
    near(extra["(total)"]["bwd_ms"], sum(float(r["bwd_ms"]) for r in roots) + un / 1e3,
         "total bwd = top-level rows + unattributed", TOL * (len(roots) + 2))
    near(extra["(total)"]["fwd_ms"], sum(float(r["fwd_ms"]) for r in roots), "total fwd",
         TOL * (len(roots) + 1))
    if iters:
        t = extra["(total)"]
        rest = step / 1e3 - float(t["fwd_ms"]) - float(t["recompute_ms"]) - float(t["bwd_ms"])
        near(extra["(rest of step)"]["fwd_ms"], rest, "rest of step", 4 * TOL)
    return len(layers)


def schema_fields(md):
    """The rows `| `name` | type | ... |` of schema/report.md's field table."""
    out = {}
    for line in open(md):
        m = re.match(r"^\| `([^`]+)` \| ([a-z\\|]+) \|", line)
        if m:
            out[m.group(1)] = set(m.group(2).replace("\\", "").split("|"))
    return out


def jtype(v):
    return {bool: "bool", str: "string", list: "array", dict: "object",
            type(None): "null"}.get(type(v), "number")


def walk(v, prefix, seen):
    if isinstance(v, dict):
        for k, x in v.items():
            name = f"{prefix}.{k}" if prefix else k
            seen.setdefault(name, set()).add(jtype(x))
            walk(x, name, seen)
    elif isinstance(v, list):
        for x in v:
            walk(x, prefix + "[]", seen)


def check_json(doc, fields, table):
    seen = {}
    walk(doc, "", seen)
    for k, types in seen.items():
        if k not in fields:
            fail(f"JSON field {k} is not in schema/report.md")
        if not types <= fields[k]:
            fail(f"JSON field {k}: types {types} not in the schema's {fields[k]}")
    for k in fields:
        if not k.startswith("layers[].per_iteration.") and not k.startswith("hints[]") \
                and k not in seen:
            fail(f"schema field {k} missing from the JSON")
    csvrows = {r["layer"]: r for r in table}
    for L in doc["layers"]:
        r = csvrows[L["path"]]
        for a, b in (("fwd_ms", "fwd_ms"), ("bwd_ms", "bwd_ms"), ("recompute_ms", "recompute_ms")):
            near(L[a], r[b], f"{L['path']} JSON {a} vs CSV")


def main():
    trace, table_csv, report_json, schema = sys.argv[1:5]
    sel = None
    if len(sys.argv) > 5:
        a, _, b = sys.argv[5].partition("-")
        sel = (int(a), int(b or a))
    rows, iters, per_it, un = recompute(load_trace(trace.split(",")), sel)
    table = list(csv.DictReader(open(table_csv)))
    n = check_rows(table, rows, iters, per_it, un, sel)
    check_json(json.load(open(report_json)), schema_fields(schema), table)
    print(f"report recomputed: {n} rows, {len(iters)} iterations")


main()
