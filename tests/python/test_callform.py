"""The rule of gradtrace's nn.Module.__call__ (python/gradtrace/_callform.py,
run in C by _gthooks.fast_call), without the agent: hooks recorded by
plain Python functions, torch 2.x's dynamo compiling through it.

  - The C vectorcall runs what the bytecode runs: the same hook calls
    (the C hooks, whose fallbacks record here), in the same order, for nested modules, kwargs and exceptions, and no
    Python frame of the form's own code for module(x).
  - torch.compile(fullgraph=True) through it gives the same graphs
    (nodes' op and target), with no graph break, as through torch's own
    __call__, for a whole model, per block and a block calling
    super().__call__; switching the hooks on and off between calls
    recompiles nothing.

Runs under pytest, or as a script (python3 tests/python/test_callform.py:
exit 0, 77 when torch or the C hooks are missing). `make pyunit` runs it
with each interpreter that has torch.
"""
import ctypes
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyunit  # noqa: E402  (puts this checkout's package on the path)

torch, MISSING = pyunit.torch_or_reason()
if torch is not None:
    from torch import nn
    from gradtrace import _callform, _gthooks  # built by make: never a skip

calls = []


class _Thread(__import__("threading").local):
    def __init__(self):
        self.stack, self.ents, self.root_map = [], [], {}


_tls = _Thread()


def rec_pre(module, args):
    # What the C pre-hook leaves to Python (nothing is mapped here, so
    # that is every call): open the call as _scopes._pre_hook does.
    import weakref
    calls.append(("pre", type(module).__name__, len(args)))
    _tls.stack.append(module)
    _tls.ents.append((weakref.ref(module), "", 1, 1, {}, None, True))


def rec_post(module, args, output):
    calls.append(("post", type(module).__name__, len(args)))
    if _tls.stack and _tls.stack[-1] is module:
        _tls.stack.pop()
        _tls.ents.pop()


def rec_end():
    # The C post-hook closed the call on top of the stack.
    calls.append(("end",))


def _setup():
    global _keep
    cb = ctypes.CFUNCTYPE(None, ctypes.c_uint32, ctypes.c_uint32)(
        lambda p, c: calls.append(("begin",)))
    ce = ctypes.CFUNCTYPE(None)(rec_end)
    _keep = (cb, ce)
    _gthooks.setup(ctypes.cast(cb, ctypes.c_void_p).value,
                   ctypes.cast(ce, ctypes.c_void_p).value, _tls, {},
                   rec_pre, rec_post)


class Block(nn.Module if torch else object):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(8, 16)
        self.act = nn.GELU()
        self.down = nn.Linear(16, 8)

    def forward(self, x, scale=1.0, fail=None):
        if fail is not None:
            raise fail
        return x + scale * self.down(self.act(self.up(x)))


class SuperBlock(Block):
    def __call__(self, *args, **kwargs):
        return super().__call__(*args, **kwargs)


class Net(nn.Module if torch else object):
    def __init__(self, block):
        super().__init__()
        self.blocks = nn.ModuleList([block() for _ in range(2)])

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x.sum()


def _forms():
    torch_call = nn.Module.__call__
    compiling = getattr(getattr(torch, "compiler", None), "is_compiling",
                        None)
    # The same hooks (the C ones, falling back to rec_pre/rec_post); the
    # forms differ only in how they run: bytecode, or C vectorcall.
    _setup()
    py, py_on = _callform.make(torch_call, compiling, _gthooks.pre_hook,
                               _gthooks.post_hook)
    c, c_on = _callform.make(torch_call, compiling, _gthooks.pre_hook,
                             _gthooks.post_hook, _gthooks)
    return torch_call, (py, py_on), (c, c_on)


def _run(form, on, fn):
    torch_call = nn.Module.__call__
    nn.Module.__call__ = form
    on[0] = True
    del calls[:]
    try:
        fn()
    finally:
        nn.Module.__call__ = torch_call
        on[0] = False
    return list(calls)


def _eager_model():
    torch.manual_seed(0)
    net, x = Net(SuperBlock), torch.randn(2, 8)
    b, err = net.blocks[0], KeyError("k")

    def run():
        net(x)
        b(x, scale=2.0)
        b.__call__(x)
        try:
            b(x, fail=err)
        except KeyError as e:
            assert e is err
    return run


def test_c_runs_what_the_bytecode_runs():
    if torch is None:
        return _skip()
    torch_call, (py, py_on), (c, c_on) = _forms()
    run = _eager_model()
    want, got = _run(py, py_on, run), _run(c, c_on, run)
    assert got == want and len(want) > 20, (got, want)
    assert type(c) is type(torch_call)      # a function dynamo can trace
    frames = [0]

    def prof(frame, ev, _arg):
        if ev == "call" and frame.f_code is c.__code__:
            frames[0] += 1
    m = nn.Linear(2, 2)
    nn.Module.__call__ = c
    c_on[0] = True
    try:
        sys.setprofile(prof)
        m(torch.randn(1, 2))
        sys.setprofile(None)
    finally:
        nn.Module.__call__ = torch_call
        c_on[0] = False
    assert frames[0] == 0, "module(x) ran the form's bytecode"


def _graphs(form, on, case, toggle=False):
    import torch._dynamo
    from torch._dynamo.utils import counters
    graphs = []

    def backend(gm, _inputs):
        graphs.append([(n.op, str(n.target)) for n in gm.graph.nodes])
        return gm.forward
    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    torch_call = nn.Module.__call__
    if form is not None:
        nn.Module.__call__ = form
        on[0] = True
    try:
        net, x = Net(SuperBlock if case == "super" else Block), \
            torch.randn(2, 8)
        if case == "blocks":
            for i, b in enumerate(net.blocks):
                net.blocks[i] = torch.compile(b, backend=backend,
                                              fullgraph=True)
            model = net
        else:
            model = torch.compile(net, backend=backend, fullgraph=True)
        for i in range(4):
            if toggle and form is not None:
                on[0] = i % 2 == 0
            model(x).backward()
    finally:
        nn.Module.__call__ = torch_call
        if on is not None:
            on[0] = False
    return graphs, sum(counters["graph_break"].values())


def test_compile_sees_torchs_call():
    if torch is None or not hasattr(torch, "compile"):
        return _skip()
    _, _, (c, c_on) = _forms()
    for case in ("whole", "blocks", "super"):
        want = _graphs(None, None, case)
        for toggle in (False, True):
            got = _graphs(c, c_on, case, toggle)
            assert got == want, (case, toggle, got, want)
            assert want[0] and want[1] == 0, (case, want)


def _skip():
    pyunit.skip(MISSING if torch is None else "torch without torch.compile",
                torch is None)


if __name__ == "__main__":
    pyunit.main(globals(), MISSING if torch is None else None)
