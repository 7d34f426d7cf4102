#!/usr/bin/env python3
"""FSDP1 (FullyShardedDataParallel) on CPU with gloo, for
tests/e2e/t_torch2_fsdp.sh: the three blocks of fsdp2_model.py each
wrapped on its own, then the root (whose flat parameter holds head's);
SGD, four steps, under torchrun. Silent on success."""
import os, torch, torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
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
for i in range(3): m.blocks[i] = FSDP(m.blocks[i], device_id=torch.device("cpu"))
m = FSDP(m, device_id=torch.device("cpu"))
opt = torch.optim.SGD(m.parameters(), lr=0.01)
x = torch.randn(8, 32); y = torch.randint(0, 4, (8,))
for _ in range(4):
    opt.zero_grad(); nn.functional.cross_entropy(m(x), y).backward(); opt.step()
dist.destroy_process_group()
