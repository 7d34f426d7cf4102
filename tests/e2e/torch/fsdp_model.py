#!/usr/bin/env python3
"""FSDP on CPU with gloo, for tests/e2e/t_torch2_fsdp.sh: three residual
MLP blocks each sharded on its own, then the root; SGD, four steps, under
torchrun. Silent on success.

  fsdp_model.py fsdp2   fully_shard (FSDP2)
  fsdp_model.py fsdp1   FullyShardedDataParallel (FSDP1): each block
                        wrapped, then the root, whose flat parameter
                        holds head's
"""
import sys

import torch
import torch.distributed as dist
from torch import nn

torch.set_num_threads(1)
dist.init_process_group("gloo")
torch.manual_seed(0)


class Block(nn.Module):
    def __init__(s, d=32):
        super().__init__(); s.fc1 = nn.Linear(d, 2*d); s.fc2 = nn.Linear(2*d, d)

    def forward(s, x): return x + s.fc2(torch.relu(s.fc1(x)))


class Net(nn.Module):
    def __init__(s):
        super().__init__(); s.blocks = nn.ModuleList([Block() for _ in range(3)]); s.head = nn.Linear(32, 4)

    def forward(s, x):
        for b in s.blocks: x = b(x)
        return s.head(x)


m = Net()
if sys.argv[1] == "fsdp1":
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    for i in range(3):
        m.blocks[i] = FSDP(m.blocks[i], device_id=torch.device("cpu"))
    m = FSDP(m, device_id=torch.device("cpu"))
else:
    try:
        from torch.distributed.fsdp import fully_shard
    except ImportError:
        from torch.distributed._composable.fsdp import fully_shard
    for b in m.blocks:
        fully_shard(b)
    fully_shard(m)
opt = torch.optim.SGD(m.parameters(), lr=0.01)
x = torch.randn(8, 32); y = torch.randint(0, 4, (8,))
for _ in range(4):
    opt.zero_grad(); nn.functional.cross_entropy(m(x), y).backward(); opt.step()
dist.destroy_process_group()
