"""The compile-time map in the stream, and the regions that run it
(schema/torch.md, "Compiled models"). _compile.py builds one map per
compiled graph; here it goes to the agent as records of its own
(gt_compiled_graph, one gt_compiled_call per call, strings interned once
by the agent), at compile time or when a wrapper is loaded from
inductor's cache, and the wrapper module's `call` is wrapped so that each
run of the graph is a region (gt_compiled_begin / gt_compiled_end) in
which the agent records the generated kernels' profiling scopes and the
extern calls. Dynamo's compile start and end callbacks give each
compiled frame a span (gt_compile_span).

Nothing here runs inside a compiled graph or changes what is compiled:
the wrapper is the generated module's Python entry point, which inductor
reads (`mod.call`) after the hooks in _compile.py return; it passes its
arguments on unchanged (the boxed list, which the callee clears).
Without an agent of API minor 4 everything here is inert.
"""

import ctypes
import threading

from . import _agent

_PHASE = {"forward": 1, "backward": 2, "inference": 3}
_CALL_PHASE = {"forward": 1, "backward": 2, "recompute": 3}
_F_CACHED = 0x1
_CC_EXTERN, _CC_FUSED, _CC_UNOWNED, _CC_GPU = 0x1, 0x2, 0x4, 0x8
_U32 = 0xFFFFFFFF

_u32 = ctypes.c_uint32
_graph = _agent._load_optional("gt_compiled_graph", _u32, [_u32] * 6)
_call = _agent._load_optional("gt_compiled_call", None, [_u32] * 8)
_begin = _agent._load_optional("gt_compiled_begin", None, [_u32])
_end = _agent._load_optional("gt_compiled_end", None, [_u32])
_span = _agent._load_optional("gt_compile_span", None,
                              [_u32, ctypes.c_uint64, ctypes.c_uint64])
_now = _agent._load_optional("gt_now_ns", ctypes.c_uint64, [])

stats = {"sent": 0, "wrapped": 0, "spans": 0}


def available():
    """Whether the agent takes maps and regions (API minor 4)."""
    return None not in (_graph, _call, _begin, _end)


def _sid(text):
    return 0 if text is None else _agent.intern(str(text))


def _flags(c):
    f = 0
    if c.get("kind") == "extern":
        f |= _CC_EXTERN
    mark = c.get("mark")
    if mark == "fused":
        f |= _CC_FUSED
    elif mark == "unowned":
        f |= _CC_UNOWNED
    if c.get("device") not in (None, "cpu"):
        f |= _CC_GPU
    return f


def send(content, cached):
    """Hands one graph's map to the agent. @return the map's number in
    the stream, 0 when there is no agent for it or it refused."""
    if not available():
        return 0
    calls = content.get("calls") or []
    gid = content.get("graph_id")
    try:
        gid = int(gid) & _U32 if gid is not None else _U32
    except (TypeError, ValueError):
        gid = _U32
    g = _graph(_sid(content.get("code")), _sid(content.get("compile_id")),
               gid, _PHASE.get(content.get("phase"), 1),
               _F_CACHED if cached else 0, len(calls))
    if not g:
        return 0
    for i, c in enumerate(calls):
        fused = c.get("fused")
        _call(g, i, _sid(c.get("kernel")), _sid(c.get("scope")),
              _sid(c.get("owner")),
              _sid(" ".join(fused)) if fused else 0,
              _CALL_PHASE.get(c.get("phase"), 1), _flags(c))
    stats["sent"] += 1
    return g


def _c_region():
    """_gthooks.region, set up with the agent's begin/end, or None (no
    extension for this interpreter, GRADTRACE_C_HOOKS=0)."""
    import os
    if os.environ.get("GRADTRACE_C_HOOKS", "1") == "0":
        return None
    try:
        from . import _gthooks
        addr = ctypes.cast
        _gthooks.region_setup(addr(_begin, ctypes.c_void_p).value,
                              addr(_end, ctypes.c_void_p).value)
        return _gthooks.region
    except Exception:
        return None


_region = []  # [the C constructor or None], found at the first wrap


def _py_region(orig, graph):
    begin, end = _begin, _end

    def call(*args, **kwargs):
        begin(graph)
        try:
            return orig(*args, **kwargs)
        finally:
            end(graph)

    call._gradtrace_graph = graph
    call.__wrapped__ = orig
    return call


def wrap(mod, graph):
    """Makes each run of the wrapper module's call a region of map
    `graph`: in C (_gthooks.region) where the extension is built, else
    in Python. @return True when wrapped (False: no call, no map,
    already wrapped)."""
    orig = getattr(mod, "call", None)
    if not graph or orig is None or not callable(orig) or \
            getattr(orig, "_gradtrace_graph", None):
        return False
    if not _region:
        _region.append(_c_region())
    call = None
    if _region[0] is not None:
        try:
            call = _region[0](orig, graph)
        except Exception:
            call = None
    if call is None:
        call = _py_region(orig, graph)
    mod.call = call
    stats["wrapped"] += 1
    return True


def wrapped(mod):
    """The map number mod's call runs as, or 0."""
    return getattr(getattr(mod, "call", None), "_gradtrace_graph", 0) or 0


# --- compile spans ---------------------------------------------------------

_starts = threading.local()


def _on_start(args=None):
    try:
        stack = getattr(_starts, "stack", None)
        if stack is None:
            stack = _starts.stack = []
        stack.append((_now(), getattr(args, "compile_id", None)))
    except Exception:
        pass


def _on_end(args=None):
    try:
        stack = getattr(_starts, "stack", None)
        if not stack:
            return
        begin, cid = stack.pop()
        cid = getattr(args, "compile_id", None) or cid
        _span(_sid("compile %s" % cid if cid is not None else "compile"),
              begin, _now())
        stats["spans"] += 1
    except Exception:
        pass


def watch_compiles():
    """Registers the compile spans with dynamo's callbacks (once
    torch._dynamo.callback is imported)."""
    if _span is None or _now is None:
        return
    try:
        from torch._dynamo.callback import callback_handler
        callback_handler.register_start_callback(_on_start)
        callback_handler.register_end_callback(_on_end)
    except Exception:
        pass
