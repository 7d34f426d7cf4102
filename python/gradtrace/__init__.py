"""gradtrace's Python side: per-module scopes and step marks for the agent.

`gradtrace record` puts this package on PYTHONPATH together with a
sitecustomize that calls install_when_torch_imported(); user code may also
import it to open scopes or start/stop capture. Everything here is inert
when the agent (libgradtrace.so) is not loaded into the process: available()
is then False and the functions do nothing.

What the agent gets, through its C API (include/gradtrace/gradtrace.h):
  - gt_module_begin/end around every nn.Module forward (torch's global
    forward pre/post hooks), named by the module's named_modules() path
    in its root ("layers.17.mlp.up_proj"; the first root is named by its
    class, later roots get a unique class-name prefix, and a module
    recomputed inside the backward keeps its full path: schema/torch.md)
    and its class name. The agent keeps a per-thread layer stack from
    these, which is how autograd nodes created in the forward get their
    layer;
  - gt_torch_param for every parameter of a mapped root (its TensorImpl
    address, owning module path, name), so AccumulateGrad nodes get the
    layer of the parameter's module;
  - gt_step_expect when an optimizer is created, and gt_step at the end
    of each training step (torch's global optimizer step hook on 2.x, the
    profiler's per-step entry point on 1.13), so that iterations are
    optimizer steps however many backward passes a step holds.
"""

import contextlib
import sys

from . import _agent

__all__ = [
    "available", "install", "install_when_torch_imported", "scope",
    "step", "capture_start", "capture_stop", "capture_active",
]


def available():
    """True when the agent is loaded and the module talks to it."""
    return _agent.lib is not None


def install():
    """Installs the module and optimizer hooks (idempotent; needs torch).

    @return True when hooks are installed, False when the agent is absent.
    """
    if _agent.lib is None:
        return False
    _watch_exit()
    from . import _modules
    return _modules.install()


def _at_exit():
    # A run whose main code raised KeyboardInterrupt (Ctrl-C) ends, after
    # finalizing, with CPython killing itself by SIGINT (bpo-1054041), so
    # the agent's C exit handlers never run and its stream would end with
    # no goodbye, read as cut short. The agent ends it here instead; this
    # handler was registered first, so it runs after the program's own.
    last = getattr(sys, "last_exc", None)
    last = type(last) if last is not None else getattr(sys, "last_type", None)
    if isinstance(last, type) and issubclass(last, KeyboardInterrupt) and \
            _agent.finish is not None:
        _agent.finish()


_exit_watched = []


def _watch_exit():
    if not _exit_watched:
        import atexit
        atexit.register(_at_exit)
        _exit_watched.append(True)


def install_when_torch_imported():
    """Calls install() right after the program imports torch, if it ever
    does: importing torch here would slow every Python process down.
    Also ends the agent's stream at an exit after Ctrl-C (_at_exit)."""
    if _agent.lib is None:
        return False
    _watch_exit()
    from . import _importhook
    _importhook.after_import("torch", install)
    return True


@contextlib.contextmanager
def scope(name):
    """A user scope (GT_SCOPE_USER) around a block of code."""
    lib = _agent.lib
    if lib is None:
        yield
        return
    lib["gt_scope_begin"](_agent.intern(name))
    try:
        yield
    finally:
        lib["gt_scope_end"]()


def step(n):
    """Marks training step n."""
    if _agent.lib is not None:
        _agent.lib["gt_step"](int(n))


def capture_start():
    """Starts capturing now; the module hooks come in at once (with torch
    installed), so the layers are right from the next module call."""
    if _agent.lib is not None:
        _agent.lib["gt_capture_start"]()
        mods = sys.modules.get(__name__ + "._modules")
        if mods is not None:
            mods.hooks_now()


def capture_stop():
    if _agent.lib is not None:
        _agent.lib["gt_capture_stop"]()


def capture_active():
    return bool(_agent.lib is not None and _agent.lib["gt_capture_active"]())
