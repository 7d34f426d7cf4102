#!/usr/bin/env python3
"""Byte-level mutations of a gradtrace trace file, for the mutation loop
(tests/e2e/t_mutate.sh: `gradtrace merge` and `gradtrace convert --repair`).

Usage: mutate_json.py TRACE.json OUT_PREFIX N SEED

Writes N mutants OUT_PREFIX<k>.json. Each takes one to three of: a byte
changed, hostile bytes inserted (terminal controls, C1 as UTF-8 and raw,
invalid UTF-8, NUL, JSON syntax), a range deleted, a line repeated, a
number's digit made a letter, garbage or zeros appended, an acknowledgement
mark (TAB) with a foreign line after it; a third are then cut at a random
offset (an unfinished file, as a killed daemon leaves). Deterministic for
a seed. Standard library only.
"""
import random
import sys

HOSTILE = [b"\x1b]0;pwned\x07", b"\x1b[2J", b"\xc2\x9b", b"\x9b", b"\xff\xfe",
           b"\xc0\xaf", b"\xed\xa0\x80", b"\x00", b"\x01", b"\x7f", b'"', b"{",
           b"}", b"]", b",", b"\n", b"\\", b"\\u", b"\\ud800", b"NaN", b"1e999",
           b"\xef\xbf\xbe"]


def mutate(data, rnd):
    d = bytearray(data)
    for _ in range(rnd.randint(1, 3)):
        op = rnd.randrange(8)
        i = rnd.randrange(len(d)) if d else 0
        if op == 0 and d:
            d[i] = rnd.randrange(256)
        elif op == 1:
            d[i:i] = rnd.choice(HOSTILE)
        elif op == 2 and d:
            del d[i:i + rnd.randint(1, 64)]
        elif op == 3:
            s = d.rfind(b"\n", 0, i) + 1
            e = d.find(b"\n", i)
            if e > s:
                d[e + 1:e + 1] = d[s:e + 1]
        elif op == 4:
            digits = [k for k in range(len(d)) if 48 <= d[k] <= 57]
            if digits:
                d[rnd.choice(digits)] = rnd.choice(b"xe-+.")
        elif op == 5:
            d += rnd.choice([b"\x00" * rnd.randint(1, 4096), b"garbage\n",
                             b",{\"ph\":\"X\"}\n"])
        elif op == 6:
            e = d.find(b"\n", i)
            if e >= 0:
                d[e + 1:e + 1] = b"\t{\"ph\":\"X\",\"name\":\x1b}\n"
        else:
            d[i:i] = rnd.choice(HOSTILE) * rnd.randint(2, 20)
    if rnd.random() < 1 / 3 and len(d) > 1:
        del d[rnd.randrange(1, len(d)):]
    return bytes(d)


def main():
    src, prefix, n, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    data = open(src, "rb").read()
    rnd = random.Random(seed)
    for k in range(n):
        with open("%s%d.json" % (prefix, k), "wb") as f:
            f.write(mutate(data, rnd))


if __name__ == "__main__":
    main()
