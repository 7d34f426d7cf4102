"""The module forward scopes: per-thread stacks of open calls, and the
pre/post hooks that open and close each layer's scope in the agent.

The Python hooks here are the definition; the C extension (_gthooks,
_hooks.c) runs their common case and calls them for everything else. Each
thread keeps its own stack, so models run from several Python threads get
their own layers (the agent's layer stack is per thread too). The hooks
never return anything (so they cannot change inputs or outputs) and never
raise into the model; when a forward raised, the next hook closes what it
left open (schema/torch.md, "Exceptions").
"""

import ctypes
import os
import sys
import threading

import torch

from . import _agent
from ._naming import _known, _lookup, _new_root

# gt_module_begin without argtypes: ctypes then passes the (small, positive)
# ids as C ints, which costs half as much per call as declared uint32s.
# Without the agent both stay None (the package installs nothing then;
# tests set recorders).
if _agent.lib is not None:
    _begin = ctypes.CDLL(None).gt_module_begin
    _begin.restype = None
    _end = _agent.lib["gt_module_end"]
else:
    _begin = _end = None


class _Thread(threading.local):
    def __init__(self):
        self.stack = []       # modules with an open forward, outermost first
        self.ents = []        # their registry entries
        self.root_map = None  # the map of the root stack[0] belongs to


_tls = _Thread()


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
    if os.environ.get("GRADTRACE_C_HOOKS", "1") == "0" or _begin is None:
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
