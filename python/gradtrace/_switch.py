"""Switching the module hooks in and out (idle = free) and how they reach
torch (our nn.Module.__call__, or torch's global module hooks)."""

import os
import sys
import threading
import time

import torch

from . import _agent
from . import _callform
from ._scopes import _fast_pre, _fast_post, _gthooks, _is_compiling, \
    _compiling_pre_hook, _compiling_post_hook, _tls

_install_lock = threading.Lock()


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


def _step_boundary(*_args):
    try:
        _sync_hooks()
    except Exception:
        pass
