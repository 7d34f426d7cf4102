"""gradtrace and FSDP2 (torch.distributed.fsdp.fully_shard): parameter
gradients attributed to their modules.

The package registers each module's parameters with the agent
(`gt_torch_param`: TensorImpl -> module, name) so that an AccumulateGrad
node names the parameter it accumulates into. FSDP2 replaces a module's
parameters by sharded DTensors at `fully_shard` and, for each forward and
backward, swaps in an unsharded `nn.Parameter` it all-gathered
(`FSDPParam.to_unsharded` -> `_setattr_on_modules`): autograd accumulates
into that one, which is no registered parameter, so every gradient came
out without a layer. The unsharded parameter is made once per FSDPParam
(its storage is freed and re-allocated between uses, the object stays),
so this wraps `_setattr_on_modules` and registers each new parameter it
sets, under the module's layer name and the parameter's name, once;
the wrapper costs a dict lookup per parameter and swap (a few per module
per step, none per operator). Shared parameters keep their first
module's name, as `named_parameters()` does.

FSDP1 (FullyShardedDataParallel) flattens parameters into one
FlatParameter per wrapped module, the registered parameter of its
`_fsdp_wrapped_module`: its gradients name that module. Every failure
here is swallowed: attribution is lost, never the program.
"""
import weakref

from . import _importhook, _naming

_MODULE = "torch.distributed.fsdp._fully_shard._fsdp_param"
_OLD_MODULE = "torch.distributed._composable.fsdp._fsdp_param"
_seen = {}  # id(unsharded parameter) -> weakref to it
stats = {"registered": 0, "unnamed": 0, "failures": 0}


def _register(module, pname, param):
    key = id(param)
    ref = _seen.get(key)
    if ref is not None and ref() is param:
        return
    _seen[key] = weakref.ref(param, lambda _r, k=key: _seen.pop(k, None))
    if _naming.register_param(module, pname, param):
        stats["registered"] += 1
    else:
        stats["unnamed"] += 1
        _seen.pop(key, None)  # the module is not named yet: try next time


def _hook(name):
    import sys
    cls = getattr(sys.modules.get(name), "FSDPParam", None)
    real = getattr(cls, "_setattr_on_modules", None)
    if real is None or getattr(real, "_gradtrace", False):
        return

    def _setattr_on_modules(self, param):
        out = real(self, param)
        try:
            if param is getattr(self, "_unsharded_param", None):
                info = self._module_info
                _register(info.module, info.param_name, param)
        except Exception:
            stats["failures"] += 1
        return out

    _setattr_on_modules._gradtrace = True
    _setattr_on_modules.__wrapped__ = real
    cls._setattr_on_modules = _setattr_on_modules


def install():
    """Hooks FSDP2 when (and if) it is imported."""
    for name in (_MODULE, _OLD_MODULE):
        _importhook.after_import(name, lambda n=name: _hook(n))
