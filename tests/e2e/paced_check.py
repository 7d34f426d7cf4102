#!/usr/bin/env python3
"""Per-thread accounting of tests/progs/agent_paced, the check behind the
loss-accounting guarantees (schema/reliability.md):

    instants in every trace file of the process
      + its GT_LOST_EVENTS (per stream: summed over files)
      + its GT_LOST_UNDELIVERED (process life: the newest, the largest)
    = instants the thread produced, exactly.

Usage: paced_check.py PACED_OUTPUT TRACE_FILE...
PACED_OUTPUT holds agent_paced's "tid=T produced=N" lines (its children's
too); the files are every trace of the process (and its children's).
Prints one line per thread; exits 1 when any thread is not exact or no
thread was reported."""
import json
import sys


def main(argv):
    produced = {}
    for line in open(argv[1]):
        kv = dict(f.split("=") for f in line.split())
        produced[int(kv["tid"])] = int(kv["produced"])
    recorded = {t: 0 for t in produced}
    events = {t: 0 for t in produced}   # ring drops: per stream, summed
    undeliv = {t: 0 for t in produced}  # process life: the newest is the largest
    for p in argv[2:]:
        d = json.load(open(p))
        for e in d["traceEvents"]:
            if e.get("name") == "paced" and e.get("ph") == "i":
                recorded[e["tid"]] = recorded.get(e["tid"], 0) + 1
        for l in d["gradtrace"]["lost"].get("threads", []):
            if l["tid"] in events and "events" in l:
                events[l["tid"]] += l["events"]
            if l["tid"] in undeliv and "undelivered" in l:
                undeliv[l["tid"]] = max(undeliv[l["tid"]], l["undelivered"])
    bad = 0
    for t in sorted(produced):
        total = recorded[t] + events[t] + undeliv[t]
        print("tid %d: produced %d, in the trace %d, lost %d + undelivered %d%s" % (
            t, produced[t], recorded[t], events[t], undeliv[t],
            "" if total == produced[t] else "  MISMATCH %+d" % (total - produced[t])))
        bad += total != produced[t]
    print("%d files of the agent; %d of %d threads exact" % (
        len(argv) - 2, len(produced) - bad, len(produced)))
    return 1 if bad or not produced else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
