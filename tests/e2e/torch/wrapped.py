"""Wrapped models for tests/e2e/t_torch_ddp.sh.

  wrapped.py dist            one rank of DDP (gloo), rank from the
                             environment (torch.distributed.run)
  wrapped.py spawn           two DDP ranks under torch.multiprocessing.spawn
                             (no RANK in their environment)
  wrapped.py compile         torch.compile(model, backend="aot_eager")
  wrapped.py ckpt            a checkpoint_wrapper'ed block, run eagerly

Every model is Net: blocks.0..2 (Block: up, a Linear) and head. Nothing
is printed on success."""

import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.nn as nn

STEPS = 4


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(8, 8)

    def forward(self, x):
        return torch.relu(self.up(x))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block() for _ in range(3)])
        self.head = nn.Linear(8, 1)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)


def train(model):
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(STEPS):
        opt.zero_grad()
        model(torch.randn(4, 8)).sum().backward()
        opt.step()


def ddp(rank, world, init):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank,
                            world_size=world)
    torch.manual_seed(0)
    train(nn.parallel.DistributedDataParallel(Net()))
    dist.barrier()
    dist.destroy_process_group()


def main(mode):
    torch.manual_seed(0)
    if mode == "dist":
        ddp(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), "env://")
    elif mode == "spawn":
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        init = "tcp://127.0.0.1:%d" % s.getsockname()[1]
        s.close()
        torch.multiprocessing.spawn(ddp, args=(2, init), nprocs=2)
    elif mode == "compile":
        train(torch.compile(Net(), backend="aot_eager"))
    elif mode == "ckpt":
        from torch.distributed.algorithms._checkpoint.checkpoint_wrapper \
            import checkpoint_wrapper
        m = Net()
        m.blocks[1] = checkpoint_wrapper(m.blocks[1])
        train(m)
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main(sys.argv[1])
