"""Layers applied with stacked parameters (python/gradtrace/_stacked.py,
schema/torch.md "Applications"), without the agent: the package's scope
hooks on a clean registry (test_naming's), a recorder for the scopes.

  - a block applied N times per forward by functional_call over slices of
    stacked parameters opens "layer[i]" and "layer[i].<sub>" scopes, i in
    application order, the same indices on the next forward;
  - called plainly, with its own parameters, it keeps its name, and the
    names are back after each application;
  - a failure inside the wrapper leaves the names as they were.

Runs under pytest, or as a script (exit 0, 77 when torch is missing).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyunit  # noqa: E402  (puts this checkout's package on the path)

torch, MISSING = pyunit.torch_or_reason()
if torch is not None:
    from torch import nn
    from gradtrace import _stacked
    import test_naming as N
    try:
        from torch.func import functional_call
    except ImportError:  # 1.13
        from torch.nn.utils.stateless import functional_call

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 4)

        def forward(self, x):
            return torch.tanh(self.fc(x))

    class Stacked(nn.Module):
        def __init__(self, n=3):
            super().__init__()
            self.layer = Layer()
            self.w = nn.Parameter(torch.randn(n, 4, 4))
            self.b = nn.Parameter(torch.randn(n, 4))
            self.n = n

        def forward(self, x, plain=False):
            if plain:
                return self.layer(x)
            for i in range(self.n):
                x = functional_call(self.layer, {"fc.weight": self.w[i],
                                                 "fc.bias": self.b[i]}, (x,))
            return x


def test_each_application_has_its_index():
    if torch is None:
        return _skip()
    _stacked._hook()
    with N._Hooks():
        m, x = Stacked(), torch.randn(2, 4)
        m(x)
        first = N.names()
        del N.log[:]
        m(x)
        again = N.names()
        del N.log[:]
        m(x, plain=True)
        plain = N.names()
    want = ["Stacked"] + [n for i in range(3)
                          for n in ("layer[%d]" % i, "layer[%d].fc" % i)]
    assert first == want, first
    assert again == want, "the same indices on the next forward: %s" % again
    assert plain == ["Stacked", "layer", "layer.fc"], plain


def test_a_failure_leaves_the_names():
    if torch is None:
        return _skip()
    _stacked._hook()
    real = _stacked._rename

    def broken(*args):
        raise RuntimeError("a torch change")
    _stacked._rename = broken
    failures = _stacked.stats["failures"]
    try:
        with N._Hooks():
            m, x = Stacked(2), torch.randn(2, 4)
            out = m(x)
            names = N.names()
    finally:
        _stacked._rename = real
    assert out.shape == (2, 4)
    assert names == ["Stacked", "layer", "layer.fc", "layer", "layer.fc"], names
    assert _stacked.stats["failures"] > failures


def _skip(why=None):
    pyunit.skip(why or MISSING, torch is None)


if __name__ == "__main__":
    pyunit.main(globals(), MISSING if torch is None else None)
