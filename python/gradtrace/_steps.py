"""Training steps (schema/control.md): creating an optimizer calls
gt_step_expect (Optimizer.__init__ is wrapped), and the first optimizer to
reach a step count no live optimizer had ends the step (gt_step); an AMP
GradScaler.step that skips the optimizer step (the gradients overflowed)
ends it too. The agent numbers the steps from 0. The same per-step hook
then calls the hook switch's iteration boundary (_switch.py)."""

import importlib
import sys
import weakref

from . import _agent
from . import _rank

_step = _agent.lib["gt_step"] if _agent.lib is not None else None



# id(optimizer) -> [weakref to it, steps it took]: one dict probe per step
# (a WeakKeyDictionary makes a weakref on every lookup). The weakref's
# callback drops the entry when the optimizer dies, before its id can be
# reused; the identity check covers the rest.
_steps = {}
_step_max = [0]


def _steps_of(optimizer):
    e = _steps.get(id(optimizer))
    return e[1] if e is not None and e[0]() is optimizer else 0


def _forget_steps(key):
    # A dead optimizer's steps no longer set the round: a model trained
    # after another in the same process (a sweep, a second stage) with an
    # optimizer of its own starts counting steps again at once.
    _steps.pop(key, None)
    _step_max[0] = max((e[1] for e in list(_steps.values())), default=0)


def _count_step(optimizer):
    # A training step ends when some optimizer reaches a step count no
    # optimizer had: one boundary per round when several optimizers step
    # once each (a GAN's D and G), at the first of them. The agent numbers
    # the steps itself (from 0, as triggers' iteration=N counts them).
    k = id(optimizer)
    e = _steps.get(k)
    if e is None or e[0]() is not optimizer:
        e = _steps[k] = [weakref.ref(
            optimizer, lambda _r, k=k: _forget_steps(k)), 0]
    e[1] += 1
    n = e[1]
    if n > _step_max[0]:
        _step_max[0] = n
        if _step is not None:
            _step(n - 1)
    _rank.check()


def _expect_steps():
    # An optimizer exists: iterations are its steps from the first
    # backward on, however many backward passes a step holds.
    if _agent.step_expect is not None:
        _agent.step_expect()


def _hook_optimizer_init(optim):
    original = optim.Optimizer.__init__

    def __init__(self, *args, **kwargs):
        original(self, *args, **kwargs)
        try:
            _expect_steps()
        except Exception:
            pass

    __init__.__wrapped__ = original
    __init__.__doc__ = original.__doc__
    optim.Optimizer.__init__ = __init__


def _hook_grad_scaler():
    # An AMP GradScaler skips optimizer.step() when the gradients
    # overflowed: that training step still ends there. Only the scaler
    # classes torch has already imported are wrapped (both versions import
    # them with torch); a nested wrapper (a subclass calling its base)
    # sees the step counted once.
    for name in ("torch.amp.grad_scaler", "torch.cuda.amp.grad_scaler"):
        mod = sys.modules.get(name)
        cls = getattr(mod, "GradScaler", None) if mod is not None else None
        original = getattr(cls, "step", None)
        if original is None or getattr(original, "_gradtrace", False):
            continue

        def step(self, optimizer, *args, _original=original, **kwargs):
            before = _steps_of(optimizer)
            out = _original(self, optimizer, *args, **kwargs)
            try:
                if _steps_of(optimizer) == before:
                    _count_step(optimizer)
            except Exception:
                pass
            return out

        step._gradtrace = True
        step.__wrapped__ = original
        step.__doc__ = original.__doc__
        cls.step = step


def install(boundary=None):
    """Wraps the optimizer (and GradScaler) step paths; boundary, when
    given, is called after every optimizer step."""
    # torch 1.13's torch.optim deletes its `optimizer` attribute; the
    # module itself is still importable.
    optim = importlib.import_module("torch.optim.optimizer")
    _hook_optimizer_init(optim)
    try:
        _hook_grad_scaler()
    except Exception:  # steps still end at optimizer steps
        pass
    # One hook per step does both: the step count, then (with an agent
    # that says when it wants module hooks) the hooks' iteration boundary.
    if hasattr(optim, "register_optimizer_step_post_hook"):
        def _after_step(opt, _args, _kwargs):
            try:
                _count_step(opt)
            except Exception:
                pass
            if boundary:
                boundary()

        optim.register_optimizer_step_post_hook(_after_step)
        return
    # torch 1.13: the profiler's per-step entry point, called after every
    # step() by the wrapper Optimizer installs on its subclasses.
    original = optim.Optimizer._optimizer_step_code

    def _optimizer_step_code(self):
        try:
            _count_step(self)
        except Exception:
            pass
        try:
            return original(self)
        finally:
            if boundary:
                boundary()

    optim.Optimizer._optimizer_step_code = _optimizer_step_code
