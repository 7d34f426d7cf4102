#!/usr/bin/env python3
"""A deterministic 48-block model for the capture-window tests.

Each block is Linear -> GELU -> Linear with a residual connection (module
paths "blocks.0" .. "blocks.47", children "fc1", "act", "fc2"). Training
is plain SGD on random data from fixed seeds, single-threaded, so two runs
of the same command create the same autograd nodes with the same sequence
numbers: a windowed run can be compared node by node with a full capture.

Options:
  --iters N          training iterations (one backward pass each)
  --progress FILE    rewrite FILE with the number of completed iterations
                     after each one (the daemon test arms a trigger while
                     training runs and needs to know where it was)
  --sleep S          seconds to sleep after each iteration
  --dist             join the torch.distributed (gloo) group from the
                     torchrun environment and all-reduce the gradients,
                     so the ranks step through iterations together
  --accum K          K micro-batches (K backward passes) per optimizer step
  --extra            per micro-batch also a torch.autograd.grad pass and a
                     second backward over the retained graph (passes that
                     are no iterations)
  --no-opt           no optimizer object: parameters updated by hand, so
                     iterations fall back to backward passes
  --compile BACKEND  torch.compile(model, backend=BACKEND)
  --spawn N          run N ranks with torch.multiprocessing.spawn (gloo,
                     DistributedDataParallel, no RANK in the environment)
  --amp-skip         step through a CPU torch.amp.GradScaler (torch 2.x)
                     whose second step overflows, so it skips that
                     optimizer step
Prints nothing on success (the agent must not either).
"""

import argparse
import os
import time

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, hidden, expand=2):
        super().__init__()
        self.fc1 = nn.Linear(hidden, hidden * expand)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden * expand, hidden)

    def forward(self, x):
        return x + self.fc2(self.act(self.fc1(x)))


class Net48(nn.Module):
    def __init__(self, d_in=16, hidden=16, n_blocks=48, n_out=4):
        super().__init__()
        self.proj = nn.Linear(d_in, hidden)
        self.blocks = nn.ModuleList(Block(hidden) for _ in range(n_blocks))
        self.head = nn.Linear(hidden, n_out)

    def forward(self, x):
        x = self.proj(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--progress")
    ap.add_argument("--sleep", type=float, default=0.0)
    ap.add_argument("--dist", action="store_true")
    ap.add_argument("--accum", type=int, default=1)
    ap.add_argument("--extra", action="store_true")
    ap.add_argument("--no-opt", action="store_true")
    ap.add_argument("--compile")
    ap.add_argument("--spawn", type=int, default=0)
    ap.add_argument("--amp-skip", action="store_true")
    args = ap.parse_args()
    if args.spawn:
        import torch.multiprocessing as mp
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
        mp.spawn(spawned, args=(args,), nprocs=args.spawn)
        return
    train(args)


def spawned(rank, args):
    import torch.distributed as dist
    dist.init_process_group("gloo", rank=rank, world_size=args.spawn)
    train(args, ddp=True)
    dist.barrier()
    dist.destroy_process_group()


def micro_batch(model, x, y, extra, scaler=None, overflow=False):
    loss = nn.functional.cross_entropy(model(x), y)
    if overflow:
        loss = loss * float("inf")
    if scaler is not None:
        loss = scaler.scale(loss)
    if extra:
        first = next(model.parameters())
        torch.autograd.grad(loss, [first], retain_graph=True)
        loss.backward(retain_graph=True)
    loss.backward()


def train(args, ddp=False):
    torch.set_num_threads(1)
    dist = None
    if args.dist:
        import torch.distributed as dist
        dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = Net48()
    if ddp:
        model = nn.parallel.DistributedDataParallel(model)
    if args.compile:
        model = torch.compile(model, backend=args.compile)
    opt = None
    if not args.no_opt:
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu") if args.amp_skip else None
    gen = torch.Generator().manual_seed(1)
    for it in range(args.iters):
        if opt is not None:
            opt.zero_grad()
        else:
            model.zero_grad()
        for _ in range(args.accum):
            x = torch.randn(8, 16, generator=gen)
            y = torch.randint(0, 4, (8,), generator=gen)
            micro_batch(model, x, y, args.extra, scaler, scaler is not None and it == 1)
        if dist is not None:
            for p in model.parameters():
                dist.all_reduce(p.grad)
        if scaler is not None:
            scaler.step(opt)
            scaler.update()
        elif opt is not None:
            opt.step()
        else:
            with torch.no_grad():
                for p in model.parameters():
                    p -= 0.01 * p.grad
        if args.progress:
            tmp = args.progress + ".tmp"
            with open(tmp, "w") as f:
                f.write("%d\n" % (it + 1))
            os.replace(tmp, args.progress)
        if args.sleep:
            time.sleep(args.sleep)
    if dist is not None:
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
