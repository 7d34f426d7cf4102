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

Exit status 0 when all hold; otherwise one line per violation and 1.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Room -> the rooms it may include. Order of the agent roles, bottom up:
# base (process-wide state, clocks, buffers, strings, capture state),
# trigger (trigger engine), stream (streamer thread, sinks, daemon
# control, crash flush, and the life cycle in core.c that starts, flushes
# and forks them), hooks (event sources), entry (constructor).
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
    "agent.hooks": ["agent.stream", "agent.trigger", "agent.base", "common", "public"],
    "agent.entry": ["agent.hooks", "agent.stream", "agent.trigger", "agent.base",
                    "common", "public"],
}

# Agent files by role (file stem -> role). A new agent file must be given
# a role here.
AGENT_ROLES = {
    "internal": "base", "clock": "base", "timebase": "base", "config": "base",
    "diag": "base", "warn": "base", "ring": "base", "strings": "base",
    "capture": "base", "rec_out": "base",
    "trigger": "trigger", "trigger_nodes": "trigger",
    "stream": "stream", "streamer": "stream", "sink": "stream", "control": "stream", "crash": "stream",
    "undelivered": "stream", "exit": "stream",
    "core": "stream",
    "events": "hooks", "api": "hooks", "hooks": "hooks", "cuda": "hooks",
    "torch": "hooks", "torch_layout": "hooks", "torch_params": "hooks",
    "cupti": "hooks", "cupti_api": "hooks",
    "cupti_internal": "hooks", "cupti_abi": "hooks", "cupti_records": "hooks",
    "cupti_sync": "hooks", "nvtx": "hooks", "nvtx_ranges": "hooks", "nvtx_rules": "hooks",
    "recordfn": "hooks", "ops": "hooks",
    "ctor": "entry",
}

SOURCE_DIRS = ["common", "agent", "daemon", "include"]
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


def main():
    errors = []
    check_cycles(errors)
    for rel in sources():
        with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
            text = f.read()
        check_includes(rel, text, errors)
        check_functions(rel, text, errors)
        check_prototypes(rel, text, errors)
    for e in errors:
        print("check-layers: " + e)
    if errors:
        return 1
    print("check-layers: rooms, includes, function lengths and prototypes ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
