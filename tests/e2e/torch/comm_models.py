"""Models that communicate inside their backward, for
tests/e2e/t_torch_comm.sh (torch 1.13 and 2.x, gloo, CPU):

  comm_models.py ddp      two DDP ranks (torch.multiprocessing.spawn) of a
                          conv/embedding/norm/linear model, small buckets
                          (several all-reduces per step), 2 micro-batches
                          per step under no_sync, then one that syncs
  comm_models.py tp       two ranks, no DDP: a "row-parallel" linear whose
                          backward all-reduces its input gradient from
                          Python (a custom autograd Function)
  comm_models.py plain    the DDP model, one process, no communication

Nothing is printed on success. Steps are few: the test reads the traces.
"""

import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

STEPS = 4


class Stem(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(4, 8, 3, padding=1)
        self.norm = nn.GroupNorm(2, 8)

    def forward(self, x):
        return F.gelu(self.norm(self.conv(x)))


class Tower(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(32, 8)
        self.stem = Stem()
        self.mix = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 16))
        self.ln = nn.LayerNorm(16)
        self.out = nn.Linear(16, 3)

    def forward(self, tokens, signal):
        e = self.embed(tokens).mean(1)                  # (B, 8)
        s = self.stem(signal).mean(2)                   # (B, 8)
        h = torch.cat([e, s], 1)
        return self.out(self.ln(h + self.mix(h)))


def batch(g):
    return (torch.randint(0, 32, (6, 5), generator=g),
            torch.randn(6, 4, 10, generator=g), torch.randint(0, 3, (6,), generator=g))


def ddp_rank(rank, world, init):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(Tower(), bucket_cap_mb=0.004)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(rank)
    for _ in range(STEPS):
        opt.zero_grad()
        with model.no_sync():
            t, s, y = batch(g)
            F.cross_entropy(model(t, s), y).backward()
        t, s, y = batch(g)
        F.cross_entropy(model(t, s), y).backward()
        opt.step()
    dist.barrier()
    dist.destroy_process_group()


class AllReduceGrad(torch.autograd.Function):
    """Identity forward; backward sums the gradient over the ranks (the
    input gradient of a row-parallel linear)."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        g = g.clone()
        dist.all_reduce(g)
        return g


class RowParallel(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(12, 12)

    def forward(self, x):
        return self.fc(AllReduceGrad.apply(x))


class TpNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(6, 12)
        self.par = nn.ModuleList([RowParallel() for _ in range(2)])
        self.head = nn.Linear(12, 1)

    def forward(self, x):
        x = torch.relu(self.inp(x))
        for p in self.par:
            x = torch.relu(p(x))
        return self.head(x)


def tp_rank(rank, world, init):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    torch.manual_seed(0)
    model = TpNet()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(STEPS):
        opt.zero_grad()
        model(torch.randn(5, 6)).pow(2).mean().backward()
        opt.step()
    dist.barrier()
    dist.destroy_process_group()


def plain():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = Tower()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(0)
    for _ in range(STEPS):
        opt.zero_grad()
        t, s, y = batch(g)
        F.cross_entropy(model(t, s), y).backward()
        opt.step()


def main(mode):
    if mode == "plain":
        plain()
        return
    fn = {"ddp": ddp_rank, "tp": tp_rank}[mode]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    torch.multiprocessing.spawn(fn, args=(2, "tcp://127.0.0.1:%d" % port),
                                nprocs=2)


if __name__ == "__main__":
    main(sys.argv[1])
