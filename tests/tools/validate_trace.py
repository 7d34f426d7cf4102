#!/usr/bin/env python3
"""Structural validator for gradtrace's Chrome-trace output.

Usage: validate_trace.py [--quiet] FILE...

Checks every file against schema/trace-output.md:
  - valid JSON (NaN/Infinity rejected), object form with a traceEvents list;
  - top-level metadata: displayTimeUnit, baseTimeNanoseconds, and the
    "gradtrace" object (converter_version, wire_major, file_index, lost,
    anomalies);
  - every event has a known phase and the fields that phase needs;
    timestamps and durations are finite and non-negative;
  - per track (pid, tid), complete ('X') events nest properly: sorted by
    (start, longest first), each one ends no later than the innermost
    event still open around it;
  - every flow start ('s') has exactly one finish ('f') with the same
    (cat, id) in the same file, and vice versa;
  - every flow half is drawable, as catapult's importer and Perfetto bind
    them: a start ('s') or step ('t'), and a finish with "bp":"e", lies
    inside a complete ('X') slice on its own track (start <= ts < end, or
    ts at a zero-length slice); a finish without "bp" has a slice that
    starts at or after it on its track. catapult drops any other arrow
    ("event id N does not start at an actual slice"), so does Perfetto;
  - every pid with events has a process_name, every track with events a
    thread_name.

Exit status 0 when every file passes; otherwise 1, with one line per
failing file on stderr: "FILE: reason". Standard library only.
"""
import bisect
import json
import math
import sys
from decimal import Decimal

PHASES = {"X", "B", "E", "i", "I", "s", "t", "f", "C", "M"}
THREAD_PHASES = {"X", "B", "E", "s", "t", "f"}


class Invalid(Exception):
    pass


def _reject_constant(name):
    raise Invalid("non-finite number %s" % name)


def _ns(value, what, ev_index):
    """Microseconds (number) -> integer nanoseconds, checked."""
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
        raise Invalid("event %d: %s is not a number" % (ev_index, what))
    if not math.isfinite(value) or value < 0:
        raise Invalid("event %d: %s is %r (must be finite and >= 0)"
                      % (ev_index, what, value))
    return int(round(value * 1000))


def _int_id(ev, key, i):
    v = ev.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise Invalid("event %d (%s): missing or bad %s" % (i, ev.get("ph"), key))
    return v


def check_nesting(track, spans):
    # Longest first among equal starts: a parent opens before its child.
    spans.sort(key=lambda s: (s[0], -s[1]))
    stack = []
    for start, dur, name in spans:
        end = start + dur
        while stack and stack[-1][0] <= start:
            stack.pop()
        if stack and end > stack[-1][0]:
            raise Invalid("track pid=%s tid=%s: %r [%d, %d] ns overlaps %r "
                          "(ends %d) without nesting"
                          % (track[0], track[1], name, start, end,
                             stack[-1][1], stack[-1][0]))
        stack.append((end, name))


def check_flow_slices(spans, halves):
    """The flow rule: each half binds to a slice on its own track."""
    index = {}
    for track, sp in spans.items():
        # Starts in order with the running maximum of the ends, so that
        # "some slice with start <= ts ends after ts" is one bisection.
        order = sorted((s, s + d) for s, d, _ in sp)
        starts = [s for s, _ in order]
        maxend, m = [], -1
        for _, e in order:
            m = max(m, e)
            maxend.append(m)
        zero = {s for s, e in order if s == e}
        index[track] = (starts, maxend, zero)
    for ph, bp, track, ts, fid in halves:
        starts, maxend, zero = index.get(track, ([], [], set()))
        if ph == "f" and bp != "e":
            # Binds to the next slice that starts at or after it.
            if not starts or starts[-1] < ts:
                raise Invalid("flow id %r: finish at %d ns on pid=%s tid=%s "
                              "has no slice at or after it"
                              % (fid, ts, track[0], track[1]))
            continue
        k = bisect.bisect_right(starts, ts)
        if not ((k and maxend[k - 1] > ts) or ts in zero):
            raise Invalid("flow id %r: %s at %d ns on pid=%s tid=%s is in no "
                          "slice of its track (viewers drop the arrow)"
                          % (fid, "start" if ph == "s" else "half", ts,
                             track[0], track[1]))


def validate(path):
    try:
        with open(path, "rb") as f:
            # Decimal: ts and dur are read exactly as written (a double
            # cannot hold microseconds with nanosecond fractions past ~2^50
            # ns, and would make exact nesting look broken).
            doc = json.load(f, parse_constant=_reject_constant,
                            parse_float=Decimal)
    except Invalid:
        raise
    except (OSError, ValueError) as e:
        raise Invalid("not valid JSON: %s" % str(e).splitlines()[0])
    if not isinstance(doc, dict):
        raise Invalid("top level is not an object")
    events = doc.get("traceEvents")
    if not isinstance(events, list):
        raise Invalid("no traceEvents list")
    if doc.get("displayTimeUnit") not in ("ns", "ms"):
        raise Invalid("displayTimeUnit missing or not ns/ms")
    base = doc.get("baseTimeNanoseconds")
    if isinstance(base, bool) or not isinstance(base, int) or base < 0:
        raise Invalid("baseTimeNanoseconds missing or not a non-negative int")
    meta = doc.get("gradtrace")
    if not isinstance(meta, dict):
        raise Invalid("no gradtrace metadata object")
    for key, kind in (("converter_version", str), ("wire_major", int),
                      ("file_index", int), ("lost", dict),
                      ("anomalies", dict), ("stream", dict)):
        if not isinstance(meta.get(key), kind):
            raise Invalid("gradtrace.%s missing or not %s"
                          % (key, kind.__name__))

    spans = {}
    flows = {}
    halves = []
    used_pids = set()
    used_tracks = set()
    named_pids = set()
    named_tracks = set()
    for i, ev in enumerate(events):
        if not isinstance(ev, dict):
            raise Invalid("event %d is not an object" % i)
        ph = ev.get("ph")
        if ph not in PHASES:
            raise Invalid("event %d: unknown phase %r" % (i, ph))
        pid = _int_id(ev, "pid", i)
        if ph == "M":
            name = ev.get("name")
            args = ev.get("args")
            if not isinstance(args, dict):
                raise Invalid("event %d: metadata without args" % i)
            if name == "process_name":
                if not isinstance(args.get("name"), str):
                    raise Invalid("event %d: process_name without a name" % i)
                named_pids.add(pid)
            elif name == "thread_name":
                if not isinstance(args.get("name"), str):
                    raise Invalid("event %d: thread_name without a name" % i)
                named_tracks.add((pid, _int_id(ev, "tid", i)))
            continue
        if not isinstance(ev.get("name"), str):
            raise Invalid("event %d (%s): name missing or not a string" % (i, ph))
        ts = _ns(ev.get("ts"), "ts", i)
        used_pids.add(pid)
        if ph in THREAD_PHASES or (ph in ("i", "I") and ev.get("s", "t") == "t"):
            used_tracks.add((pid, _int_id(ev, "tid", i)))
        if ph == "X":
            dur = _ns(ev.get("dur"), "dur", i)
            spans.setdefault((pid, ev["tid"]), []).append((ts, dur, ev["name"]))
        elif ph in ("B", "E"):
            raise Invalid("event %d: B/E events are not part of the format "
                          "(spans are X)" % i)
        elif ph in ("s", "f", "t"):
            fid = ev.get("id")
            if isinstance(fid, bool) or not isinstance(fid, (int, str)):
                raise Invalid("event %d: flow without an id" % i)
            halves.append((ph, ev.get("bp"), (pid, ev.get("tid")), ts, fid))
            ent = flows.setdefault((ev.get("cat"), fid), [0, 0])
            if ph == "s":
                ent[0] += 1
            elif ph == "f":
                ent[1] += 1
        elif ph == "C":
            args = ev.get("args")
            if not isinstance(args, dict) or not args:
                raise Invalid("event %d: counter without args" % i)
            for k, v in args.items():
                if isinstance(v, bool) or not isinstance(v, (int, float, Decimal)) \
                        or not math.isfinite(v):
                    raise Invalid("event %d: counter %r is not a finite number"
                                  % (i, k))

    for track, sp in spans.items():
        check_nesting(track, sp)
    for (cat, fid), (s, f) in flows.items():
        if s != 1 or f != 1:
            raise Invalid("flow cat=%r id=%r has %d start(s) and %d finish(es) "
                          "in this file (want 1 and 1)" % (cat, fid, s, f))
    check_flow_slices(spans, halves)
    missing = used_pids - named_pids
    if missing:
        raise Invalid("pid %s has events but no process_name" % sorted(missing)[0])
    missing = used_tracks - named_tracks
    if missing:
        raise Invalid("track pid=%s tid=%s has events but no thread_name"
                      % sorted(missing, key=str)[0])
    return len(events)


def main(argv):
    quiet = False
    files = []
    for a in argv[1:]:
        if a in ("-q", "--quiet"):
            quiet = True
        elif a in ("-h", "--help"):
            print(__doc__.strip())
            return 0
        else:
            files.append(a)
    if not files:
        sys.stderr.write("usage: validate_trace.py [--quiet] FILE...\n")
        return 2
    bad = 0
    for path in files:
        try:
            n = validate(path)
            if not quiet:
                print("%s: ok (%d events)" % (path, n))
        except Invalid as e:
            sys.stderr.write("%s: %s\n" % (path, e))
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
