"""The attribution rules of the compile-time map (schema/torch.md,
"Compiled models: the compile-time map"): which module and phase an FX
node of a compiled graph belongs to, and which module owns a kernel made
of several of them. Pure functions of node metadata (they read no
torch API), so the rules are unit tested with made-up metadata on any
torch (tests/python/test_compile_map.py); _compile.py feeds them the
nodes inductor reports for each kernel it generates.

A node's module comes from the metadata torch itself keeps:
  - forward nodes (and forward nodes recomputed in a backward graph)
    carry meta["nn_module_stack"], the modules whose forwards were on the
    call stack when dynamo traced the op, outermost first;
  - backward nodes carry AOTAutograd's copy of their forward node's stack,
    meta["fwd_nn_module_stack"] (None when the forward op ran in the
    compiled frame itself, outside every submodule);
  - a node with neither but with an autograd sequence number ("seq_nr")
    was traced from user code in the compiled frame itself: it belongs to
    the frame's module (the path "", the layer open around the call);
  - anything else (nodes a compiler pass made up) has no module.
"""

import re

from ._naming import _WRAPPERS  # wrapper segments are in no user path

# Ops that compute nothing (index arithmetic in the consumer's loop):
# they do not make a kernel "fused" with their module. OpOverload.is_view
# covers the aliasing views; these are the ones it misses.
_VIEW_OPS = frozenset((
    "view", "_unsafe_view", "reshape", "permute", "t", "transpose",
    "expand", "squeeze", "unsqueeze", "alias", "detach", "getitem",
    "slice", "select", "as_strided", "split", "split_with_sizes",
    "unbind", "chunk", "narrow", "view_as",
))

_GETATTR = re.compile(r"""getattr\(([^()]*?),\s*['"]([^'"]+)['"]\)""")
_BASE = re.compile(r"""^\s*(?:[LG]\[['"]([^'"]+)['"]\]|([A-Za-z_]\w*))""")
_SEG = re.compile(r"""\._modules\[['"]([^'"]+)['"]\]|\[['"]([^'"]+)['"]\]"""
                  r"""|\[(\d+)\]|\.(\w+)""")


def parse_path(source):
    """A module path as dynamo writes it ("L['self'].blocks.0.up",
    "L['self']._modules['blocks']._modules['0']", "getattr(L['self'].
    blocks, '0')", "self.blocks[0]") as (base, [segments]): base is the
    frame-local or global name that holds the module ("self" for a
    module's own forward). @return None when it is not such a path."""
    if not isinstance(source, str):
        return None
    s = source
    for _ in range(32):  # getattr(getattr(x, 'a'), 'b') -> x.a.b
        t = _GETATTR.sub(r"\1.\2", s)
        if t == s:
            break
        s = t
    m = _BASE.match(s)
    if m is None:
        return None
    base = m.group(1) or m.group(2)
    segs = []
    pos = m.end()
    while pos < len(s):
        t = _SEG.match(s, pos)
        if t is None:
            return None
        segs.append(next(g for g in t.groups() if g is not None))
        pos = t.end()
    return base, segs


def _class_names(cls):
    if isinstance(cls, str):
        return (cls.rpartition(".")[2],)
    try:
        return tuple(c.__name__ for c in cls.__mro__)
    except Exception:
        return (getattr(cls, "__name__", ""),)


def user_stack(stack):
    """An nn_module_stack (an ordered mapping of key -> (path, class),
    outermost first) as (base, tuple of user paths): named_modules() paths
    relative to the module held by base, wrapper segments removed, and a
    wrapper and the module it wraps one entry. @return None when the
    stack is not one (then the node counts as having no module)."""
    try:
        entries = list(stack.values())
    except AttributeError:
        return None
    base = None
    drops = []      # (segments of a wrapper, its wrapped attribute)
    out = []
    for ent in entries:
        try:
            source, cls = ent[0], ent[1]
        except (TypeError, IndexError):
            return None
        parsed = parse_path(source)
        if parsed is None:
            return None
        b, segs = parsed
        if base is None:
            base = b
        elif b != base:
            return None  # one stack never spans two frames' locals
        user = segs
        for wsegs, attr in drops:
            n = len(wsegs)
            if segs[:n] == wsegs and len(segs) > n and segs[n] == attr:
                user = user[:n] + user[n + 1:]
        for name in _class_names(cls):
            w = _WRAPPERS.get(name)
            if w is not None:
                drops.append((segs, w[0]))
                break
        path = ".".join(user)
        if not out or out[-1] != path:
            out.append(path)
    return base, tuple(out)


def is_view(node):
    """Whether an FX node only re-indexes its input (no compute)."""
    target = getattr(node, "target", None)
    try:
        if getattr(target, "is_view", False):
            return True
    except Exception:
        pass
    name = getattr(target, "__name__", None) or str(target)
    name = name.rpartition(".")[2] if "::" not in name else \
        name.rpartition("::")[2]
    return name.split(".")[0] in _VIEW_OPS


def node_entry(meta, backward_graph):
    """(base, stack, phase) of an FX node from its meta: stack a tuple of
    user paths (outermost first; () is the compiled frame's own module),
    None when the node has no module; phase "forward" for every node of a
    forward graph, and in a backward graph "backward", or "recompute" for
    a forward op run again there (the partitioner's recompute, activation
    checkpointing). A backward op the partitioner moved into the forward
    graph (a mask saved instead of an activation) runs in the forward but
    keeps the module of its forward op."""
    tag = meta.get("partitioner_tag")
    # Without the partitioner's tag (older 2.x), AOTAutograd itself told
    # them apart by nn_module_stack: forward nodes have one.
    bwd_node = tag == "is_backward" or (tag is None and (
        "fwd_nn_module_stack" in meta or
        (backward_graph and "nn_module_stack" not in meta)))
    if not backward_graph:
        phase = "forward"
    else:
        phase = "backward" if bwd_node else "recompute"
    if bwd_node:
        if "fwd_nn_module_stack" in meta:
            stack = meta["fwd_nn_module_stack"]
            if not stack:  # its forward op ran in the frame itself
                return None, (), phase
            u = user_stack(stack)
            return (u[0], u[1], phase) if u is not None else \
                (None, None, phase)
        return None, None, phase
    stack = meta.get("nn_module_stack")
    if stack:
        u = user_stack(stack)
        return (u[0], u[1], phase) if u is not None else (None, None, phase)
    if meta.get("seq_nr") is not None:
        return None, (), phase
    return None, None, phase


def _common_prefix(stacks):
    first = stacks[0]
    n = len(first)
    for s in stacks[1:]:
        n = min(n, len(s))
        for i in range(n):
            if s[i] != first[i]:
                n = i
                break
    return first[:n]


def attribute(entries):
    """The owner of a kernel made of nodes with these (stack, phase)
    entries: @return a dict {"owner": deepest common ancestor's path, or
    None when no node has a module; "fused": the sorted modules it holds
    when more than one, else []; "mark": "module" | "fused" | "unowned";
    "phase": "backward" when any node is a backward one, "recompute" when
    all are recomputed, else "forward"; "recompute": a backward kernel
    that also recomputes forward ops; "stack": the common call stack}.
    The common ancestor is taken on call stacks, not on path prefixes, so
    blocks.0 and blocks.1 of a ModuleList that no forward calls meet at
    the module whose forward called them."""
    known = [e for e in entries if e[0] is not None]
    phases = {p for _, p in (known or entries)}
    if "backward" in phases:
        phase = "backward"
    elif "recompute" in phases:
        phase = "recompute"
    else:
        phase = "forward"
    out = {"owner": None, "fused": [], "mark": "unowned", "phase": phase,
           "recompute": phase == "backward" and "recompute" in phases,
           "stack": None}
    if not known:
        return out
    stacks = [s for s, _ in known]
    prefix = _common_prefix(stacks)
    mods = sorted({s[-1] if s else "" for s in stacks})
    out["owner"] = prefix[-1] if prefix else ""
    out["stack"] = prefix
    if len(mods) > 1:
        out["fused"] = mods
        out["mark"] = "fused"
    else:
        out["mark"] = "module"
    return out


def merge_sites(sites):
    """Name-level entry of a kernel called at several sites of one graph
    (inductor emits identical code once and calls it from each site):
    the sites' common ancestor, their modules, and the mark "shared" when
    each site is one module but not the same one. sites: attribute()
    results. @return a dict like attribute()'s, without "stack"."""
    if len(sites) == 1:
        one = dict(sites[0])
        one.pop("stack", None)
        return one
    owned = [s for s in sites if s["stack"] is not None]
    phases = {s["phase"] for s in sites}
    out = {"owner": None, "fused": [], "mark": "unowned",
           "phase": "backward" if "backward" in phases else
           ("recompute" if "recompute" in phases else "forward"),
           "recompute": any(s["recompute"] for s in sites)}
    if not owned:
        return out
    prefix = _common_prefix([s["stack"] for s in owned])
    mods = set()
    for s in owned:
        mods.update(s["fused"] or [s["owner"]])
    out["owner"] = prefix[-1] if prefix else ""
    if len(mods) > 1:
        out["fused"] = sorted(mods)
        fused = any(s["mark"] == "fused" for s in owned)
        out["mark"] = "fused" if fused else "shared"
    else:
        out["mark"] = "module"
    return out
