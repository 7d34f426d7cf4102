"""A small, independent reader of .gtr files for the torch end-to-end tests.

Follows schema/wire.md (hello, then chunks of zstd-compressed packed
records) without using the C codec, so the tests check the agent's output
against the normative description rather than against code that shares the
agent's assumptions. zstd comes from the system's libzstd through ctypes
(the agent links the same library), so no Python package is needed.

Only what the torch tests need is decoded; other record types are counted.
"""

import collections
import ctypes
import ctypes.util
import struct

HELLO = struct.Struct("<8sHHIIIiiiIQQHHI")
CHUNK = struct.Struct("<IBBHIIIIQQII")
REC = struct.Struct("<HH")
CHUNK_MAGIC = 0x4B435447
SEQ_UNKNOWN = (1 << 64) - 1

T_STRING, T_THREAD_INFO, T_THREAD = 1, 3, 4
T_SCOPE_BEGIN, T_SCOPE_END = 5, 6
T_NODE_CREATED, T_BWD_BEGIN, T_BWD_END = 7, 8, 9
T_PASS_BEGIN, T_PASS_END, T_STEP = 10, 11, 12
T_LOST, T_WARNING = 20, 23
T_WINDOW_BEGIN, T_WINDOW_END = 21, 22
T_BWD_NODE_LAYER = 25
SCOPE_USER, SCOPE_MODULE = 0, 1
SCOPE_F_RECOMPUTE = 1

_zstd = None


def _decompress(payload, raw_size):
    global _zstd
    if _zstd is None:
        name = ctypes.util.find_library("zstd") or "libzstd.so.1"
        _zstd = ctypes.CDLL(name)
        _zstd.ZSTD_decompress.restype = ctypes.c_size_t
        _zstd.ZSTD_decompress.argtypes = [ctypes.c_void_p, ctypes.c_size_t,
                                          ctypes.c_void_p, ctypes.c_size_t]
        _zstd.ZSTD_isError.restype = ctypes.c_uint
        _zstd.ZSTD_isError.argtypes = [ctypes.c_size_t]
    out = ctypes.create_string_buffer(raw_size)
    n = _zstd.ZSTD_decompress(out, raw_size, payload, len(payload))
    if _zstd.ZSTD_isError(n) or n != raw_size:
        raise ValueError("zstd: chunk does not decompress to raw_size")
    return out.raw


class Trace:
    """Decoded records of one .gtr file.

    strings: id -> str. events: list of dicts with 'type', 'tid' (OS
    thread that recorded it) and the record's fields, in stream order.
    counts: record type -> number seen. warnings: list of texts.
    """

    def __init__(self, path):
        self.strings = {}
        self.events = []
        self.counts = collections.Counter()
        self.warnings = []
        self.lost = {}
        self.chunks = 0
        with open(path, "rb") as f:
            data = f.read()
        self._parse(data)

    def _parse(self, data):
        if len(data) < HELLO.size:
            raise ValueError("short file")
        h = HELLO.unpack_from(data, 0)
        if h[0] != b"GTRACE\0\0" or h[1] != 1:
            raise ValueError("not a gradtrace v1 file")
        self.pid = h[4]
        off = h[3]
        while off + CHUNK.size <= len(data):
            (magic, major, _minor, flags, hsize, raw_size, payload_size,
             _count, _seq, _first, _crc, _res) = CHUNK.unpack_from(data, off)
            if magic != CHUNK_MAGIC or major != 1 or hsize != CHUNK.size:
                raise ValueError("bad chunk header at %d" % off)
            payload = data[off + hsize: off + hsize + payload_size]
            if len(payload) != payload_size:
                break  # truncated tail (a process killed mid-write)
            raw = payload if flags & 1 else _decompress(payload, raw_size)
            self._records(raw)
            self.chunks += 1
            off += hsize + payload_size

    def _records(self, raw):
        tid = 0
        off = 0
        ev = self.events
        while off + 4 <= len(raw):
            typ, size = REC.unpack_from(raw, off)
            if size < 4 or off + size > len(raw):
                raise ValueError("bad record size")
            body = raw[off + 4: off + size]
            off += size
            self.counts[typ] += 1
            if typ == T_STRING:
                (sid,) = struct.unpack_from("<I", body)
                self.strings[sid] = body[4:].decode("utf-8", "replace")
            elif typ == T_THREAD:
                (tid,) = struct.unpack_from("<I", body)
            elif typ == T_SCOPE_BEGIN:
                kind, fl, name, cls, ts = struct.unpack("<HHIIQ", body)
                ev.append(dict(type=typ, tid=tid, kind=kind, name=name,
                               cls=cls, ts=ts, flags=fl))
            elif typ == T_SCOPE_END:
                kind, fl, name, ts = struct.unpack("<HHIQ", body)
                ev.append(dict(type=typ, tid=tid, kind=kind, name=name, ts=ts,
                               flags=fl))
            elif typ == T_BWD_NODE_LAYER:
                layer, param, fl, ts = struct.unpack("<IIIQ", body)
                ev.append(dict(type=typ, tid=tid, layer=layer, param=param,
                               flags=fl, ts=ts))
            elif typ == T_NODE_CREATED:
                layer, ts, seq, ftid = struct.unpack("<IQQQ", body)
                ev.append(dict(type=typ, tid=tid, layer=layer, ts=ts,
                               seq=seq, fwd_tid=ftid))
            elif typ == T_BWD_BEGIN:
                name, ts, seq, ftid = struct.unpack("<IQQQ", body)
                ev.append(dict(type=typ, tid=tid, name=name, ts=ts, seq=seq,
                               fwd_tid=ftid))
            elif typ == T_BWD_END:
                _fl, ts, seq, ftid = struct.unpack("<IQQQ", body)
                ev.append(dict(type=typ, tid=tid, ts=ts, seq=seq,
                               fwd_tid=ftid))
            elif typ in (T_PASS_BEGIN, T_PASS_END, T_STEP):
                _fl, ts, value = struct.unpack("<IQQ", body)
                ev.append(dict(type=typ, tid=tid, ts=ts, value=value))
            elif typ in (T_WINDOW_BEGIN, T_WINDOW_END):
                wid, spec, layer, ts, it = struct.unpack("<IIIQQ", body)
                ev.append(dict(type=typ, tid=tid, id=wid, spec=spec,
                               layer=layer, ts=ts, iteration=it))
            elif typ == T_WARNING:
                code, text, ts = struct.unpack("<IIQ", body)
                self.warnings.append((code, text))
            elif typ == T_LOST:
                ltid, what, count = struct.unpack("<IIQ", body)
                self.lost[(ltid, what)] = count

    def s(self, sid):
        return self.strings.get(sid, "") if sid else ""

    def warning_texts(self):
        return [self.s(t) for _c, t in self.warnings]

    def of(self, typ):
        return [e for e in self.events if e["type"] == typ]

    def backward_nodes(self):
        """Completed backward nodes: dicts name, seq, fwd_tid, tid, begin,
        end, in begin order. A begin and its end are matched per OS thread
        (nodes nest when backward is reentrant)."""
        open_ = collections.defaultdict(list)
        done = []
        for e in self.events:
            if e["type"] == T_BWD_BEGIN:
                open_[e["tid"]].append(e)
            elif e["type"] == T_BWD_END and open_[e["tid"]]:
                b = open_[e["tid"]].pop()
                if (b["seq"], b["fwd_tid"]) != (e["seq"], e["fwd_tid"]):
                    raise ValueError("backward end does not match its begin")
                done.append(dict(name=self.s(b["name"]), seq=b["seq"],
                                 fwd_tid=b["fwd_tid"], tid=b["tid"],
                                 begin=b["ts"], end=e["ts"]))
        done.sort(key=lambda n: n["begin"])
        return done

    def attribution(self):
        """{layer path: set of (fwd_tid, seq)} for backward nodes with a
        known sequence number, joined to their creation record the way the
        converter does. Layer "" = created outside any module."""
        created = {}
        for e in self.of(T_NODE_CREATED):
            created[(e["fwd_tid"], e["seq"])] = self.s(e["layer"])
        out = collections.defaultdict(set)
        for n in self.backward_nodes():
            if n["seq"] == SEQ_UNKNOWN:
                continue
            key = (n["fwd_tid"], n["seq"])
            out[created.get(key, "<no creation record>")].add(key)
        return dict(out)

    def module_calls(self):
        """[(tid, path, class, begin, end)] of module scopes, per thread."""
        stacks = collections.defaultdict(list)
        calls = []
        for e in self.events:
            if e["type"] == T_SCOPE_BEGIN and e["kind"] == SCOPE_MODULE:
                stacks[e["tid"]].append(e)
            elif e["type"] == T_SCOPE_END and e["kind"] == SCOPE_MODULE:
                if stacks[e["tid"]]:
                    b = stacks[e["tid"]].pop()
                    calls.append((e["tid"], self.s(b["name"]),
                                  self.s(b["cls"]), b["ts"], e["ts"]))
        return calls
