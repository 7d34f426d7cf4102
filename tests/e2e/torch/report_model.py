"""A model for the report test, unlike the demo's: a shared layer called
twice per forward, a Sequential container, a parameter-free module, and a
module that never runs. It writes, to the file named by argv[1], each
module path whose forward ran and how many times (its own hooks, so the
test has a count independent of gradtrace)."""
import collections
import json
import sys

import torch
import torch.nn as nn


class Twice(nn.Module):
    def __init__(self):
        super().__init__()
        self.shared = nn.Linear(24, 24)
        self.seq = nn.Sequential(nn.Linear(24, 16), nn.Tanh(), nn.Linear(16, 24))
        self.unused = nn.Linear(3, 3)

    def forward(self, x):
        x = self.shared(x)
        x = self.seq(x)
        return self.shared(x).relu()


torch.manual_seed(0)
model = Twice()
names = {m: n or type(m).__name__ for n, m in model.named_modules()}
calls = collections.Counter()
for m in model.modules():
    m.register_forward_pre_hook(lambda mod, inp: calls.update([names[mod]]))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
iterations = int(sys.argv[2]) if len(sys.argv) > 2 else 4
for _ in range(iterations):
    opt.zero_grad()
    model(torch.randn(8, 24)).sum().backward()
    opt.step()
with open(sys.argv[1], "w") as f:
    json.dump(calls, f)
