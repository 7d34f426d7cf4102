"""A training job steered from outside, for tests/e2e/t_cli_start_steps.sh.

  ctl_job.py MODE STOP_FILE
    MODE steps   an optimizer steps every iteration (iterations are steps);
         passes  no optimizer (iterations are backward passes);
         api     steps, and the job itself calls gradtrace.capture_start()
                 before step 5's forward and capture_stop() before step 9's.
Prints "step N" after every iteration; ends when STOP_FILE exists (or
after 3000 iterations). Each iteration pauses 10 ms, so a control sent
from outside lands at any point of an iteration, mostly between them.
"""
import os
import sys
import time

import torch
from torch import nn

import gradtrace

mode, stop = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 16), nn.GELU(), nn.Linear(16, 16),
                      nn.GELU(), nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=1e-3) if mode != "passes" else None
x = torch.randn(8, 16)
for step in range(3000):
    if mode == "api" and step == 5:
        gradtrace.capture_start()
    if mode == "api" and step == 9:
        gradtrace.capture_stop()
    if opt is not None:
        opt.zero_grad()
    model(x).sum().backward()
    if opt is not None:
        opt.step()
    print("step", step, flush=True)
    if os.path.exists(stop):
        break
    time.sleep(0.01)
