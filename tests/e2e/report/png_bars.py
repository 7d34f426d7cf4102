"""Checks a PNG rendered from `gradtrace report --svg` (stdlib only: zlib
and a PNG decoder for 8-bit RGB/RGBA, non-interlaced, as rsvg-convert
writes): the picture is not blank (it holds the bar colours), and the
number of bar rows (horizontal bands of rows with a long run of the
track or bar colours) equals the expected count.

  png_bars.py FILE.png ROWS
"""
import struct
import sys
import zlib

BAR = {(0x4e, 0x79, 0xa7), (0xf2, 0x8e, 0x2b), (0x59, 0xa1, 0x4f)}
TRACK = (0xee, 0xee, 0xee)


def decode(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise SystemExit("FAIL: not a PNG")
    pos, idat, hdr = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    w, h, depth, ctype, _, _, interlace = hdr
    if depth != 8 or ctype not in (2, 6) or interlace:
        raise SystemExit(f"FAIL: unsupported PNG depth {depth} type {ctype}")
    bpp = 3 if ctype == 2 else 4
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows, prev, i = [], bytearray(stride), 0
    for _ in range(h):
        f, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if f == 1:
                line[x] = (line[x] + a) & 255
            elif f == 2:
                line[x] = (line[x] + b) & 255
            elif f == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x:x + 3]) for x in range(0, stride, bpp)])
        prev = line
    return w, h, rows


def main():
    path, want = sys.argv[1], int(sys.argv[2])
    w, h, rows = decode(path)
    colours = set()
    bands, inside = 0, False
    for r in rows:
        colours.update(r)
        long_run = sum(1 for p in r if p in BAR or p == TRACK) >= 100
        if long_run and not inside:
            bands += 1
        inside = long_run
    if not (colours & BAR) or len(colours) < 4:
        raise SystemExit(f"FAIL: {path} looks blank ({len(colours)} colours)")
    if bands != want:
        raise SystemExit(f"FAIL: {path} has {bands} bar rows, expected {want}")
    print(f"svg ok: {w}x{h}, {bands} bar rows")


main()
