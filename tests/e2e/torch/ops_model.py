"""A small model for tests/e2e/t_torch_ops.sh: 4 Linear layers with
GELU, cross-entropy, SGD, 3 steps. Prints nothing. With "toggle" it
stops capture before step 1 and starts it again before step 2."""
import sys

import torch
from torch import nn

torch.set_num_threads(1)
torch.manual_seed(0)
m = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 32), nn.GELU(),
                  nn.Linear(32, 32), nn.GELU(), nn.Linear(32, 4))
opt = torch.optim.SGD(m.parameters(), lr=0.1)
toggle = sys.argv[1:] == ["toggle"]
if toggle:
    import gradtrace
for i in range(3):
    if toggle and i == 1:
        gradtrace.capture_stop()
    if toggle and i == 2:
        gradtrace.capture_start()
    opt.zero_grad()
    nn.functional.cross_entropy(m(torch.randn(8, 16)),
                                torch.randint(0, 4, (8,))).backward()
    opt.step()
