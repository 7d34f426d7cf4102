"""FSDP2's parameter swap (python/gradtrace/_fsdp.py), without the agent
or a process group: a stand-in FSDPParam shaped like torch's
(`_module_info.module/param_name`, `_unsharded_param`,
`_setattr_on_modules`) under a made-up module name, the package's naming
hooks on a clean registry (test_naming's), and a recorder for
gt_torch_param.

  - the unsharded parameter FSDP2 sets on a named module is registered
    under that module's layer name and the parameter's name, once however
    often it is swapped in;
  - a parameter that is not the unsharded one (the sharded DTensor set
    back after a reshard) is not;
  - on a module not named yet nothing is registered, and the next swap
    registers it;
  - the wrapper returns what FSDP's method returns, and a failure inside
    it is counted, never raised.
The real thing (fully_shard on two gloo ranks) is tests/e2e/t_torch2_fsdp.sh.

Runs under pytest, or as a script (exit 0, 77 when torch is missing).
"""
import os
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyunit  # noqa: E402  (puts this checkout's package on the path)

torch, MISSING = pyunit.torch_or_reason()
if torch is not None:
    from torch import nn
    from gradtrace import _fsdp, _naming
    import test_naming as N

_FAKE = "gt_test_fake_fsdp_param"


def _fake_fsdp():
    class Info:
        def __init__(self, module, name):
            self.module, self.param_name = module, name

    class FSDPParam:
        def __init__(self, module, name):
            self._module_info = Info(module, name)
            full = getattr(module, name)
            self._unsharded_param = nn.Parameter(torch.zeros_like(full))
            self.sharded = nn.Parameter(full.detach()[:1].clone())

        def _setattr_on_modules(self, param):
            self._module_info.module._parameters[self._module_info.param_name] = param
            return "set"

    mod = types.ModuleType(_FAKE)
    mod.FSDPParam = FSDPParam
    sys.modules[_FAKE] = mod
    _fsdp._hook(_FAKE)
    return FSDPParam


def test_unsharded_parameters_take_their_modules_names():
    if torch is None:
        return _skip()
    FSDPParam = _fake_fsdp()
    told = []
    real = _naming._param
    _naming._param = lambda impl, mod, name: told.append((impl, mod, name))
    try:
        with N._Hooks():
            net = N.Net()
            early = FSDPParam(net.blocks[1].up, "bias")
            unnamed = _fsdp.stats["unnamed"]
            early._setattr_on_modules(early._unsharded_param)  # not named yet
            assert _fsdp.stats["unnamed"] == unnamed + 1
            assert not told, told
            net(torch.randn(1, 4))  # maps the root (and what it holds now)
            fp = FSDPParam(net.blocks[0].up, "weight")
            for _ in range(3):
                assert fp._setattr_on_modules(fp._unsharded_param) == "set"
            fp._setattr_on_modules(fp.sharded)  # after a reshard: not it
            early._setattr_on_modules(early._unsharded_param)
    finally:
        _naming._param = real
    ids = {v: k for k, v in N._ids.items()}
    regs = [t for t in told if t[1]]  # leave out forgotten ones (module 0)
    of = lambda p: [(m, n) for i, m, n in regs if i == p._cdata]
    assert of(fp._unsharded_param) == [(ids["blocks.0.up"], ids["weight"])], regs
    assert of(early._unsharded_param) == [(ids["blocks.1.up"], ids["bias"])], regs
    assert of(fp.sharded) == [], regs


def test_a_failure_in_the_wrapper_is_counted():
    if torch is None:
        return _skip()
    FSDPParam = _fake_fsdp()
    fp = FSDPParam(nn.Linear(4, 4), "weight")
    failures = _fsdp.stats["failures"]
    real = _naming.register_param

    def broken(*args):
        raise RuntimeError("a torch change")
    _naming.register_param = broken
    try:
        assert fp._setattr_on_modules(fp._unsharded_param) == "set"
    finally:
        _naming.register_param = real
    assert _fsdp.stats["failures"] == failures + 1


def _skip(why=None):
    pyunit.skip(why or MISSING, torch is None)


if __name__ == "__main__":
    pyunit.main(globals(), MISSING if torch is None else None)
