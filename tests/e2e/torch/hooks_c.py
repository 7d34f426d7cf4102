"""The module hooks in C (_gthooks) against the Python hooks they stand
for (_scopes._pre_hook/_post_hook): the same models, run once with each,
must give the same sequence of module scopes (begin with path and class
ids, end) on every thread. The agent's gt_module_begin/end are replaced by
recorders: the Python hooks' through _scopes._begin/_end, the C hooks'
through ctypes callbacks passed to _gthooks.setup.

Cases: nesting; a module called twice in one forward; a forward that
raises inside nested modules and is caught (a stale call on torch 1.13);
a module built on the fly (not registered under any root); a block called
on its own (known from its root's map); a second root; a wrapper pair
(torch.compile's OptimizedModule is not needed: DataParallel on CPU
stays a plain call); two threads.
Prints "ok <n> events" or fails with the first difference.
"""
import ctypes
import sys
import threading

import torch
from torch import nn
import torch.nn.modules.module as MM

import gradtrace._scopes as S
import gradtrace._switch as W

# The package's own hooks out (and kept out): the trials below register
# the hooks under test themselves.
W._hooks_wanted = lambda: 0
W._hooks_off()
for d in ("_global_forward_pre_hooks", "_global_forward_hooks",
          "_global_forward_hooks_always_called"):
    getattr(MM, d, {}).clear()
try:
    from gradtrace import _gthooks
except ImportError:
    sys.exit("the C hooks are not built for this interpreter")

events = []
lock = threading.Lock()


def rec_begin(path, cls):
    with lock:
        events.append((threading.get_ident(), "B", path, cls))


def rec_end():
    with lock:
        events.append((threading.get_ident(), "E"))


BEGIN = ctypes.CFUNCTYPE(None, ctypes.c_uint32, ctypes.c_uint32)(rec_begin)
END = ctypes.CFUNCTYPE(None)(rec_end)
S._begin = rec_begin
S._end = rec_end
_gthooks.setup(ctypes.cast(BEGIN, ctypes.c_void_p).value,
               ctypes.cast(END, ctypes.c_void_p).value,
               S._tls, S._known, S._pre_hook, S._post_hook)


class Boom(nn.Module):
    def forward(self, x):
        raise RuntimeError("boom")


class Inner(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.boom = Boom()

    def forward(self, x, fail=False):
        if fail:
            return self.boom(x)
        return self.lin(x) + self.lin(x)   # called twice


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Sequential(nn.Linear(4, 4), nn.GELU(), Inner())
        self.b = Inner()

    def forward(self, x, fail=False):
        x = self.a(x)
        try:
            self.b(x, fail=fail)
        except RuntimeError:
            pass
        x = nn.Identity()(x)               # built on the fly
        return self.b(x)


def run_models(nets):
    net, other, dp = nets
    x = torch.randn(2, 4)
    for i in range(3):
        net(x, fail=(i == 1))
        net.a[2](x)                        # a block on its own
        other(x)
        dp(x)
    t = threading.Thread(target=lambda: [net(x) for _ in range(2)])
    t.start()
    t.join()


def trial(pre, post):
    h1 = MM.register_module_forward_pre_hook(pre)
    try:
        h2 = MM.register_module_forward_hook(post, always_call=True)
    except TypeError:
        h2 = MM.register_module_forward_hook(post)
    del events[:]
    run_models(NETS)
    h1.remove()
    h2.remove()
    return list(events)


torch.manual_seed(0)
NETS = (Net(), nn.Sequential(nn.Linear(4, 4), nn.ReLU()),
        nn.DataParallel(nn.Sequential(nn.Linear(4, 4))))
# Map every root once with the Python hooks, so both trials below start
# from the same registry.
trial(S._pre_hook, S._post_hook)


def norm(evs):
    # Thread ids differ between trials: number them by first appearance.
    ids = {}
    return [(ids.setdefault(e[0], len(ids)),) + e[1:] for e in evs]


py = norm(trial(S._pre_hook, S._post_hook))
c = norm(trial(_gthooks.pre_hook, _gthooks.post_hook))
for i, (a, b) in enumerate(zip(py, c)):
    if a != b:
        sys.exit("event %d differs: python %r, C %r" % (i, a, b))
if len(py) != len(c):
    sys.exit("python %d events, C %d" % (len(py), len(c)))
assert len(py) > 50, len(py)
assert sum(1 for e in py if e[1] == "B") == sum(1 for e in py if e[1] == "E")
# The C hooks run their own path for the common case: with the Python
# hooks made to raise, the C trial of an already mapped model still works.
calls = []
_gthooks.setup(ctypes.cast(BEGIN, ctypes.c_void_p).value,
               ctypes.cast(END, ctypes.c_void_p).value,
               S._tls, S._known, lambda *a: calls.append(a),
               lambda *a: calls.append(a))
h1 = MM.register_module_forward_pre_hook(_gthooks.pre_hook)
h2 = MM.register_module_forward_hook(_gthooks.post_hook)
del events[:]
NETS[1](torch.randn(2, 4))
h1.remove()
h2.remove()
assert not calls, calls
assert [e[1] for e in events] == ["B", "B", "E", "B", "E", "E"], events


# nn.Module.__call__ as the package installs it (_make_wrapper's function,
# run in C by _gthooks.fast_call) against its Python-only form around the
# Python hooks: the same scopes, and the same results, kwargs and
# exceptions as torch's own __call__.
_gthooks.setup(ctypes.cast(BEGIN, ctypes.c_void_p).value,
               ctypes.cast(END, ctypes.c_void_p).value,
               S._tls, S._known, S._pre_hook, S._post_hook)
TORCH_CALL = nn.Module.__call__


def call_trial(call, on):
    nn.Module.__call__ = call
    on[0] = True
    del events[:]
    try:
        run_models(NETS)
    finally:
        nn.Module.__call__ = TORCH_CALL
        on[0] = False
    return norm(events)


def py_frames(fn, *args):
    """Python frames of the form's own code that running fn(*args) made."""
    n = [0]

    def prof(frame, ev, _arg):
        if ev == "call" and frame.f_code is c_form.__code__:
            n[0] += 1
    sys.setprofile(prof)
    try:
        fn(*args)
    finally:
        sys.setprofile(None)
    return n[0]


py_form, py_on = W._make_wrapper(TORCH_CALL, S._pre_hook, S._post_hook)
py_call = call_trial(py_form, py_on)
c_form, c_on = W._make_wrapper(TORCH_CALL)
c_call = call_trial(c_form, c_on)
for i, (a, b) in enumerate(zip(py_call, c_call)):
    if a != b:
        sys.exit("__call__ event %d differs: python %r, C %r" % (i, a, b))
if len(py_call) != len(c_call) or len(c_call) < 50:
    sys.exit("__call__: python %d events, C %d" % (len(py_call), len(c_call)))
# It is a real Python function (what dynamo can trace) whose calls through
# the type's call slot run in C: no frame of its own code.
assert type(c_form) is type(TORCH_CALL), type(c_form)


class Kw(nn.Module):
    def forward(self, *args, scale=1.0, fail=None):
        if fail:
            raise fail
        return (args, scale)


kw, err = Kw(), KeyError("k")
nn.Module.__call__ = c_form
try:
    for on in (False, True):
        c_on[0] = on
        assert py_frames(kw, 1) == 0, "module(x) ran the form's bytecode"
        del events[:]
        many = tuple(range(40))
        assert kw(*many, scale=2) == (many, 2)
        assert kw(1, 2) == ((1, 2), 1.0)
        assert kw.__call__(3) == ((3,), 1.0)   # bound, as a function is
        try:
            kw(fail=err)
            sys.exit("no exception")
        except KeyError as e:
            assert e is err and e.__traceback__ is not None
        assert [e[1] for e in events] == (["B", "E"] * 4 if on else []), \
            events
    # Another library wraps ours, and the package wraps that again (hooks
    # out, then in): each form runs its own original and only the one
    # switched on runs the hooks, so one scope per call, no loop.
    outer_lib = lambda self, *a, **k: c_form(self, *a, **k)  # noqa: E731
    c_on[0] = False
    c2, c2_on = W._make_wrapper(outer_lib)
    nn.Module.__call__ = c2
    c2_on[0] = True
    del events[:]
    assert kw(5) == ((5,), 1.0)
    assert [e[1] for e in events] == ["B", "E"], events
finally:
    nn.Module.__call__ = TORCH_CALL
    c_on[0] = False
print("ok %d events, __call__ %d events" % (len(py), len(c_call)))
