#!/usr/bin/env python3
"""Structure-aware mutations of a gradtrace stream (.gtr = hello chunk*),
for the mutation loop (tests/e2e/t_mutate.sh): hostile times in the hello
and in records, sizes and types, sequence jumps, chunks dropped, repeated
or cut, with the chunk CRC-32C recomputed so the mutation reaches the
converter instead of stopping at the checksum.

  mutate_gtr.py IN.gtr OUT_PREFIX N SEED

writes OUT_PREFIX<i>.gtr for i in 0..N-1. Raw (uncompressed) chunks are
mutated inside; compressed ones only as whole chunks. Standard library
only."""
import random, struct, sys

POLY = 0x82F63B78
TABLE = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ POLY if c & 1 else c >> 1
    TABLE.append(c)


def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    for b in data:
        crc = TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


MAGIC = struct.pack("<I", 0x4B435447)
U64 = [0, 1, 2**63 - 1, 2**63, 2**64 - 1, 2**62 * 3, 10**18]
U32 = [0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 1 << 20]


def split(data):
    first = data.find(MAGIC)
    hello, chunks, off = data[:first], [], first
    while off >= 0 and off + 48 <= len(data):
        psize = struct.unpack_from("<I", data, off + 16)[0]
        chunks.append(bytearray(data[off:off + 48 + psize]))
        off += 48 + psize
    return bytearray(hello), chunks


def fix_crc(ch):
    struct.pack_into("<I", ch, 40, 0)
    struct.pack_into("<I", ch, 40, crc32c(bytes(ch)))


def mutate_records(ch, rnd):
    if len(ch) <= 48 or not struct.unpack_from("<H", ch, 6)[0] & 1:
        return
    off, end = 48, len(ch)
    recs = []
    while off + 4 <= end:
        size = struct.unpack_from("<H", ch, off + 2)[0]
        if size < 4 or off + size > end:
            break
        recs.append((off, size))
        off += size
    for _ in range(rnd.randint(1, 4)):
        if not recs:
            return
        off, size = rnd.choice(recs)
        what = rnd.random()
        if what < 0.5 and size >= 16:
            at = off + 4 + rnd.randrange(0, (size - 12) // 4) * 4
            v = rnd.choice(U64 + [rnd.getrandbits(64)])
            struct.pack_into("<Q", ch, at, v)
        elif what < 0.8 and size >= 8:
            at = off + 4 + rnd.randrange(0, (size - 4) // 4) * 4
            struct.pack_into("<I", ch, at, rnd.choice(U32 + [rnd.getrandbits(32)]))
        elif what < 0.9:
            struct.pack_into("<H", ch, off, rnd.randrange(0, 40))
        else:
            struct.pack_into("<H", ch, off + 2, rnd.choice([0, 3, 4, size - 4, size + 4, 0xFFFF]))


def mutate(hello, chunks, rnd):
    hello = bytearray(hello)
    chunks = [bytearray(c) for c in chunks]
    for _ in range(rnd.randint(1, 3)):
        r = rnd.random()
        if r < 0.15 and len(hello) >= 56:
            struct.pack_into("<Q", hello, rnd.choice([40, 48]), rnd.choice(U64 + [rnd.getrandbits(64)]))
        elif r < 0.65 and chunks:
            mutate_records(rnd.choice(chunks), rnd)
        elif r < 0.75 and chunks:
            struct.pack_into("<Q", rnd.choice(chunks), 24, rnd.choice(U64 + [rnd.getrandbits(40)]))
        elif r < 0.8 and chunks:
            struct.pack_into("<Q", rnd.choice(chunks), 32, rnd.choice(U64))
        elif r < 0.87 and len(chunks) > 1:
            del chunks[rnd.randrange(len(chunks))]
        elif r < 0.94 and chunks:
            i = rnd.randrange(len(chunks))
            chunks.insert(i, bytearray(chunks[i]))
        elif chunks:
            i = rnd.randrange(len(chunks))
            chunks[i] = chunks[i][:rnd.randrange(1, len(chunks[i]) + 1)]
    for c in chunks:
        if len(c) >= 48:
            fix_crc(c)
    return bytes(hello) + b"".join(bytes(c) for c in chunks)


def main():
    src, prefix, n, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    hello, chunks = split(open(src, "rb").read())
    rnd = random.Random(seed)
    for i in range(n):
        open("%s%d.gtr" % (prefix, i), "wb").write(mutate(hello, chunks, rnd))


if __name__ == "__main__":  # compare-convert.sh imports crc32c
    main()
