"""A data-parallel job for the job-wide trigger test: DDP over gloo,
STEPS optimizer steps, each followed by an all_reduce of the loss (as a
job logging its mean loss does; before it, rank step % world waits a
little, so that each rank is sometimes the last to arrive), and
RANKS_STEP_SLEEP seconds between steps (so that a trigger sent while it
runs lands well before the end). Rank 0 writes "ready" to READY_FILE
after its first step, so the test knows when the job runs.

usage: trig.py STEPS READY_FILE
"""
import os
import select
import sys
import time

import torch
import torch.distributed as dist


def pause(seconds):
    # select, not time.sleep: libfaketime 0.9.10 makes time.sleep's
    # clock_nanosleep fail (EINVAL) when it leaves CLOCK_MONOTONIC alone.
    if seconds > 0:
        select.select([], [], [], seconds)


time.sleep = pause


def main():
    steps, ready = int(sys.argv[1]), sys.argv[2]
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 4))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    delay = float(os.environ.get("RANKS_STEP_SLEEP", "0.05"))
    for step in range(steps):
        loss = ddp(torch.randn(8, 16)).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % dist.get_world_size() == dist.get_rank():
            pause(0.002)
        dist.all_reduce(loss.detach())
        if step == 0 and dist.get_rank() == 0:
            with open(ready, "w") as f:
                f.write("ready\n")
        pause(delay)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
