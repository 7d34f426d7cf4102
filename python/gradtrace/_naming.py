"""Layer names: which module is which layer, and the registry of mapped
roots the scope hooks read (schema/torch.md, "Naming", "Wrappers" and
"Parameters", gives the rules; tests/python/test_naming.py holds them).

No torch hook and no agent call on the step's path here: a root is mapped
once (and again when a module shows up that its map does not know), and
every other forward call is one probe of _known or of its root's map.
Importable without the agent (ids are then 0), so the rules are unit
tested on their own.
"""

import os
import threading
import weakref

import torch

from . import _agent
from . import _rank

_intern = _agent.intern
_param = _agent.torch_param

# Process-wide registry. An entry of a mapped module is the tuple
# (weakref to module, path, path_id, class_id, map of its root, _Root,
# whether its calls open a scope: False for the half of a wrapper pair
# that stays silent).
# _known: id(module) -> entry of the root that first mapped it; each
# root's map: id(module) -> entry, for lookups inside that root's forward.
# Keyed by id with a weakref check rather than a WeakKeyDictionary: a
# lookup is then one dict probe and one call.
_known = {}
_roots = {}      # id(root module) -> _Root of every live root
_taken = {}      # name in use -> _Root using it (root names and paths)
_params = {}     # id(parameter) -> (weakref to it, _Root that registered it)
_map_lock = threading.RLock()

# Names mapped so far, kept only for GRADTRACE_SEEN_LAYERS_DIR.
_seen_dir = os.environ.get("GRADTRACE_SEEN_LAYERS_DIR") or None
_seen = set()
_SEEN_MAX = 100000


def _write_seen():
    try:
        path = os.path.join(_seen_dir, "%d.layers" % os.getpid())
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            for n in sorted(_seen):
                f.write(n.replace("\n", " ") + "\n")
        os.replace(path + ".tmp", path)
    except Exception:
        pass


def _note_seen(names):
    if len(_seen) < _SEEN_MAX:
        _seen.update(names)


class _Root:
    """One root module: its name prefix ("" for the bare root), map and
    the names it holds."""

    __slots__ = ("ref", "prefix", "bare", "map", "names", "ids", "sent")

    def __init__(self, module, prefix, bare):
        self.ref = weakref.ref(module, self._died)
        self.prefix = prefix
        self.bare = bare
        self.map = {}
        self.names = set()
        self.ids = set()
        self.sent = set()  # (name id, class id, flags) told to the agent

    def _died(self, _ref):
        try:
            with _map_lock:
                _drop_root(self)
        except Exception:  # at interpreter exit, module globals may be gone
            pass


def _drop_root(r):
    for k in [k for k, v in _roots.items() if v is r]:
        del _roots[k]
    for n in r.names:
        if _taken.get(n) is r:
            del _taken[n]
    for i in r.ids:
        ent = _known.get(i)
        if ent is not None and ent[5] is r:
            del _known[i]
    r.names, r.ids = set(), set()


def _live(r):
    """Whether r is still a root (not collected, not taken over)."""
    m = r.ref()
    return m is not None and _roots.get(id(m)) is r


def _forget_param(key, impl):
    _params.pop(key, None)
    if _param is not None:
        _param(impl, 0, 0)


def _register_one(p, r, path_id, pname):
    """Maps parameter p to layer path_id as pname, for root r, until p is
    collected (then the agent forgets it too)."""
    impl = p._cdata
    _params[id(p)] = (weakref.ref(
        p, lambda _r, k=id(p), a=impl: _forget_param(k, a)), r)
    _param(impl, path_id, _intern(pname))


def _register_params(r, module, named):
    # named_parameters() order: modules in named_modules() order, each
    # one's own parameters, a shared parameter once (its first holder).
    if _param is None:
        return
    seen = set()
    for mod, ent in named:
        for pname, p in mod._parameters.items():
            if p is None or id(p) in seen:
                continue
            seen.add(id(p))
            old = _params.get(id(p))
            if old is not None and old[0]() is p and \
                    (old[1] is r or _live(old[1])):
                continue  # first registration wins (another live root's)
            _register_one(p, r, ent[2], pname)


def register_param(module, pname, p):
    """Registers parameter p as module's pname (a parameter a wrapper
    swaps in at run time: FSDP2's unsharded ones, _fsdp.py), under the
    module's layer name. @return False when module has no name yet."""
    if _param is None:
        return False
    ent = _known.get(id(module))
    if ent is None or ent[0]() is not module:
        return False
    with _map_lock:
        old = _params.get(id(p))
        if old is not None and old[0]() is p:
            return True
        _register_one(p, ent[5], ent[2], pname)
    return True


# Wrapper class name -> the attribute holding the wrapped module, and
# whether the wrapper's own call is the scope (else the wrapped module's).
_WRAPPERS = {
    "DistributedDataParallel": ("module", False),
    "DataParallel": ("module", False),
    "FullyShardedDataParallel": ("_fsdp_wrapped_module", False),
    "CheckpointWrapper": ("_checkpoint_wrapped_module", False),
    "OffloadWrapper": ("_checkpoint_wrapped_module", False),
    "OptimizedModule": ("_orig_mod", True),
}


def _wrapper(mod):
    """(attribute, wrapper is the scope) when mod wraps a module, else None."""
    for cls in type(mod).__mro__:
        w = _WRAPPERS.get(cls.__name__)
        if w is not None:
            return w if isinstance(mod._modules.get(w[0]),
                                   torch.nn.Module) else None
    return None


def _unwrap(mod):
    """The module mod wraps, through any number of wrappers."""
    seen = 0
    w = _wrapper(mod)
    while w is not None and seen < 16:
        mod = mod._modules[w[0]]
        w = _wrapper(mod)
        seen += 1
    return mod


def _user_paths(module):
    """named_modules() without wrapper segments: a list of
    (path, module, class name, opens a scope)."""
    out = []
    by_path = {}   # named_modules() path -> (user path, module)
    silent = set()  # ids of modules whose calls open no scope
    for path, mod in module.named_modules():
        user = path
        if path:
            parent, _, seg = path.rpartition(".")
            pu, pm = by_path.get(parent, (parent, None))
            w = _wrapper(pm) if pm is not None else None
            if w is not None and w[0] == seg:
                user = pu
                silent.add(id(mod) if w[1] else id(pm))
            else:
                user = pu + "." + seg if pu else seg
        by_path[path] = (user, mod)
        out.append([user, mod, type(_unwrap(mod)).__name__])
    for e in out:
        e.append(id(e[1]) not in silent)
    return out


def _unique(name):
    if name not in _taken:
        return name
    k = 2
    while "%s#%d" % (name, k) in _taken:
        k += 1
    return "%s#%d" % (name, k)


def _fill(r, module):
    """(Re)builds r's map and registry entries from module.named_modules()."""
    cls = type(_unwrap(module)).__name__
    m = {}
    named = []
    names = []
    for path, mod, mcls, opens in _user_paths(module):
        if r.bare:
            name = path or cls
        else:
            name = r.prefix + "." + path if path else r.prefix
        ent = (weakref.ref(mod), name, _intern(name), _intern(mcls), m, r,
               opens)
        m[id(mod)] = ent
        named.append((mod, ent))
        names.append(name)
        old = _known.get(id(mod))
        if old is None or old[5] is r or old[0]() is not mod or \
                old[5].ref() is None:
            _known[id(mod)] = ent
            r.ids.add(id(mod))
    # Keep what earlier lookups added (modules of other roots, modules
    # registered under none) while they live, so that two of them never
    # make each other rebuild the map on every call.
    for k, ent in r.map.items():
        if k not in m and ent[0]() is not None:
            m[k] = ent
    if _seen_dir is not None:
        _note_seen(names)
    for n in names:
        _taken.setdefault(n, r)
    r.names.update(names)
    r.map = m
    try:
        _register_params(r, module, named)
    except Exception:  # names still work without parameter attribution
        pass
    _tell_names(r, module, named)
    return m


def _tell_names(r, module, named):
    """Each name of r's map and its class, once, to the agent
    (gt_layer_info): a compiled region's layers open no scope, so this is
    where the converter gets their classes, and which root is bare."""
    info = _agent.layer_info
    if info is None:
        return
    try:
        top = r.map[id(module)][1]  # the root's own name (wrappers share it)
        for mod, ent in named:
            flags = 0
            if r.bare and ent[1] == top:
                flags = _agent.LAYER_F_BARE_ROOT
            elif r.bare and "." not in ent[1]:
                flags = _agent.LAYER_F_ROOT_CHILD  # rows nest under the root
            key = (ent[2], ent[3], flags)
            if key not in r.sent:
                r.sent.add(key)
                info(*key)
    except Exception:  # names work without it
        pass


def _new_root(module):
    """Maps a module that starts a forward with nothing open and that no
    known root contains. @return its registry entry."""
    with _map_lock:
        ent = _known.get(id(module))
        if ent is not None and ent[0]() is module:
            return ent  # another thread mapped it meanwhile
        bare = not any(r.bare for r in _roots.values())
        # Earlier roots inside this one are taken over by it.
        for sub in module.modules():
            old = _roots.get(id(sub))
            if old is not None and old.ref() is sub:
                bare = bare or old.bare
                _drop_root(old)
        cls = type(_unwrap(module)).__name__
        if bare and any(e[0] and e[0] in _taken for e in _user_paths(module)):
            bare = False  # a bare path would collide with another root
        prefix = "" if bare else _unique(cls)
        r = _Root(module, prefix, bare)
        if prefix:
            _taken[prefix] = r
            r.names.add(prefix)
        _roots[id(module)] = r
        _rank.check()
        return _fill(r, module)[id(module)]


def _lookup(t, module, parent_path):
    # Unknown in the running root's map: the model may have changed since
    # the map was built.
    root_ent = t.root_map.get(id(t.stack[0]))
    r = root_ent[5] if root_ent is not None else None
    root = r.ref() if r is not None else None
    with _map_lock:
        if root is not None:
            t.root_map = _fill(r, root)
    ent = t.root_map.get(id(module))
    if ent is not None and ent[0]() is module:
        return ent
    ent = _known.get(id(module))
    if ent is not None and ent[0]() is module:
        # Another root's module, called from this one: cached here so the
        # next call does not rebuild the map.
        t.root_map[id(module)] = ent
        return ent
    name = parent_path + "." + type(module).__name__
    if _seen_dir is not None:
        _note_seen((name,))
    ent = (weakref.ref(module), name, _intern(name),
           _intern(type(module).__name__), t.root_map, r, True)
    t.root_map[id(module)] = ent
    return ent
