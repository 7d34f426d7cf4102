"""The compile-time map of torch.compile'd graphs (schema/torch.md,
"Compiled models: the compile-time map"): for every kernel inductor
generates and every extern call in a compiled forward or backward
wrapper, the module that owns it and the phase, computed while inductor
generates the code and never on the step's path. _compile_rules.py holds
the attribution rules; this file hooks them into inductor and keeps the
maps.

Three hooks, each put in once its torch module is first imported (so a
process that never compiles never imports inductor for us), and each
calling what it wraps unchanged, so the graphs, the graph breaks and the
generated code are the same with or without them:
  - torch._inductor.debug.set_kernel_post_grad_provenance_tracing is the
    one function inductor's code generation calls for every kernel call
    site and every extern call it writes into a wrapper, with the kernel's
    name and its scheduler nodes (whose IR nodes list the FX nodes they
    came from, each with its meta). With provenance tracking off (the
    default) it returns at once; the hook reads the nodes first.
  - GraphLowering.compile_to_module ends a graph's code generation: the
    map is finished there, kept by the wrapper module's code key, and
    written next to the module in inductor's cache (<key>.gradtrace.json).
  - PyCodeCache.load_by_key_path loads a wrapper module from inductor's
    cache without generating it (an FX graph cache or AOTAutograd cache
    hit, in this process or a later one): the map is taken from memory or
    from that file.
install() also turns on inductor's CPU kernel profiling scopes
(config.cpp.enable_kernel_profile), so each generated CPU kernel runs
inside a RecordFunction scope named "graph_<graph id>_<kernel name>" (the
map's "scope"), unless TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE says
otherwise.

Every hook swallows its own failures (counted in stats["failures"]): a
profiler never makes a compile fail.
"""

import json
import os
import sys
import threading
import weakref

from . import _compile_rules as _rules
from . import _compile_run as _run

# Emitted graph maps, oldest first (emit()). Each is a plain dict, the
# same as the JSON beside the wrapper module (schema/torch.md has the
# fields): {"graph_id", "compile_id", "phase": "forward" | "backward" |
# "inference", "code": wrapper module key, "base": frame names the paths
# hang from, "calls": [one dict per kernel or extern call, in the
# wrapper's order: "kernel", "kind", "scope", "device", "owner", "fused",
# "mark", "phase", "recompute"], "kernels": {kernel name: the same fields
# over all its calls, and "calls": their indices}}.
maps = []
stats = dict.fromkeys((
    "graphs", "calls", "kernels", "externs", "fused", "unowned",
    "cache_hits", "unmapped", "failures", "disk_errors", "dropped",
    "unhooked"), 0)

_MAPS_MAX = 20000
_BY_CODE_MAX = 4096
_SIDECAR = ".gradtrace.json"
_PROFILE_ENV = "TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE"

_lock = threading.Lock()
_builders = {}   # id(GraphLowering) -> (weakref to it, _Graph)
_by_code = {}    # wrapper code key -> finished map (no compile id)
_patched = []    # (object, attribute, original) for _unhook()
_on = [False]    # the hooks record (a module that imported a hook by
                 # name keeps it after _unhook; it then only passes on)


def available():
    """Whether this torch compiles (torch.compile exists: 2.x)."""
    torch = sys.modules.get("torch")
    return torch is not None and hasattr(torch, "compile")


def install(profile=True):
    """Hooks the map into inductor, each hook once its module is
    imported, and (profile) turns on inductor's CPU kernel profiling
    scopes, and registers compile spans. _modules.install calls it in a
    recorded process whose agent takes maps (_compile_run.available());
    inert on a torch without torch.compile. @return True when hooked."""
    if not available():
        return False
    from . import _importhook
    _on[0] = True
    if profile:
        _importhook.after_import("torch._inductor.config",
                                 _enable_kernel_profile)
    _importhook.after_import("torch._inductor.debug", _hook_provenance)
    _importhook.after_import("torch._inductor.graph", _hook_graph)
    _importhook.after_import("torch._inductor.codecache", _hook_code_load)
    _importhook.after_import("torch._dynamo.callback", _run.watch_compiles)
    return True


def emit(graph_map, mod=None, cached=False):
    """Hands one graph's finished map on: kept in `maps` (bounded;
    stats["dropped"] counts what did not fit) and sent to the agent as
    records of its own (_compile_run.send), still at compile time; the
    wrapper module `mod`'s call then runs as a region of that map. A
    module whose call runs as a region already (the same module loaded
    again from PyCodeCache's memory) has its map in the stream: nothing
    is sent twice."""
    with _lock:
        if len(maps) >= _MAPS_MAX:
            stats["dropped"] += 1
        else:
            maps.append(graph_map)
    if mod is not None and _run.wrapped(mod):
        return
    graph = _run.send(graph_map, cached)
    if mod is not None and graph:
        _run.wrap(mod, graph)


def compile_maps():
    """A copy of the list of emitted maps (tests, the later agent step)."""
    with _lock:
        return list(maps)


# --- building one graph's map ---------------------------------------------

class _Graph:
    """The map of one graph while inductor generates its code."""

    __slots__ = ("graph_id", "phase", "compile_id", "calls", "sites",
                 "bases", "profiled")

    def __init__(self, g):
        self.graph_id = getattr(g, "graph_id", None)
        if getattr(g, "is_backward", False):
            self.phase = "backward"
        elif getattr(g, "is_inference", False):
            self.phase = "inference"
        else:
            self.phase = "forward"
        self.compile_id = _compile_id()
        self.calls = []
        self.sites = {}    # kernel name -> [(call index, attribute())]
        self.bases = set()
        self.profiled = _profile_on()

    def add(self, name, kind, scope, device, site):
        call = {"kernel": name, "kind": kind, "scope": scope,
                "device": device, "owner": site["owner"],
                "fused": site["fused"], "mark": site["mark"],
                "phase": site["phase"], "recompute": site["recompute"]}
        self.sites.setdefault(name, []).append((len(self.calls), site))
        self.calls.append(call)

    def content(self, key):
        kernels = {}
        for name, sites in self.sites.items():
            ent = _rules.merge_sites([s for _, s in sites])
            first = self.calls[sites[0][0]]
            ent.update(kind=first["kind"], scope=first["scope"],
                       device=first["device"], calls=[i for i, _ in sites])
            kernels[name] = ent
        return {"graph_id": self.graph_id, "phase": self.phase, "code": key,
                "base": sorted(self.bases), "calls": self.calls,
                "kernels": kernels}


def _compile_id():
    try:
        from torch._guards import CompileContext
        cid = CompileContext.current_compile_id()
        return None if cid is None else str(cid)
    except Exception:
        return None


def _profile_on():
    try:
        cfg = sys.modules["torch._inductor.config"]
        return bool(cfg.cpp.enable_kernel_profile) and \
            sys.platform in ("linux", "win32")
    except Exception:
        return False


def _root_graph(g):
    # A subgraph (a cond/while body, a template's epilogue) is generated
    # into its parent's wrapper: its kernels are the parent's calls.
    for _ in range(64):
        parent = getattr(g, "parent", None)
        if parent is None or parent is g:
            break
        g = parent
    return g


def _builder(g, create):
    with _lock:
        ent = _builders.get(id(g))
        if ent is not None and ent[0]() is g:
            return ent[1]
        if not create:
            return None
        b = _Graph(g)
        key = id(g)
        try:
            ref = weakref.ref(g, lambda _r, k=key: _builders.pop(k, None))
        except TypeError:
            return None
        _builders[key] = (ref, b)
        return b


def _ir_nodes(node_schedule):
    """The IR nodes of a kernel's scheduler nodes (fused ones flattened;
    the reduction markers in a schedule have none)."""
    out = []
    for sn in node_schedule:
        subs = sn.get_nodes() if hasattr(sn, "get_nodes") else (sn,)
        for s in subs:
            ir = getattr(s, "node", None)
            if ir is not None:
                out.append(ir)
    return out


def _fx_node_lists(node_schedule, is_extern):
    """The FX nodes a kernel computes, as lists to try in order: an extern
    call's own node, when inductor knows it; the origins that are not mere
    views (views and reshapes folded into a kernel's indexing compute
    nothing of their module's); every origin. The first list in which some
    node has a module is the kernel's (a node a compiler pass made up has
    none, while the nodes it replaced still show where it came from)."""
    irs = [node_schedule] if is_extern else _ir_nodes(node_schedule)
    lists = []
    if is_extern:
        own = getattr(node_schedule, "origin_node", None)
        if own is not None:
            lists.append([own])
    origins = []
    seen = set()
    for ir in irs:
        for o in getattr(ir, "origins", ()) or ():
            if id(o) not in seen:
                seen.add(id(o))
                origins.append(o)
    compute = [o for o in origins if not _rules.is_view(o)]
    if compute:
        lists.append(compute)
    if len(compute) < len(origins):
        lists.append(origins)
    return lists


def _extern_scope(node):
    # The extern's op as the dispatcher's RecordFunction names it
    # ("aten::addmm"), which is what a profiler sees of the call.
    op = getattr(node, "op_overload", None)
    if op is None:
        own = getattr(node, "origin_node", None)
        op = getattr(own, "target", None)
    schema = getattr(op, "_schema", None)
    return getattr(schema, "name", None)


def _kernel_device(node_schedule):
    for ir in _ir_nodes(node_schedule):
        try:
            dev = ir.get_device()
        except Exception:
            continue
        if dev is not None:
            return getattr(dev, "type", str(dev))
    return None


def _on_kernel(node_schedule, kernel_name, is_extern):
    from torch._inductor.virtualized import V
    g = _root_graph(V.graph)
    b = _builder(g, True)
    if b is None or not isinstance(kernel_name, str):
        return
    backward = b.phase == "backward"
    site = None
    for nodes in _fx_node_lists(node_schedule, is_extern):
        entries = []
        for n in nodes:
            base, stack, phase = _rules.node_entry(getattr(n, "meta", {}),
                                                   backward)
            if base is not None:
                b.bases.add(base)
            entries.append((stack, phase))
        got = _rules.attribute(entries)
        if site is None or got["mark"] != "unowned":
            site = got
        if got["mark"] != "unowned":
            break
    if site is None:  # no FX node at all
        site = _rules.attribute(
            [(None, "backward" if backward else "forward")])
    if is_extern:
        kind, device, scope = "extern", None, _extern_scope(node_schedule)
    else:
        kind, device = "kernel", _kernel_device(node_schedule)
        if device not in (None, "cpu"):
            scope = kernel_name  # a GPU kernel: the name CUPTI reports
        elif b.profiled:
            scope = kernel_name if b.graph_id is None else \
                "graph_%s_%s" % (b.graph_id, kernel_name)
        else:
            scope = None  # no profiling scope was generated
    b.add(kernel_name, kind, scope, device, site)


def _finish(b, key, path, mod=None):
    """Ends a graph's map: counted, kept by code key, written beside the
    wrapper module, emitted."""
    content = b.content(key)
    with _lock:
        stats["graphs"] += 1
        for c in content["calls"]:
            stats["calls"] += 1
            stats["externs" if c["kind"] == "extern" else "kernels"] += 1
            if c["mark"] == "fused":
                stats["fused"] += 1
            elif c["mark"] == "unowned":
                stats["unowned"] += 1
        if key is not None:
            if len(_by_code) >= _BY_CODE_MAX:
                _by_code.pop(next(iter(_by_code)))
            _by_code[key] = content
    if path:
        _write_sidecar(path, content)
    emit(dict(content, compile_id=b.compile_id), mod)


def _sidecar(path):
    return os.path.splitext(path)[0] + _SIDECAR


def _write_sidecar(path, content):
    try:
        side = _sidecar(path)
        tmp = "%s.%d.tmp" % (side, os.getpid())
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(content, f)
        os.replace(tmp, side)
    except Exception:
        stats["disk_errors"] += 1


def _read_sidecar(path):
    side = _sidecar(path)
    if not os.path.exists(side):
        return None
    try:
        with open(side, encoding="utf-8") as f:
            content = json.load(f)
        if isinstance(content, dict) and isinstance(
                content.get("calls"), list):
            return content
    except Exception:
        pass
    stats["disk_errors"] += 1
    return None


def _code_key(path):
    return os.path.splitext(os.path.basename(path))[0] if path else None


def _on_graph_done(g, mod):
    path = getattr(mod, "__file__", None)
    # A graph without kernel or extern calls (views only) has a map too,
    # so that a cache hit on it is not counted as unmapped.
    b = _builder(g, False) or _Graph(g)
    with _lock:
        _builders.pop(id(g), None)
    _finish(b, _code_key(path), path, mod)


def _on_code_loaded(key, path, wrapper, mod=None):
    # Inside a graph's code generation this is one of its kernels' modules
    # or its own wrapper (compile_to_module ends that map); outside one it
    # is a wrapper taken from inductor's cache, or some other module.
    from torch._inductor.virtualized import V
    try:
        g = V.graph
    except Exception:
        g = None
    if g is not None and type(g).__name__ != "NullHandler":
        return
    code = _code_key(path) if isinstance(path, str) else None
    if code is None:
        return
    with _lock:
        content = _by_code.get(code)
    if content is None:
        content = _read_sidecar(path)
        if content is None:
            if wrapper:  # made before this package was loaded
                stats["unmapped"] += 1
            return
    stats["cache_hits"] += 1
    emit(dict(content, compile_id=_compile_id()), mod, cached=True)


# --- the hooks -------------------------------------------------------------

def _patch(obj, attr, new):
    old = obj.__dict__[attr] if isinstance(obj, type) else getattr(obj, attr)
    setattr(obj, attr, new)
    _patched.append((obj, attr, old))
    return old


def _hook_provenance():
    try:
        debug = sys.modules["torch._inductor.debug"]
        orig = debug.set_kernel_post_grad_provenance_tracing
    except (KeyError, AttributeError):
        stats["unhooked"] += 1  # an older inductor: no map (torch.md)
        return
    if getattr(orig, "_gradtrace", False):
        return

    def set_kernel_post_grad_provenance_tracing(node_schedule, kernel_name,
                                                *args, **kwargs):
        if _on[0]:
            try:
                is_extern = kwargs.get("is_extern",
                                       args[0] if args else False)
                _on_kernel(node_schedule, kernel_name, bool(is_extern))
            except Exception:
                stats["failures"] += 1
        return orig(node_schedule, kernel_name, *args, **kwargs)

    set_kernel_post_grad_provenance_tracing._gradtrace = True
    _patch(debug, "set_kernel_post_grad_provenance_tracing",
           set_kernel_post_grad_provenance_tracing)
    # Modules that imported the function by name before it was wrapped
    # (codegen/cpp.py and codegen/triton.py do at their top).
    for name, mod in list(sys.modules.items()):
        if name.startswith("torch._inductor.") and mod is not debug and \
                getattr(mod, "set_kernel_post_grad_provenance_tracing",
                        None) is orig:
            _patch(mod, "set_kernel_post_grad_provenance_tracing",
                   set_kernel_post_grad_provenance_tracing)


def _hook_graph():
    try:
        cls = sys.modules["torch._inductor.graph"].GraphLowering
        orig = cls.__dict__["compile_to_module"]
    except (KeyError, AttributeError):
        stats["unhooked"] += 1
        return
    if getattr(orig, "_gradtrace", False):
        return

    def compile_to_module(self, *args, **kwargs):
        mod = orig(self, *args, **kwargs)
        if _on[0]:
            try:
                _on_graph_done(self, mod)
            except Exception:
                stats["failures"] += 1
        return mod

    compile_to_module._gradtrace = True
    compile_to_module.__doc__ = orig.__doc__
    _patch(cls, "compile_to_module", compile_to_module)


def _hook_code_load():
    try:
        cls = sys.modules["torch._inductor.codecache"].PyCodeCache
        orig = cls.__dict__["load_by_key_path"]
        func = orig.__func__
    except (KeyError, AttributeError):
        stats["unhooked"] += 1
        return
    if getattr(func, "_gradtrace", False):
        return

    def load_by_key_path(klass, key, path, *args, **kwargs):
        mod = func(klass, key, path, *args, **kwargs)
        if _on[0]:
            try:
                # A wrapper module is loaded with its line map and
                # constants; kernel modules are not.
                _on_code_loaded(key, path, len(args) >= 2 or
                                kwargs.get("attrs") is not None, mod)
            except Exception:
                stats["failures"] += 1
        return mod

    load_by_key_path._gradtrace = True
    _patch(cls, "load_by_key_path", classmethod(load_by_key_path))


def _enable_kernel_profile():
    # The user's own setting wins; otherwise each generated CPU kernel
    # runs in a RecordFunction scope of its name. This changes the
    # generated C++ (one scope object per kernel) and so inductor's cache
    # key, not which kernels there are or what they compute.
    if _PROFILE_ENV in os.environ:
        return
    try:
        sys.modules["torch._inductor.config"].cpp.enable_kernel_profile = True
    except Exception:
        stats["failures"] += 1


def _hook_now():
    """Puts in every hook whose torch module is already imported (tests;
    install() does it at import time)."""
    _on[0] = True
    if "torch._inductor.debug" in sys.modules:
        _hook_provenance()
    if "torch._inductor.graph" in sys.modules:
        _hook_graph()
    if "torch._inductor.codecache" in sys.modules:
        _hook_code_load()


def _unhook():
    """Takes every hook out again (tests compare compiles without them)."""
    _on[0] = False
    while _patched:
        obj, attr, old = _patched.pop()
        setattr(obj, attr, old)
    with _lock:
        _builders.clear()
