"""Workloads for the report and diff tests (tests/e2e/t_report_*.sh):
MODEL ITERS [--slow LAYER] [--sleep-ms MS].

  demo      examples/train_small.py's SmallNet
  resnet18  torchvision's resnet18, batch 2, 32x32 inputs
  mine      this file's own model: an embedding, a checkpointed block
            (recompute spans), a wide linear whose backward dominates and
            a ModuleList container

--slow LAYER makes that module's forward slower on purpose (a sleep after
it), so that `gradtrace diff` must flag it and nothing else.
"""
import argparse
import os
import sys
import time

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


class Inner(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.act = nn.Tanh()

    def forward(self, x):
        return self.act(self.fc(x))


class Mine(nn.Module):
    def __init__(self, vocab=64, d=32):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.ck = Inner(d)
        self.stack = nn.ModuleList(Inner(d) for _ in range(2))
        self.wide = nn.Linear(d, 512)
        self.out = nn.Linear(512, 10)

    def forward(self, idx):
        x = self.emb(idx).mean(1)
        x = checkpoint(self.ck, x)
        for m in self.stack:
            x = m(x)
        return self.out(self.wide(x).relu())


def build(name):
    torch.manual_seed(0)
    if name == "demo":
        sys.path.insert(0, os.path.join(ROOT, "examples"))
        import train_small
        model = train_small.build_model()
        return model, lambda: torch.randn(16, 32), 10
    if name == "resnet18":
        import torchvision
        model = torchvision.models.resnet18(num_classes=10)
        return model, lambda: torch.randn(2, 3, 32, 32), 10
    model = Mine()
    x = lambda: torch.randint(0, 64, (8, 6))
    return model, x, 10


def slow_down(model, path, ms):
    mod = dict(model.named_modules())[path]
    fwd = mod.forward

    def slowed(*args, **kw):
        out = fwd(*args, **kw)
        time.sleep(ms / 1e3)
        return out
    mod.forward = slowed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("iters", type=int)
    ap.add_argument("--slow")
    ap.add_argument("--sleep-ms", type=float, default=20)
    a = ap.parse_args()
    torch.set_num_threads(1)
    model, data, n_out = build(a.model)
    if a.slow:
        slow_down(model, a.slow, a.sleep_ms)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(a.iters):
        x = data()
        y = torch.randint(0, n_out, (x.shape[0],))
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
