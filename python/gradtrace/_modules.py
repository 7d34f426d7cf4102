"""nn.Module forward scopes and optimizer step marks, reported to the agent.

Naming: a module is named by its qualified path in the outermost module
running on this thread (the "root"), exactly as root.named_modules() names
it ("layers.17.mlp.up_proj"); the root itself is named by its class name.
Paths are computed once per root (and again when a module shows up that
the cached map does not know, in case the model changed) and the agent's
string ids are cached with them, so a forward call costs a dict lookup, a
weakref call and one ctypes call on entry, one ctypes call on exit: about
1.3 us per module call on torch 1.13 and 2.6 us on 2.15 (including torch's
own slower hook path), measured by calling nn.Identity in a loop. A module that is
not registered under the root (kept in a plain list, built on the fly) is
named "<enclosing path>.<Class>".

Each thread keeps its own stack of open calls, so models run from several
Python threads get their own layers (the agent's layer stack is per thread
too). A module called twice in one forward opens two scopes. When a forward
raises, torch 2.x still calls the post-hook (always_call=True); on 1.13 it
does not, so every post-hook closes any inner scopes left open by an
exception caught inside the forward, and a pre-hook for a module that is
already open closes that stale call first (a module instance calling itself
recursively is far rarer than a forward that raised).

The hooks never return anything (so they cannot change inputs or outputs)
and never raise into the model.
"""

import ctypes
import importlib
import threading
import weakref

import torch

from . import _agent

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
        self.paths = []       # their paths
        self.root_map = None  # the map of stack[0]


_tls = _Thread()

# id(root) -> (weakref to root, {id(module): (weakref, path, path_id,
# class_id)}). Keyed by id with a weakref check rather than a
# WeakKeyDictionary: a lookup is then one dict probe and one call.
_maps = {}


def _build_map(root):
    m = {}
    root_name = type(root).__name__
    for path, mod in root.named_modules():
        name = path or root_name
        m[id(mod)] = (weakref.ref(mod), name, _intern(name),
                      _intern(type(mod).__name__))
    _maps[id(root)] = (weakref.ref(root), m)
    return m


def _root_map(root):
    hit = _maps.get(id(root))
    if hit is not None and hit[0]() is root:
        return hit[1]
    return _build_map(root)


def _lookup(root_map, root, module, parent_path):
    # Unknown here: the model may have changed since the map was built.
    root_map = _build_map(root)
    ent = root_map.get(id(module))
    if ent is not None and ent[0]() is module:
        return ent, root_map
    name = parent_path + "." + type(module).__name__
    ent = (weakref.ref(module), name, _intern(name),
           _intern(type(module).__name__))
    root_map[id(module)] = ent
    return ent, root_map


def _close_stale(t, module):
    # `module` is already open on this thread: an earlier call of it raised
    # (torch 1.13 skips post-hooks then). Close that call and what it left
    # open above it.
    stack = t.stack
    while stack:
        t.paths.pop()
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
                ent, t.root_map = _lookup(t.root_map, stack[0], module,
                                          t.paths[-1])
        else:
            t.root_map = _root_map(module)
            ent = t.root_map[id(module)]
        stack.append(module)
        t.paths.append(ent[1])
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
            t.paths.pop()
            _end()
        elif module in stack:
            # Inner calls an exception (caught inside this forward) left
            # open: close them and this call.
            while stack:
                t.paths.pop()
                _end()
                if stack.pop() is module:
                    break
    except Exception:
        pass
    return None


def _compiling_pre_hook(module, args):
    if not _is_compiling():
        _pre_hook(module, args)


def _compiling_post_hook(module, args, output):
    if not _is_compiling():
        _post_hook(module, args, output)


_is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None)


_steps = weakref.WeakKeyDictionary()


def _count_step(optimizer):
    n = _steps.get(optimizer, 0) + 1
    _steps[optimizer] = n
    _step(n)


def _install_optimizer_hook():
    # torch 1.13's torch.optim deletes its `optimizer` attribute; the
    # module itself is still importable.
    optim = importlib.import_module("torch.optim.optimizer")
    if hasattr(optim, "register_optimizer_step_post_hook"):
        optim.register_optimizer_step_post_hook(
            lambda opt, args, kwargs: _count_step(opt))
        return
    # torch 1.13: the profiler's per-step entry point, called after every
    # step() by the wrapper Optimizer installs on its subclasses.
    original = optim.Optimizer._optimizer_step_code

    def _optimizer_step_code(self):
        try:
            _count_step(self)
        except Exception:
            pass
        return original(self)

    optim.Optimizer._optimizer_step_code = _optimizer_step_code


def install():
    global _installed
    with _install_lock:
        if _installed:
            return True
        reg_pre = torch.nn.modules.module.register_module_forward_pre_hook
        reg_post = torch.nn.modules.module.register_module_forward_hook
        # torch 2.x: stay out of graphs dynamo is tracing.
        pre, post = ((_compiling_pre_hook, _compiling_post_hook)
                     if _is_compiling else (_pre_hook, _post_hook))
        reg_pre(pre)
        try:
            reg_post(post, always_call=True)
        except TypeError:  # torch < 2.1
            reg_post(post)
        _installed = True
        try:
            _install_optimizer_hook()
        except Exception:  # scopes still work without step marks
            pass
    return True
