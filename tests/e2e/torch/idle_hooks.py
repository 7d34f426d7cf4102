"""Idle = free (issue #16): the module hooks are in torch only while the
agent wants them (capturing or a trigger armed), put in and taken out at
optimizer-step boundaries, so every step captured is attributed from its
first module.

  idle_hooks.py steps OUT.txt   capture off at start: no hooks while idle;
      capture started in the middle of step 3 (between its forward and
      backward) by gradtrace.capture_start(): hooks in at once (issue 24);
      stopped in step 6: out after its step. Writes the step numbers at which
      hooks were seen, for the shell side to compare with the trace.
  idle_hooks.py armed           GRADTRACE_TRIGGER set: hooks from install.
  idle_hooks.py nostep          no optimizer: a capture started later gets
      the hooks from the watcher thread without any step.
"""
import sys
import time

import torch
from torch import nn
import torch.nn.modules.module as MM


def hooked():
    # Either way the package reaches torch (GRADTRACE_MODULE_HOOKS).
    # torch's own __call__: _wrapped_call_impl (2.x) or _call_impl (1.13);
    # the package's (C or Python) is anything else.
    torch_call = getattr(nn.Module, "_wrapped_call_impl", None) or \
        nn.Module._call_impl
    return len(MM._global_forward_pre_hooks) > 0 or \
        nn.Module.__call__ is not torch_call


class Loss(nn.Module):
    def forward(self, y):
        return y.pow(2).mean()


torch.manual_seed(0)
model = nn.Sequential(nn.Linear(8, 8), nn.GELU(), nn.Linear(8, 8), Loss())
x = torch.randn(4, 8)
mode = sys.argv[1]
import gradtrace  # noqa: E402  (sitecustomize installed it with torch)

if mode == "steps":
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    seen = []
    for step in range(1, 9):
        opt.zero_grad()
        loss = model(x)
        if step == 3:
            gradtrace.capture_start()
            assert hooked(), "capture_start() without the hooks"
        if step == 6:
            gradtrace.capture_stop()
        loss.backward()
        opt.step()
        seen.append(int(hooked()))
        if step < 3:
            assert not hooked(), "hooks in while idle (step %d)" % step
    with open(sys.argv[2], "w") as f:
        f.write(" ".join(map(str, seen)) + "\n")
    assert seen == [0, 0, 1, 1, 1, 0, 0, 0], seen
elif mode == "armed":
    assert hooked(), "a trigger is armed: hooks from the start"
    model(x)
elif mode == "nostep":
    with torch.no_grad():
        model(x)
    assert not hooked()
    gradtrace.capture_start()
    for _ in range(600):           # the watcher polls every 0.1 s
        if hooked():
            break
        time.sleep(0.05)
    assert hooked(), "no hooks without steps"
    model(x)
print("ok", mode)
