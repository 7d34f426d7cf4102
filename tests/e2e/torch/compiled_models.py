#!/usr/bin/env python3
"""Models for tests/e2e/t_torch2_compiled.sh (issue 26): each trained a
few steps compiled with inductor on CPU, printing its losses exactly
(float.hex), so that a run under gradtrace can be compared with a plain
one bit for bit.

Models, each a fresh root (the one before is collected, so every model's
layers have bare names):
  mlp      4 blocks (LayerNorm -> Linear -> GELU -> Linear, residual),
           blocks.2's hidden layer 16 times wider: the heaviest on purpose
  decoder  2 pre-norm decoder blocks: causal self-attention
           (scaled_dot_product_attention) and an MLP, LayerNorm each
  ckpt     3 blocks, blocks.1 activation-checkpointed inside the graph
  brk      3 blocks with a graph break inside blocks.1's forward
Modes: whole (torch.compile(model), fullgraph unless the model breaks),
block (each block compiled on its own, fullgraph), eager.

Usage: compiled_models.py CASE... (CASE = model:mode, e.g. mlp:whole)
GT_DEVICE=cuda trains on the GPU (Triton kernels; scripts/gpu-check.sh).
"""
import gc
import os
import sys

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

torch.set_num_threads(1)
W = 32
DEV = torch.device(os.environ.get("GT_DEVICE", "cpu"))
STEPS = 6
BATCH = 64


class Block(nn.Module):
    def __init__(self, w, mult=2):
        super().__init__()
        self.norm = nn.LayerNorm(w)
        self.up = nn.Linear(w, mult * w)
        self.down = nn.Linear(mult * w, w)

    def forward(self, x):
        return x + self.down(nn.functional.gelu(self.up(self.norm(x))))


class Attn(nn.Module):
    def __init__(self, w, heads=2):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(w, 3 * w)
        self.proj = nn.Linear(w, w)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        sh = lambda z: z.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        y = nn.functional.scaled_dot_product_attention(sh(q), sh(k), sh(v),
                                                       is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class Decoder(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.ln1 = nn.LayerNorm(w)
        self.attn = Attn(w)
        self.ln2 = nn.LayerNorm(w)
        self.mlp = Block(w)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return self.mlp(self.ln2(x))


class Ckpt(nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return checkpoint(self.inner, x, use_reentrant=False)


class Breaks(nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        x = self.inner(x)
        torch._dynamo.graph_break()
        return x * 1.0


class Net(nn.Module):
    def __init__(self, blocks, w, seq=False):
        super().__init__()
        self.blocks = nn.ModuleList(blocks)
        self.head = nn.Linear(w, 10)
        self.seq = seq

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.head(x.mean(1) if self.seq else x)


def build(name):
    if name == "mlp":
        return Net([Block(W, 32 if i == 2 else 2) for i in range(4)], W), False
    if name == "decoder":
        return Net([Decoder(W) for _ in range(2)], W, seq=True), True
    if name == "ckpt":
        return Net([Block(W), Ckpt(Block(W)), Block(W)], W), False
    if name == "brk":
        return Net([Block(W), Breaks(Block(W)), Block(W)], W), False
    raise SystemExit("unknown model %s" % name)


def run(case):
    name, mode = case.split(":")
    torch.manual_seed(0)
    model, seq = build(name)
    model = model.to(DEV)
    full = name != "brk"
    if mode == "whole":
        model = torch.compile(model, fullgraph=full)
    elif mode == "block":
        for i, b in enumerate(model.blocks):
            model.blocks[i] = torch.compile(b, fullgraph=full)
    elif mode != "eager":
        raise SystemExit("unknown mode %s" % mode)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(1)
    x = (torch.randn(8, 6, W, generator=g) if seq else
         torch.randn(BATCH, W, generator=g))
    y = torch.randint(0, 10, (x.shape[0],), generator=g)
    x, y = x.to(DEV), y.to(DEV)
    out = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        out.append(loss.item().hex())
    print("loss %s %s" % (case, " ".join(out)), flush=True)
    del model, opt
    gc.collect()


if __name__ == "__main__":
    for c in sys.argv[1:]:
        run(c)
