#!/usr/bin/env python3
"""Models for tests/e2e/t_trigger_exact.sh: windows against the full trace
on shapes model48.py does not have. Deterministic, single-threaded, SGD,
silent on success.

  gpt      GPT-2-like decoder: token and position embeddings, 3 blocks
           (ln_1, attn with c_attn/c_proj, ln_2, mlp with c_fc/GELU/
           c_proj, both residuals in the block), ln_f, an lm_head tied to
           the token embedding
  penalty  an MLP (4 blocks) trained with a gradient penalty: the input
           gradient by torch.autograd.grad(create_graph=True), its norm
           added to the loss (a double backward every step)
  conv     a small CNN: conv/BatchNorm/ReLU stages, a residual stage, a
           pooled linear head
  reuse    one block applied twice per forward with the same parameters
           (a weight-shared recurrence) between two plain blocks
  stacked  one block applied four times per forward with stacked
           parameters (functional_call over slices of a ParameterDict of
           [4, ...] tensors: the apply_layers/scan pattern)
  params   modules that own parameters and run no forward of their own:
           nn.MultiheadAttention's out_proj (used through F.linear) in
           two blocks, and a ParameterDict of scales on the root

usage: window_models.py MODEL [--iters N]
"""
import argparse

import torch
from torch import nn
import torch.nn.functional as F


class Attn(nn.Module):
    def __init__(self, d, heads=2):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        sh = lambda z: z.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        q, k, v = sh(q), sh(k), sh(v)
        a = (q @ k.transpose(-2, -1)) / (c // self.heads) ** 0.5
        mask = torch.ones(t, t).tril().bool()
        a = a.masked_fill(~mask, float("-inf")).softmax(-1)
        return self.c_proj((a @ v).transpose(1, 2).reshape(b, t, c))


class MLP(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.c_fc = nn.Linear(d, 4 * d)
        self.act = nn.GELU()
        self.c_proj = nn.Linear(4 * d, d)

    def forward(self, x):
        return self.c_proj(self.act(self.c_fc(x)))


class GPTBlock(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = Attn(d)
        self.ln_2 = nn.LayerNorm(d)
        self.mlp = MLP(d)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab=50, d=16, n=3, t=8):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(t, d)
        self.h = nn.ModuleList(GPTBlock(d) for _ in range(n))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for b in self.h:
            x = b(x)
        return self.lm_head(self.ln_f(x))


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc1 = nn.Linear(d, 2 * d)
        self.act = nn.Tanh()  # twice differentiable
        self.fc2 = nn.Linear(2 * d, d)

    def forward(self, x):
        return x + self.fc2(self.act(self.fc1(x)))


class Penalty(nn.Module):
    def __init__(self, d=12, n=4):
        super().__init__()
        self.blocks = nn.ModuleList(Block(d) for _ in range(n))
        self.head = nn.Linear(d, 1)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x)


class Stage(nn.Module):
    def __init__(self, cin, cout, residual=False):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(cout)
        self.residual = residual

    def forward(self, x):
        y = F.relu(self.bn(self.conv(x)))
        return x + y if self.residual else y


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer1 = Stage(3, 8)
        self.layer2 = Stage(8, 8, residual=True)
        self.layer3 = Stage(8, 16)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(x.mean((2, 3)))


class MHABlock(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, 2, batch_first=True)
        self.fc = nn.Linear(d, d)

    def forward(self, x):
        h = self.ln(x)
        a, _ = self.attn(h, h, h, need_weights=False)
        return x + self.fc(a)


class Params(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.blocks = nn.ModuleList([MHABlock(d), MHABlock(d)])
        self.scale = nn.ParameterDict({"g": nn.Parameter(torch.ones(d))})
        self.head = nn.Linear(d, 3)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x * self.scale["g"]).mean(1)


try:
    from torch.func import functional_call
except ImportError:  # torch 1.13
    from torch.nn.utils.stateless import functional_call


class StackedLayers(nn.Module):
    def __init__(self, n=4, d=12):
        super().__init__()
        self.layer = Block(d)
        self.w = nn.ParameterDict({
            k.replace(".", "_"): nn.Parameter(torch.stack(
                [p.detach().clone() + 0.01 * i for i in range(n)]))
            for k, p in self.layer.named_parameters()})
        self.n = n
        self.head = nn.Linear(d, 3)

    def forward(self, x):
        names = [k for k, _ in self.layer.named_parameters()]
        for i in range(self.n):
            x = functional_call(self.layer, {k: self.w[k.replace(".", "_")][i]
                                             for k in names}, (x,))
        return self.head(x)


class Reuse(nn.Module):
    def __init__(self, d=12):
        super().__init__()
        self.inp = Block(d)
        self.shared = Block(d)
        self.out = Block(d)
        self.head = nn.Linear(d, 3)

    def forward(self, x):
        x = self.inp(x)
        x = self.shared(self.shared(x))
        return self.head(self.out(x))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model", choices=["gpt", "penalty", "conv", "reuse", "params",
                                      "stacked"])
    ap.add_argument("--iters", type=int, default=4)
    a = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(1)
    if a.model == "gpt":
        model = GPT()
        x = torch.randint(0, 50, (4, 8), generator=g)
        y = torch.randint(0, 50, (4, 8), generator=g)
        loss_fn = lambda: F.cross_entropy(model(x).flatten(0, 1), y.flatten())
    elif a.model == "penalty":
        model = Penalty()
        x = torch.randn(16, 12, generator=g)
        y = torch.randn(16, 1, generator=g)

        def loss_fn():
            xi = x.clone().requires_grad_(True)
            out = model(xi)
            gx, = torch.autograd.grad(out.sum(), xi, create_graph=True)
            return F.mse_loss(out, y) + 0.1 * gx.pow(2).sum(1).mean()
    elif a.model == "conv":
        model = CNN()
        x = torch.randn(4, 3, 8, 8, generator=g)
        y = torch.randint(0, 10, (4,), generator=g)
        loss_fn = lambda: F.cross_entropy(model(x), y)
    elif a.model == "stacked":
        model = StackedLayers()
        x = torch.randn(8, 12, generator=g)
        y = torch.randint(0, 3, (8,), generator=g)
        loss_fn = lambda: F.cross_entropy(model(x), y)
    elif a.model == "params":
        model = Params()
        x = torch.randn(4, 5, 16, generator=g)
        y = torch.randint(0, 3, (4,), generator=g)
        loss_fn = lambda: F.cross_entropy(model(x), y)
    else:
        model = Reuse()
        x = torch.randn(8, 12, generator=g)
        y = torch.randint(0, 3, (8,), generator=g)
        loss_fn = lambda: F.cross_entropy(model(x), y)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(a.iters):
        opt.zero_grad()
        loss_fn().backward()
        opt.step()


if __name__ == "__main__":
    main()
