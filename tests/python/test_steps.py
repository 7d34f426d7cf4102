"""The training-step rule (python/gradtrace/_steps.py, schema/control.md
"Iterations"), without the agent: a recorder stands in for gt_step.

  - several optimizers stepping once each end one step per round (a GAN's
    D and G), at the first of them;
  - only live optimizers count: after one is collected, a new model's
    optimizer ends a step at each of its own (a sweep, a second stage).

Runs under pytest, or as a script (exit 0, 77 when torch is missing);
`make pyunit` runs it with each interpreter that has torch.
"""
import gc
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyunit  # noqa: E402  (puts this checkout's package on the path)

torch, MISSING = pyunit.torch_or_reason()
if torch is not None:
    from gradtrace import _steps

steps = []


def _fresh():
    _steps._steps.clear()
    _steps._step_max[0] = 0
    _steps._step = steps.append
    del steps[:]


def _opt():
    return torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)


def test_one_step_per_round_of_several_optimizers():
    if torch is None:
        _skip()
    _fresh()
    d, g = _opt(), _opt()
    for _ in range(3):
        _steps._count_step(d)
        _steps._count_step(g)
    assert steps == [0, 1, 2], steps


def test_a_later_models_optimizer_counts_once_the_first_is_gone():
    if torch is None:
        _skip()
    _fresh()
    a = _opt()
    for _ in range(4):
        _steps._count_step(a)
    del a
    gc.collect()
    b = _opt()
    for _ in range(2):
        _steps._count_step(b)
    assert steps == [0, 1, 2, 3, 0, 1], steps
    c = _opt()  # alive beside b: a round is b's
    _steps._count_step(c)
    assert steps[-1] == 1 and len(steps) == 6, steps


def _skip(why=None):
    pyunit.skip(why or MISSING, torch is None)


if __name__ == "__main__":
    pyunit.main(globals(), MISSING if torch is None else None)
