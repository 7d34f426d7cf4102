#!/usr/bin/env python3
"""The gradtrace demo model: an input projection followed by two identical
custom blocks (Linear -> GELU -> Linear, with a residual connection), trained
on random data for a few iterations on the CPU.

Run it under the profiler to get per-layer forward and backward spans:

    gradtrace record -- /usr/bin/python3 examples/train_small.py

Nothing here knows about gradtrace: the layer names in the trace
("proj", "blocks.0", "blocks.0.fc1", ...) come from the module tree.
The module is also imported by the end-to-end tests (build_model, train).
"""

import argparse

import torch
from torch import nn


class Block(nn.Module):
    """Linear -> GELU -> Linear with a residual connection."""

    def __init__(self, hidden, expand=4):
        super().__init__()
        self.fc1 = nn.Linear(hidden, hidden * expand)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden * expand, hidden)

    def forward(self, x):
        return x + self.fc2(self.act(self.fc1(x)))


class SmallNet(nn.Module):
    def __init__(self, d_in=32, hidden=64, n_blocks=2, n_out=10):
        super().__init__()
        self.proj = nn.Linear(d_in, hidden)
        self.blocks = nn.ModuleList(Block(hidden) for _ in range(n_blocks))
        self.head = nn.Linear(hidden, n_out)

    def forward(self, x):
        x = self.proj(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def build_model(seed=0, **kw):
    torch.manual_seed(seed)
    return SmallNet(**kw)


def train(model, iters=3, batch=16, lr=0.05, seed=1):
    """Plain SGD on random data; returns the losses."""
    gen = torch.Generator().manual_seed(seed)
    d_in = model.proj.in_features
    n_out = model.head.out_features
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for _ in range(iters):
        x = torch.randn(batch, d_in, generator=gen)
        y = torch.randint(0, n_out, (batch,), generator=gen)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--batch", type=int, default=16)
    args = ap.parse_args()
    torch.set_num_threads(1)
    losses = train(build_model(), iters=args.iters, batch=args.batch)
    print("losses: " + " ".join("%.4f" % l for l in losses))


if __name__ == "__main__":
    main()
