"""nn.Module forward scopes, parameter registration and optimizer step marks,
reported to the agent.

Naming. Every module a root maps is named by its named_modules() path,
and that name does not depend on what runs around it:

  - a root is a module whose forward starts with no module open on the
    thread and that no known root contains (as named_modules() sees it);
  - the first root seen (the model, normally) keeps bare named_modules()
    paths ("blocks.3.up") and is itself named by its class ("Net"), so
    triggers name layers as users see them in their model;
  - every later distinct root gets a unique prefix: its class name, or
    "<Class>#2", "#3"... when that name is taken (by another root, or as a
    path of one), and its modules are "<prefix>.<path>": a GAN's generator
    and discriminator, both nn.Sequential, are "Sequential", "0", "1"...
    and "Sequential#2", "Sequential#2.0"...;
  - a module that runs with no module open on the thread but is known from
    a root's map (a block recomputed inside the backward by reentrant or
    non-reentrant checkpointing, a block called on its own) keeps that
    full path ("blocks.3.up"), and its children theirs;
  - a new root that contains an earlier root takes it over (the earlier
    root's modules get the new root's paths; a bare root passes its bare
    status on);
  - a root's name is released when the root is garbage-collected, so a
    loss module created anew every step keeps one name; while roots are
    alive, names are stable. The bare status goes to the next new root
    when the bare root dies;
  - a module of another root called from inside this root's forward keeps
    its name in that root; a module not registered under any root (kept
    in a plain list, built on the fly) is named "<enclosing path>.<Class>";
    a module registered twice (shared) has its first named_modules() path.

Wrappers. A wrapper's segment is not part of any path, so names (and
triggers) are the user's whatever wraps the model: DistributedDataParallel
and DataParallel (`module`), FSDP (`_fsdp_wrapped_module`),
checkpoint_wrapper and offload_wrapper (`_checkpoint_wrapped_module`) and
torch.compile's OptimizedModule (`_orig_mod`). A wrapper is recognised by
its class (or a base class) holding the wrapped module under that
attribute, and takes the name of what it wraps: DDP(model) and model are
both "Net", DDP's "module.blocks.3" is "blocks.3". Of a wrapper and its
wrapped module only one opens a scope, so a layer never nests in itself:
the wrapped module for DDP, FSDP and checkpoint wrappers (it is what
checkpointing recomputes), the OptimizedModule for torch.compile (the
modules inside a compiled graph run no hooks).

Parameters. Each parameter of each mapped root is registered with the
agent (gt_torch_param: its TensorImpl address, param._cdata, the owning
module's path id and the parameter's name id), so the AccumulateGrad node
of its gradient is attributed. A parameter shared by several modules
belongs to the module that owns it in named_parameters() (the first
named_modules() path holding it; across roots, the first root that
registered it). A parameter is forgotten when it is garbage-collected.

Cost. Paths and the agent's string ids are computed once per root (and
again when a module shows up that the cached map does not know, in case
the model changed), so a forward call costs a dict lookup, a weakref call
and the agent's gt_module_begin on entry, gt_module_end on exit. The
common case runs in C (the _gthooks extension built from _hooks.c, which
hands every other case to the Python hooks here, so behaviour is theirs);
where it cannot load (not built for this interpreter, or
GRADTRACE_C_HOOKS=0) the Python hooks run, calling the agent through
ctypes. The hooks reach torch through our own nn.Module.__call__ (a
Python function that torch.compile traces as torch's own, run in C by
_gthooks: "How the hooks reach torch" below), which keeps torch's no-hooks fast path (torch's
global-hook path costs more than the hooks), and only while the agent
wants module scopes
(capturing or a trigger armed), switched at optimizer steps: see "Idle =
free" below and schema/torch.md, which has the figures (per module call:
ours, and torch's own hook path) from tests/bench/bench_torch.py.

Steps. Iterations are training steps (schema/control.md): creating an
optimizer calls gt_step_expect (Optimizer.__init__ is wrapped), and the
first optimizer to reach a step count no optimizer had ends the step
(gt_step); an AMP GradScaler.step that skips the optimizer step (the
gradients overflowed) ends it too. The agent numbers the steps from 0.

Rank. Without RANK in the environment (torch.multiprocessing.spawn), the
rank comes from torch.distributed once its default process group exists:
checked when a new root is mapped and after each optimizer step until it
is known, then passed to the agent (gt_set_rank).

Layers seen. When GRADTRACE_SEEN_LAYERS_DIR names a directory (`gradtrace
record --trigger` sets it), every module name this process mapped is
written at exit into <dir>/<pid>.layers, one per line, so that record can
say which paths ran when a trigger's layer matched none of them.

Each thread keeps its own stack of open calls, so models run from several
Python threads get their own layers (the agent's layer stack is per thread
too). A module called twice in one forward opens two scopes. When a forward
raises, the __call__ wrapper still calls the post-hook (and torch 2.x's
global hooks do with always_call=True, GRADTRACE_MODULE_HOOKS=global);
1.13's global hooks do not, so every post-hook closes any inner scopes
left open by an exception caught inside the forward, and a pre-hook for
a module that is already open closes that stale call first (a module
instance calling itself recursively is far rarer than a forward that
raised).

The hooks never return anything (so they cannot change inputs or outputs)
and never raise into the model.
"""

import ctypes
import importlib
import os
import sys
import threading
import time
import warnings
import weakref

import torch

from . import _agent
from . import _callform

_lib = _agent.lib
# gt_module_begin without argtypes: ctypes then passes the (small, positive)
# ids as C ints, which costs half as much per call as declared uint32s.
_begin = ctypes.CDLL(None).gt_module_begin
_begin.restype = None
_end = _lib["gt_module_end"]
_step = _lib["gt_step"]
_intern = _agent.intern

_installed = False
_install_lock = threading.Lock()


class _Thread(threading.local):
    def __init__(self):
        self.stack = []       # modules with an open forward, outermost first
        self.ents = []        # their registry entries
        self.root_map = None  # the map of the root stack[0] belongs to


_tls = _Thread()

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

    __slots__ = ("ref", "prefix", "bare", "map", "names", "ids")

    def __init__(self, module, prefix, bare):
        self.ref = weakref.ref(module, self._died)
        self.prefix = prefix
        self.bare = bare
        self.map = {}
        self.names = set()
        self.ids = set()

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
            impl = p._cdata
            _params[id(p)] = (weakref.ref(
                p, lambda _r, k=id(p), a=impl: _forget_param(k, a)), r)
            _param(impl, ent[2], _intern(pname))


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
    return m


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
        if _rank_unknown:
            _check_rank()
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


def _close_stale(t, module):
    # `module` is already open on this thread: an earlier call of it raised
    # (torch 1.13 skips post-hooks then). Close that call and what it left
    # open above it.
    stack = t.stack
    while stack:
        if t.ents.pop()[6]:
            _end()
        if stack.pop() is module:
            break


def _pre_hook(module, args):
    try:
        t = _tls
        stack = t.stack
        if stack:
            if module in stack:
                _close_stale(t, module)
        if stack:
            ent = t.root_map.get(id(module))
            if ent is None or ent[0]() is not module:
                ent = _lookup(t, module, t.ents[-1][1])
        else:
            ent = _known.get(id(module))
            if ent is None or ent[0]() is not module:
                ent = _new_root(module)
            t.root_map = ent[4]
        stack.append(module)
        t.ents.append(ent)
        if ent[6]:
            _begin(ent[2], ent[3])
    except Exception:
        pass
    return None


def _post_hook(module, args, output):
    try:
        t = _tls
        stack = t.stack
        if stack and stack[-1] is module:
            stack.pop()
            if t.ents.pop()[6]:
                _end()
        elif module in stack:
            # Inner calls an exception (caught inside this forward) left
            # open: close them and this call.
            while stack:
                if t.ents.pop()[6]:
                    _end()
                if stack.pop() is module:
                    break
    except Exception:
        pass
    return None


def _load_c_hooks():
    """(pre, post) of the C extension (_hooks.c), which does what
    _pre_hook/_post_hook do in their common case and calls them for
    everything else; (_pre_hook, _post_hook) where it cannot load (not
    built for this interpreter, GRADTRACE_C_HOOKS=0)."""
    if os.environ.get("GRADTRACE_C_HOOKS", "1") == "0":
        return _pre_hook, _post_hook
    try:
        from . import _gthooks
        addr = ctypes.cast(_begin, ctypes.c_void_p).value
        end = ctypes.cast(_end, ctypes.c_void_p).value
        _gthooks.setup(addr, end, _tls, _known, _pre_hook, _post_hook)
        return _gthooks.pre_hook, _gthooks.post_hook
    except Exception:
        return _pre_hook, _post_hook


_fast_pre, _fast_post = _load_c_hooks()
_gthooks = sys.modules.get(__package__ + "._gthooks") \
    if _fast_pre is not _pre_hook else None


def _compiling_pre_hook(module, args):
    if not _is_compiling():
        _fast_pre(module, args)


def _compiling_post_hook(module, args, output):
    if not _is_compiling():
        _fast_post(module, args, output)


_is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None)


# Whether the rank is still to be learnt from torch.distributed.
_rank_unknown = (_agent.set_rank is not None and
                 os.environ.get("RANK", "") == "")


def _check_rank():
    global _rank_unknown
    try:
        dist = sys.modules.get("torch.distributed")
        if dist is None or not dist.is_available() or \
                not dist.is_initialized():
            return
        rank, world = dist.get_rank(), dist.get_world_size()
    except Exception:
        return
    _rank_unknown = False
    if rank >= 0:
        _agent.set_rank(rank, world)


# id(optimizer) -> [weakref to it, steps it took]: one dict probe per step
# (a WeakKeyDictionary makes a weakref on every lookup). The weakref's
# callback drops the entry when the optimizer dies, before its id can be
# reused; the identity check covers the rest.
_steps = {}
_step_max = [0]


def _steps_of(optimizer):
    e = _steps.get(id(optimizer))
    return e[1] if e is not None and e[0]() is optimizer else 0


def _forget_steps(key):
    _steps.pop(key, None)


def _count_step(optimizer):
    # A training step ends when some optimizer reaches a step count no
    # optimizer had: one boundary per round when several optimizers step
    # once each (a GAN's D and G), at the first of them. The agent numbers
    # the steps itself (from 0, as triggers' iteration=N counts them).
    k = id(optimizer)
    e = _steps.get(k)
    if e is None or e[0]() is not optimizer:
        e = _steps[k] = [weakref.ref(
            optimizer, lambda _r, k=k: _forget_steps(k)), 0]
    e[1] += 1
    n = e[1]
    if n > _step_max[0]:
        _step_max[0] = n
        _step(n - 1)
    if _rank_unknown:
        _check_rank()


def _expect_steps():
    # An optimizer exists: iterations are its steps from the first
    # backward on, however many backward passes a step holds.
    if _agent.step_expect is not None:
        _agent.step_expect()


def _hook_optimizer_init(optim):
    original = optim.Optimizer.__init__

    def __init__(self, *args, **kwargs):
        original(self, *args, **kwargs)
        try:
            _expect_steps()
        except Exception:
            pass

    __init__.__wrapped__ = original
    __init__.__doc__ = original.__doc__
    optim.Optimizer.__init__ = __init__


def _hook_grad_scaler():
    # An AMP GradScaler skips optimizer.step() when the gradients
    # overflowed: that training step still ends there. Only the scaler
    # classes torch has already imported are wrapped (both versions import
    # them with torch); a nested wrapper (a subclass calling its base)
    # sees the step counted once.
    for name in ("torch.amp.grad_scaler", "torch.cuda.amp.grad_scaler"):
        mod = sys.modules.get(name)
        cls = getattr(mod, "GradScaler", None) if mod is not None else None
        original = getattr(cls, "step", None)
        if original is None or getattr(original, "_gradtrace", False):
            continue

        def step(self, optimizer, *args, _original=original, **kwargs):
            before = _steps_of(optimizer)
            out = _original(self, optimizer, *args, **kwargs)
            try:
                if _steps_of(optimizer) == before:
                    _count_step(optimizer)
            except Exception:
                pass
            return out

        step._gradtrace = True
        step.__wrapped__ = original
        step.__doc__ = original.__doc__
        cls.step = step


def _install_optimizer_hook():
    # torch 1.13's torch.optim deletes its `optimizer` attribute; the
    # module itself is still importable.
    optim = importlib.import_module("torch.optim.optimizer")
    _hook_optimizer_init(optim)
    try:
        _hook_grad_scaler()
    except Exception:  # steps still end at optimizer steps
        pass
    # One hook per step does both: the step count, then (with an agent
    # that says when it wants module hooks) the hooks' iteration boundary.
    boundary = _hooks_wanted is not None
    if hasattr(optim, "register_optimizer_step_post_hook"):
        def _after_step(opt, _args, _kwargs):
            try:
                _count_step(opt)
            except Exception:
                pass
            if boundary:
                _step_boundary()

        optim.register_optimizer_step_post_hook(_after_step)
        return
    # torch 1.13: the profiler's per-step entry point, called after every
    # step() by the wrapper Optimizer installs on its subclasses.
    original = optim.Optimizer._optimizer_step_code

    def _optimizer_step_code(self):
        try:
            _count_step(self)
        except Exception:
            pass
        try:
            return original(self)
        finally:
            if boundary:
                _step_boundary()

    optim.Optimizer._optimizer_step_code = _optimizer_step_code


# Idle = free. While nothing is captured and no trigger is armed the
# agent ignores module scopes, and torch's own path for calling global
# hooks costs more than our hooks do, so the module hooks are installed
# only while the agent wants them (gt_hooks_wanted: capturing, or a
# trigger armed). They are put in and taken out at an iteration boundary
# (after an optimizer step), so a step's layers are complete from its
# first module: a trigger for step N, armed before step N begins, has
# the hooks in place by then. A program that steps no optimizer, or has
# not stepped for much longer than its steps take, gets them from a
# watcher thread at once instead (a capture started in the middle of the
# run: inner modules are named from their root's map, so they are right
# even when the call around them started before). Taking them out is
# left to boundaries, where no module is open. With an agent older than
# API minor 2 they stay installed, as before.
_hooks_wanted = _agent.hooks_wanted
_handles = None          # while installed: ("wrapper",), or the pre and
                         # post RemovableHandles of global hooks
_last_step = None        # time.monotonic() of the last step boundary
_step_gap = 0.0          # seconds between the last two boundaries
_WATCH_S = 0.1           # watcher poll period
_OVERDUE_MIN_S = 2.0     # a boundary this late (or 3 steps' worth) is missed


# How the hooks reach torch. By default nn.Module.__call__ is replaced: with
# no global hook registered, torch's _call_impl keeps its fast path, and
# our __call__ costs less than that path's slow branch (which on 2.x is
# over a microsecond per call by itself). It calls the same pre/post
# hooks, the post-hook also when the forward raises (torch 2.x's
# always_call); it opens the scope before the module's own pre-hooks and
# closes it after its forward hooks. GRADTRACE_MODULE_HOOKS=global uses
# torch's global module hooks instead (register_module_forward_*_hook).
#
# Our __call__ is one Python function (_make_wrapper) that is also run in
# C. Dynamo (torch.compile) finds nn.Module.__call__ in several ways: it
# reads it from the class dict when a compiled function calls a module
# (through getattr, and raw when it walks the MRO, e.g. for super()),
# torch.compile(module) binds module.__call__ once and keeps it (its
# OptimizedModule's forward), and it traces the bytecode of whatever it
# found. A C object there cannot be traced: under fullgraph=True the
# compile fails ("call to a callable object with no traceable __call__"),
# without it every module call is a graph break; and switching objects
# when dynamo starts cannot reach the references it already took. So the
# object is always a Python function, whose first test is
# torch.compiler.is_compiling(): dynamo folds it to True and traces
# torch's own __call__, reading none of our state (no guard on the on
# switch, so capture going on and off recompiles nothing). Eager calls
# do not pay for that Python: _gthooks.fast_call gives the same function
# a C vectorcall doing what its bytecode does (module(x) reaches a
# function through its vectorcall), and that runs the bytecode itself
# whenever dynamo's frame hook is installed, so that dynamo finds a frame
# to compile where it expects one and never a Python hook of ours.
#
# Once dynamo has started compiling, hooks-off leaves our function in
# place (switched off: one C call in front of torch's) instead of putting
# torch's back: a graph dynamo traced while ours was in place may carry
# guards on it (the class dict entry, its closure: when torch._dynamo was
# imported before ours went in, dynamo inlines ours instead of going
# straight to forward), and taking it out would fail them and recompile
# the compiled regions at every capture toggle. Before any compilation no
# graph can hold such a guard, so idle stays free. Dynamo's compile-start
# callback says when one starts; it and the restore take _restore_lock, so
# a compile starts either with torch's __call__ in place or after the flag
# is up. Where that callback is missing once torch._dynamo is imported
# (older 2.x, or torch._dynamo.reset(), which drops every callback), dynamo
# counts as having compiled.
_use_global = os.environ.get("GRADTRACE_MODULE_HOOKS", "") == "global"
_orig_call = None        # nn.Module.__call__ before ours
_restore_lock = threading.Lock()
_dynamo_compiled = False  # dynamo started a compilation (under the lock)


_c_call_ok = _gthooks is not None and hasattr(_gthooks, "fast_call")


def _make_wrapper(orig, pre=None, post=None):
    """Our nn.Module.__call__ around orig (_callform.make), and the
    one-element list that switches its hooks on (a reference to it kept
    elsewhere, e.g. torch.compile's bound forward, stays harmless once
    hooks are out). With the C hooks loaded and pre/post left to the
    package's, it runs in C (_gthooks.fast_call), doing exactly what its
    bytecode does."""
    return _callform.make(orig, _is_compiling, pre or _fast_pre,
                          post or _fast_post,
                          _gthooks if _c_call_ok else None)


_call_wrapper = None     # our __call__ around _orig_call
_call_wrapper_on = [False]


def _ours(call):
    return call is not None and call is _call_wrapper


def _hooks_on():
    global _handles, _orig_call, _call_wrapper, _call_wrapper_on
    if _handles is not None:
        return
    if _use_global:
        reg_pre = torch.nn.modules.module.register_module_forward_pre_hook
        reg_post = torch.nn.modules.module.register_module_forward_hook
        # torch 2.x: stay out of graphs dynamo is tracing.
        pre, post = ((_compiling_pre_hook, _compiling_post_hook)
                     if _is_compiling else (_fast_pre, _fast_post))
        h_pre = reg_pre(pre)
        try:
            h_post = reg_post(post, always_call=True)
        except TypeError:  # torch < 2.1
            h_post = reg_post(post)
        _handles = (h_pre, h_post)
        return
    mod = torch.nn.Module
    if not _ours(mod.__call__):
        _orig_call = mod.__call__
        _call_wrapper, _call_wrapper_on = _make_wrapper(_orig_call)
    _call_wrapper_on[0] = True
    mod.__call__ = _call_wrapper
    _handles = ("wrapper",)


def _hooks_off():
    global _handles
    h, _handles = _handles, None
    if h is None:
        return
    if h[0] != "wrapper":
        h[0].remove()
        h[1].remove()
        return
    _call_wrapper_on[0] = False
    # Put the original back unless someone wrapped ours meanwhile (then
    # ours stays in place, calling no hook while it is off), or dynamo may
    # hold graphs that guard on ours (above).
    with _restore_lock:
        if _ours(torch.nn.Module.__call__) and not _dynamo_may_guard():
            torch.nn.Module.__call__ = _orig_call


def _dynamo_may_guard():
    # Called under _restore_lock.
    if _dynamo_compiled:
        return True
    if "torch._dynamo" not in sys.modules:
        return False
    cb = sys.modules.get("torch._dynamo.callback")
    try:
        return _on_dynamo_compile not in cb.callback_handler.start_callbacks
    except Exception:
        return True  # no callback could have told us


def _on_dynamo_compile(*_args):
    """dynamo's compile-start callback: ours stays in place from now on."""
    global _dynamo_compiled
    if not _dynamo_compiled:
        with _restore_lock:
            _dynamo_compiled = True


def _watch_dynamo():
    try:
        from torch._dynamo.callback import callback_handler
        callback_handler.register_start_callback(_on_dynamo_compile)
    except Exception:  # then torch._dynamo imported counts as compiling
        pass


def hooks_installed():
    """Whether module scopes are being reported now (tests, benchmarks)."""
    return _handles is not None


def _sync_hooks():
    """At an iteration boundary: module hooks in while the agent wants
    them, out while it does not."""
    global _last_step, _step_gap
    now = time.monotonic()
    if _last_step is not None:
        _step_gap = now - _last_step
    _last_step = now
    if _hooks_wanted is None:
        return
    try:
        if bool(_hooks_wanted()) == (_handles is not None):
            return  # as wanted already: the common case, no lock taken
        with _install_lock:
            if _hooks_wanted():
                _hooks_on()
            elif not _tls.stack:
                _hooks_off()
    except Exception:
        pass


def _nap(seconds):
    """time.sleep, or select's relative timeout where time.sleep fails
    (libfaketime 0.9.10 makes the clock_nanosleep behind time.sleep fail
    with EINVAL when it leaves CLOCK_MONOTONIC alone). @return False when
    neither works."""
    try:
        time.sleep(seconds)
        return True
    except Exception:
        pass
    try:
        import select
        select.select([], [], [], seconds)
        return True
    except Exception:
        return False


def _watch():
    # Never raises: an exception here would print into the job's stderr.
    while _nap(_WATCH_S):
        try:
            if _handles is not None or not _hooks_wanted():
                continue
            last = _last_step
            if last is not None and time.monotonic() - last < \
                    max(_OVERDUE_MIN_S, 3 * _step_gap):
                continue  # the next boundary will do it
            with _install_lock:
                _hooks_on()
        except Exception:
            pass


def hooks_now():
    """The program started a capture itself (gradtrace.capture_start):
    the hooks go in now, not at the next boundary, so what it runs next
    has its layers (a module already running keeps its root's names)."""
    if not _installed or _hooks_wanted is None or _handles is not None:
        return
    try:
        with _install_lock:
            if _hooks_wanted():
                _hooks_on()
    except Exception:
        pass


def _step_boundary(*_args):
    try:
        _sync_hooks()
    except Exception:
        pass


def install():
    global _installed
    with _install_lock:
        if _installed:
            return True
        if _hooks_wanted is None or _hooks_wanted():
            _hooks_on()
        _installed = True
        if _is_compiling is not None and not _use_global:
            if "torch._dynamo.callback" in sys.modules:
                _watch_dynamo()
            else:
                from . import _importhook
                _importhook.after_import("torch._dynamo.callback",
                                         _watch_dynamo)
        if _seen_dir is not None:
            import atexit
            atexit.register(_write_seen)
        # torch.compile warns on every call of an OptimizedModule while
        # global module hooks exist (ours), that they fire for it as well
        # as for the module it wraps: this package expects that (the pair
        # opens one scope), so exactly that warning is not the user's to
        # see. Other warnings are left alone.
        warnings.filterwarnings(
            "ignore", category=UserWarning,
            message=r"Using `torch\.compile\(module\)` when there are "
                    r"global hooks on modules")
        try:
            _install_optimizer_hook()
        except Exception:  # scopes still work without step marks, and
            pass           # without boundaries the watcher does it all
        if _hooks_wanted is not None:
            threading.Thread(target=_watch, name="gradtrace-hooks",
                             daemon=True).start()
        from . import _dist  # collectives; job-wide triggers
        _dist.install()
    return True
