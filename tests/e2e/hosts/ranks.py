"""A small data-parallel job for the multi-"host" tests: each rank trains
a tiny model (DDP over gloo), and after every step calls all_reduce and,
every other step, barrier; before collective k, rank k % world sleeps a
little, so that each rank is sometimes the last to arrive (which is what
tightens the clock bounds `gradtrace merge` derives).

usage: ranks.py STEPS   (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set)
"""
import os
import select
import sys
import time

import torch
import torch.distributed as dist


def pause(seconds):
    # select, not time.sleep: libfaketime 0.9.10 (which the tests use to
    # shift CLOCK_REALTIME per "host") makes the clock_nanosleep behind
    # time.sleep fail with EINVAL when it leaves CLOCK_MONOTONIC alone.
    if seconds > 0:
        select.select([], [], [], seconds)


# torch.distributed's store-based barrier sleeps between its polls.
time.sleep = pause


def main():
    steps = int(sys.argv[1])
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 4))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    k = 0
    for step in range(steps):
        x = torch.randn(8, 16)
        loss = ddp(x).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        for _ in range(2 if step % 2 == 0 else 1):
            if k % world == rank:
                pause(0.002)
            if k % 3 == 2:
                dist.barrier()
            else:
                t = torch.ones(1)
                dist.all_reduce(t)
            k += 1
        delay = float(os.environ.get("RANKS_STEP_SLEEP", "0"))
        if delay:
            pause(delay)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
