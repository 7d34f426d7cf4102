#!/usr/bin/env python3
"""Checks the shape of the tree (make check-layers).

1. Rooms and the one-way rule: every non-test C file belongs to one room
   (a daemon sub-folder, common/, or a role of the agent), and a file may
   include headers of its own room and of the rooms listed as its
   dependencies, never of any other. Since the dependency lists below form
   no cycle (checked too), no include loop can exist between rooms.
2. No function longer than 100 lines outside generated tables.
3. No prototype of a non-static function written in a .c file: a function
   used by another file is declared once, in that file's header.
4. Calls follow the rooms (with --objects, from `nm` over the built
   objects, so a call through a declaration the include rule cannot see
   counts): a file uses only symbols defined in its own room or in the
   rooms it may depend on.
5. No loop between files: the graph "file A uses a symbol file B defines"
   has no cycle, except for the edges in ALLOWED_EDGES, each with its
   reason (an entry no longer needed is an error too, so the list stays
   short and true).
6. A header outside include/ declares only functions its own room (agent:
   its own role) defines: a base header declaring a hook's function is a
   loop the include rule cannot see.
7. No file over 800 lines (C, Python and shell of the product and its
   scripts).

Exit status 0 when all hold; otherwise one line per violation and 1.
"""
import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Room -> the rooms it may include. Order of the agent roles, bottom up:
# base (process-wide state, clocks, buffers, strings, capture state),
# trigger (trigger engine), stream (the byte stream's state, the streamer
# thread, the sink, daemon control, crash flush, and the life cycle in
# core.c that starts, flushes and forks them), events (the event core
# every source feeds: layer and scope stacks, nodes, passes, steps; it
# never reaches the stream), hooks (event sources and the public API),
# entry (constructor).
DEPS = {
    "public": [],
    "common": ["public"],
    "convert": ["common", "public"],
    "control": ["common", "public"],
    "server": ["convert", "control", "common", "public"],
    "cli": ["convert", "control", "common", "public"],
    "agent.base": ["common", "public"],
    "agent.trigger": ["agent.base", "common", "public"],
    "agent.stream": ["agent.trigger", "agent.base", "common", "public"],
    "agent.events": ["agent.trigger", "agent.base", "common", "public"],
    "agent.hooks": ["agent.events", "agent.stream", "agent.trigger", "agent.base",
                    "common", "public"],
    "agent.entry": ["agent.hooks", "agent.events", "agent.stream", "agent.trigger",
                    "agent.base", "common", "public"],
}

# Agent files by role (file stem -> role). A new agent file must be given
# a role here.
AGENT_ROLES = {
    "internal": "base", "clock": "base", "timebase": "base", "config": "base",
    "diag": "base", "warn": "base", "ring": "base", "strings": "base",
    "capture": "base", "rec_out": "base",
    "trigger": "trigger", "trigger_nodes": "trigger", "trigger_glob": "trigger",
    "trigger_bwd": "trigger", "trigger_int": "trigger",
    "stream": "stream", "streamer": "stream", "sink": "stream", "control": "stream", "crash": "stream",
    "undelivered": "stream", "exit": "stream",
    "core": "stream",
    "events": "events", "api": "hooks", "hooks": "hooks", "cuda": "hooks",
    "torch": "hooks", "torch_layout": "hooks", "torch_params": "hooks",
    "torch_comm": "hooks",
    "cupti": "hooks", "cupti_api": "hooks",
    "cupti_internal": "hooks", "cupti_abi": "hooks", "cupti_records": "hooks",
    "cupti_sync": "hooks", "nvtx": "hooks", "nvtx_ranges": "hooks", "nvtx_rules": "hooks",
    "recordfn": "hooks", "ops": "hooks", "compiled": "hooks",
    "ctor": "entry",
}

SOURCE_DIRS = ["common", "agent", "daemon", "include"]
# Rule 7 also covers the Python package and the scripts.
LENGTH_DIRS = SOURCE_DIRS + ["python/gradtrace", "scripts"]
LENGTH_EXTS = (".c", ".h", ".py", ".sh")
MAX_FILE_LINES = 800

# Edges (caller, callee) allowed to close a loop between files, each with
# the reason it is the lesser evil. Keep this short.
ALLOWED_EDGES = {
}

# Object folders under the build directory (Makefile: pic for the agent
# and common, obj for the daemon rooms); an object's source is its path
# below the folder with .c for .o.
OBJECT_DIRS = ["pic", "obj"]
GENERATED = set()   # files holding generated tables, exempt from rule 2
MAX_FUNC_LINES = 100


def room_of(rel):
    parts = rel.split("/")
    if parts[0] == "include":
        return "public"
    if parts[0] == "common":
        return "common"
    if parts[0] == "daemon" and len(parts) > 2:
        return parts[1]
    if parts[0] == "agent":
        stem = os.path.splitext(parts[1])[0]
        role = AGENT_ROLES.get(stem)
        return "agent." + role if role else None
    return None


def include_target(inc):
    # "daemon/convert/x.h", "common/x.h", "agent/x.h", "gradtrace/x.h"
    if inc.startswith("gradtrace/"):
        return "include/" + inc
    return inc


def sources():
    for d in SOURCE_DIRS:
        for base, _, files in os.walk(os.path.join(ROOT, d)):
            for f in sorted(files):
                if f.endswith((".c", ".h")):
                    yield os.path.relpath(os.path.join(base, f), ROOT)


def check_cycles(errors):
    state = {}

    def visit(r, path):
        if state.get(r) == 1:
            errors.append("rooms: dependency cycle " + " -> ".join(path + [r]))
            return
        if state.get(r) == 2:
            return
        state[r] = 1
        for d in DEPS[r]:
            visit(d, path + [r])
        state[r] = 2

    for r in DEPS:
        visit(r, [])


def check_includes(rel, text, errors):
    room = room_of(rel)
    if room is None:
        errors.append(f"{rel}: belongs to no room (add it to scripts/check-layers.py)")
        return
    for n, line in enumerate(text.split("\n"), 1):
        m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
        if not m:
            continue
        target = include_target(m.group(1))
        troom = room_of(target) if os.path.exists(os.path.join(ROOT, target)) else None
        if troom is None or troom == room:
            continue
        if troom not in DEPS[room]:
            errors.append(f"{rel}:{n}: {room} includes {target} ({troom})")


def check_functions(rel, text, errors):
    if rel in GENERATED or not rel.endswith(".c"):
        return
    lines = text.split("\n")
    start = None
    for i, line in enumerate(lines):
        if line == "{" and start is None:
            j = i - 1
            while j > 0 and lines[j][:1] in (" ", "\t"):
                j -= 1
            start = j
        elif line.startswith("}") and start is not None:
            n = i - start + 1
            if n > MAX_FUNC_LINES and "(" in lines[start]:
                name = lines[start].split("(")[0].split()[-1].lstrip("*")
                errors.append(f"{rel}:{start + 1}: {name}() is {n} lines (max {MAX_FUNC_LINES})")
            start = None


PROTO = re.compile(r"^(?!static\b|typedef\b|extern\b|#|return\b)[A-Za-z_][\w \*]*\b(\w+)\s*\([^;{]*\)\s*"
                   r"(__attribute__\s*\(\(.*\)\)\s*)?(GT__WUR\s*)?;\s*$")


def check_prototypes(rel, text, errors):
    if not rel.endswith(".c"):
        return
    joined = re.sub(r",\s*\n\s*", ", ", text)
    for line in joined.split("\n"):
        m = PROTO.match(line)
        if m and m.group(1) != "__attribute__" and not line.startswith(" "):
            errors.append(f"{rel}: prototype of {m.group(1)}() belongs in a header")


def check_length(errors):
    for d in LENGTH_DIRS:
        for base, _, files in os.walk(os.path.join(ROOT, d)):
            for f in sorted(files):
                if not f.endswith(LENGTH_EXTS):
                    continue
                path = os.path.join(base, f)
                with open(path, encoding="utf-8", errors="replace") as fh:
                    n = sum(1 for _ in fh)
                if n > MAX_FILE_LINES:
                    rel = os.path.relpath(path, ROOT)
                    errors.append(f"{rel}: {n} lines (max {MAX_FILE_LINES}): split it by concern")


def project_symbol(name):
    # Only the project's own names: the agent also defines libc, CUDA and
    # libtorch symbols it interposes (_exit, cudaLaunchKernel...), which
    # other rooms use from their real owners.
    return name.startswith(("gt_", "gt__", "GT_", "GT__"))


def read_objects(objdir):
    """Returns ({symbol: defining source}, {source: {symbol used}}) from
    `nm` over every object whose source is a product file."""
    objs = []
    for sub in OBJECT_DIRS:
        top = os.path.join(objdir, sub)
        for base, _, files in os.walk(top):
            for f in files:
                if not f.endswith(".o"):
                    continue
                src = os.path.relpath(os.path.join(base, f[:-2] + ".c"), top)
                if src.split("/")[0] in SOURCE_DIRS and os.path.exists(os.path.join(ROOT, src)):
                    objs.append((src, os.path.join(base, f)))
    if not objs:
        raise FileNotFoundError(f"no objects under {objdir}/{{{','.join(OBJECT_DIRS)}}} (build first)")
    owner, uses = {}, {}
    for src, obj in sorted(objs):
        out = subprocess.run(["nm", "-P", obj], check=True, capture_output=True,
                             text=True).stdout
        for line in out.splitlines():
            f = line.split()
            if len(f) < 2 or not project_symbol(f[0]):
                continue
            if f[1] in ("U", "w", "v"):  # weak references are uses too
                uses.setdefault(src, set()).add(f[0])
            elif f[1].isupper():
                owner.setdefault(f[0], src)
        uses.setdefault(src, set())
    return owner, uses


def file_graph(owner, uses):
    graph = {}
    for src, syms in uses.items():
        for sym in syms:
            dst = owner.get(sym)
            if dst and dst != src:
                graph.setdefault(src, {}).setdefault(dst, sym)
    return graph


def check_calls(graph, errors):
    for src, dsts in sorted(graph.items()):
        room = room_of(src)
        for dst, sym in sorted(dsts.items()):
            droom = room_of(dst)
            if room and droom and droom != room and droom not in DEPS[room]:
                errors.append(f"{src}: {room} calls {sym} of {dst} ({droom})")


def strongly_connected(graph):
    """Tarjan's algorithm, iterative; returns the components of more than
    one file."""
    index, low, on, stack, out, n = {}, {}, set(), [], [], 0
    nodes = sorted(set(graph) | {d for ds in graph.values() for d in ds})
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, {}))))]
        index[root] = low[root] = n
        n += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        x = stack.pop()
                        on.discard(x)
                        comp.append(x)
                        if x == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
            elif w not in index:
                index[w] = low[w] = n
                n += 1
                stack.append(w)
                on.add(w)
                work.append((w, iter(sorted(graph.get(w, {})))))
            elif w in on:
                low[v] = min(low[v], index[w])
    return out


def check_loops(graph, errors):
    pruned = {}
    for src, dsts in graph.items():
        for dst, sym in dsts.items():
            if (src, dst) not in ALLOWED_EDGES:
                pruned.setdefault(src, {})[dst] = sym
    for edge in sorted(ALLOWED_EDGES):
        if edge[1] not in graph.get(edge[0], {}):
            errors.append(f"calls: allowed edge {edge[0]} -> {edge[1]} no longer exists: remove it")
    for comp in strongly_connected(pruned):
        inside = set(comp)
        edges = [f"{s} -> {d} ({sym})" for s in comp
                 for d, sym in sorted(pruned.get(s, {}).items()) if d in inside]
        errors.append(f"calls: loop between {', '.join(comp)}: " + "; ".join(edges))


DECL = re.compile(r"\b(gt__?\w+)\s*\(")


def header_declarations(text):
    # Names followed by "(" outside comments, preprocessor lines and brace
    # bodies (static inline bodies, struct members): what it declares.
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = re.sub(r"^\s*#(?:[^\n]*\\\n)*[^\n]*", " ", text, flags=re.M)
    flat, depth = [], 0
    for ch in text:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif depth == 0:
            flat.append(ch)
    return set(DECL.findall("".join(flat)))


def check_headers(owner, errors):
    for rel in sources():
        if not rel.endswith(".h") or rel.startswith("include/"):
            continue
        room = room_of(rel)
        with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
            names = header_declarations(f.read())
        for name in sorted(names):
            src = owner.get(name)
            if src and room and room_of(src) != room:
                errors.append(f"{rel}: ({room}) declares {name}, defined in {src} ({room_of(src)})")


def main(argv):
    global ROOT
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=ROOT, help="tree to check (default: this one)")
    ap.add_argument("--objects", metavar="BUILD",
                    help="build directory whose objects rules 4-6 read (without it they are skipped)")
    args = ap.parse_args(argv)
    ROOT = os.path.abspath(args.root)
    errors = []
    check_cycles(errors)
    for rel in sources():
        with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
            text = f.read()
        check_includes(rel, text, errors)
        check_functions(rel, text, errors)
        check_prototypes(rel, text, errors)
    check_length(errors)
    what = "rooms, includes, function and file lengths, prototypes"
    if args.objects:
        try:
            owner, uses = read_objects(os.path.join(ROOT, args.objects))
        except (OSError, subprocess.CalledProcessError) as e:
            print(f"check-layers: cannot read objects: {e}")
            return 2
        graph = file_graph(owner, uses)
        check_calls(graph, errors)
        check_loops(graph, errors)
        check_headers(owner, errors)
        what += ", calls, loops, header declarations"
    for e in errors:
        print("check-layers: " + e)
    if errors:
        return 1
    print(f"check-layers: {what} ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
