"""nn.Module forward scopes and optimizer step marks, reported to the agent.

Naming: a module is named by its qualified path in the outermost module
running on this thread (the "root"), exactly as root.named_modules() names
it ("layers.17.mlp.up_proj"); the root itself is named by its class name.
Paths are computed once per root (and again when a module shows up that
the cached map does not know, in case the model changed) and the agent's
string ids are cached with them, so a forward call costs two dict lookups,
a weakref call and one ctypes call on entry and on exit. A module that is
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

import importlib
import threading
import weakref

import torch

from . import _agent

_lib = _agent.lib
_begin = _lib["gt_module_begin"]
_end = _lib["gt_module_end"]
_step = _lib["gt_step"]
_intern = _agent.intern

_installed = False
_install_lock = threading.Lock()


class _Thread(threading.local):
    def __init__(self):
        # (module, path) per open forward call, outermost first.
        self.stack = []
        self.root_map = None


_tls = _Thread()

# root module -> {id(module): (weakref, path, path_id, class_id)}
_maps = weakref.WeakKeyDictionary()


def _build_map(root):
    m = {}
    root_name = type(root).__name__
    for path, mod in root.named_modules():
        name = path or root_name
        m[id(mod)] = (weakref.ref(mod), name, _intern(name),
                      _intern(type(mod).__name__))
    _maps[root] = m
    return m


def _lookup(root_map, root, module, parent_path):
    ent = root_map.get(id(module))
    if ent is not None and ent[0]() is module:
        return ent, root_map
    # Unknown: the model may have changed since the map was built.
    root_map = _build_map(root)
    ent = root_map.get(id(module))
    if ent is not None and ent[0]() is module:
        return ent, root_map
    name = parent_path + "." + type(module).__name__
    ent = (weakref.ref(module), name, _intern(name),
           _intern(type(module).__name__))
    root_map[id(module)] = ent
    return ent, root_map


def _compiling():
    return False


try:  # torch 2.x: stay out of graphs dynamo is tracing
    _compiling = torch.compiler.is_compiling
except AttributeError:
    pass


def _pre_hook(module, args):
    try:
        if _compiling():
            return None
        t = _tls
        stack = t.stack
        if stack and any(e[0] is module for e in stack):
            # Already open: an earlier call of it raised (torch 1.13 skips
            # post-hooks then). Close that call and what it left open.
            while stack:
                if stack.pop()[0] is module:
                    _end()
                    break
                _end()
        if not stack:
            root_map = _maps.get(module)
            if root_map is None:
                root_map = _build_map(module)
            t.root_map = root_map
            ent = root_map[id(module)]
        else:
            root = stack[0][0]
            ent, t.root_map = _lookup(t.root_map, root, module, stack[-1][1])
        stack.append((module, ent[1]))
        _begin(ent[2], ent[3])
    except Exception:
        pass
    return None


def _post_hook(module, args, output):
    try:
        if _compiling():
            return None
        stack = _tls.stack
        # Close this call and any inner call an exception left open.
        for i in range(len(stack) - 1, -1, -1):
            if stack[i][0] is module:
                for _ in range(len(stack) - i):
                    stack.pop()
                    _end()
                break
    except Exception:
        pass
    return None


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
        reg_pre(_pre_hook)
        try:
            reg_post(_post_hook, always_call=True)
        except TypeError:  # torch < 2.1
            reg_post(_post_hook)
        _installed = True
        try:
            _install_optimizer_hook()
        except Exception:  # scopes still work without step marks
            pass
    return True
