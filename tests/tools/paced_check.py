#!/usr/bin/env python3
"""Per-thread accounting of tests/progs/agent_paced, the check behind the
loss-accounting guarantees (schema/reliability.md): for every thread,

    instants in every trace file of the process (and its children)
      + its GT_LOST_EVENTS ring drops
      + its disk_full records (the daemon's, at a full disk)
      + its GT_LOST_UNDELIVERED (process life: the newest, the largest)
    = instants the thread produced, exactly.

Ring drops and disk_full are cumulative per stream, and every file of a
stream (its rotated parts, its window files) repeats the count so far:
the largest per stream is taken, and streams are summed. A stream is the
process's hello time (clock.hello_mono_ns) and the file stem with its part
index and window suffix removed (a reconnecting agent gets a new stem,
"<stem>-2").

A thread that also made module calls (agent_paced's LAYER, "spans=1")
is printed but not held to it: a span is two records and one event, and
one whose begin a mark covered but whose end a full disk cost is half in
neither (schema/reliability.md, "Not yet guaranteed").

Usage: paced_check.py PACED_OUTPUT TRACE_FILE...
PACED_OUTPUT holds agent_paced's "tid=T produced=N" lines (its children's
too). Prints one line per thread; exits 1 when any thread is not exact or
no thread was reported."""
import json
import os
import re
import sys


def stream_of(path, doc):
    stem = os.path.basename(path)
    stem = re.sub(r"(\.pt\.trace)?\.json$", "", stem)
    stem = re.sub(r"-w\d+-.*$", "", stem)
    stem = re.sub(r"\.\d+$", "", stem)
    hello = (doc["gradtrace"].get("clock") or {}).get("hello_mono_ns")
    return (hello, stem)


def main(argv):
    produced = {}
    spans = set()
    for line in open(argv[1]):
        kv = dict(f.split("=") for f in line.split())
        produced[int(kv["tid"])] = int(kv["produced"])
        if kv.get("spans") == "1":
            spans.add(int(kv["tid"]))
    recorded = {t: 0 for t in produced}
    undeliv = {t: 0 for t in produced}
    per_stream = {}  # (stream, kind, tid) -> the largest count
    for p in argv[2:]:
        d = json.load(open(p))
        for e in d["traceEvents"]:
            if e.get("name") == "paced" and e.get("ph") == "i":
                recorded[e["tid"]] = recorded.get(e["tid"], 0) + 1
        s = stream_of(p, d)
        for l in d["gradtrace"]["lost"].get("threads", []):
            t = l["tid"]
            if t not in produced:
                continue
            if "undelivered" in l:
                undeliv[t] = max(undeliv[t], l["undelivered"])
            for kind in ("events", "disk_full"):
                if kind in l:
                    k = (s, kind, t)
                    per_stream[k] = max(per_stream.get(k, 0), l[kind])
    events = {t: 0 for t in produced}
    disk = {t: 0 for t in produced}
    for (_, kind, t), n in per_stream.items():
        (events if kind == "events" else disk)[t] += n
    bad = 0
    for t in sorted(produced):
        total = recorded[t] + events[t] + undeliv[t] + disk[t]
        off = "" if total == produced[t] else (
            "  (spans too: %+d, not checked)" if t in spans else
            "  MISMATCH %+d") % (total - produced[t])
        print("tid %d: produced %d, in the trace %d, lost %d + undelivered %d"
              " + disk full %d%s" % (
                  t, produced[t], recorded[t], events[t], undeliv[t], disk[t],
                  off))
        bad += total != produced[t] and t not in spans
    checked = len(produced) - len(spans)
    print("%d files of the agent; %d of %d threads exact" % (
        len(argv) - 2, checked - bad, checked))
    return 1 if bad or not checked else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
