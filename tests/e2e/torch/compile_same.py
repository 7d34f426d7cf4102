"""torch.compile gives the same graphs with gradtrace as without it
(issue 23 item 1, torch 2.x): run once plain, once per agent state, and
t_torch2_compile.sh compares the outputs.

  compile_same.py OUT.json

For each case a tiny model (MLP blocks: Linear, GELU, Linear, residual)
is compiled with fullgraph=True and trained a few steps; a backend of our
own records every graph dynamo hands it (its nodes' op and target), and
dynamo's counters give the graph breaks and the recompilations. Cases:

  whole     torch.compile(model), whole model
  blocks    each block torch.compile'd and put back (torchtitan's way)
  method    model.compile(), per block: nn.Module.compile()
  toggled   whole model while capture goes on and off between steps
            (gradtrace.capture_start/stop: the hooks go in and out at
            the optimizer steps; no-ops without the agent)
  late      model compiled (and run) before the package's hooks went in,
            then run on with capture started; then a new model compiled
            with the hooks in, after torch._dynamo was imported
  super     a block whose class overrides __call__ and calls
            super().__call__ (dynamo reads nn.Module.__call__ raw there)

The order matters: with the agent idle (GRADTRACE_CAPTURE=0) "late" is
the first moment hooks go in. Writes {case: {"graphs": [[[op, target],
...], ...], "breaks": n, "ok": true}} and "call": whether
nn.Module.__call__ was the package's during the cases; exits 1 when a
case raises (a fullgraph failure).
"""
import json
import os
import sys
import traceback

import torch
from torch import nn

try:
    import gradtrace
    capture_start, capture_stop = gradtrace.capture_start, gradtrace.capture_stop
except ImportError:  # the plain run
    gradtrace = None
    capture_start = capture_stop = lambda: None  # noqa: E731

import torch._dynamo  # noqa: E402
from torch._dynamo.utils import counters  # noqa: E402

graphs = []
CAPTURING = os.environ.get("GRADTRACE_CAPTURE") == "1"


def restore():
    """Capture back as the run started (for the cases after)."""
    (capture_start if CAPTURING else capture_stop)()


def backend(gm, example_inputs):
    graphs.append([[n.op, str(n.target)] for n in gm.graph.nodes])
    return gm.forward


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(8, 16)
        self.act = nn.GELU()
        self.down = nn.Linear(16, 8)

    def forward(self, x):
        return x + self.down(self.act(self.up(x)))


class SuperBlock(Block):
    # As transformers' GradientCheckpointingLayer does.
    def __call__(self, *args, **kwargs):
        return super().__call__(*args, **kwargs)


class Net(nn.Module):
    def __init__(self, block=Block, n=2):
        super().__init__()
        self.blocks = nn.ModuleList([block() for _ in range(n)])

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x.pow(2).mean()


def train(model, steps, x, between=None):
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    for i in range(steps):
        if between:
            between(i)
        opt.zero_grad()
        model(x).backward()
        opt.step()


def per_block(net, how):
    for i, b in enumerate(net.blocks):
        if how == "torch.compile":
            net.blocks[i] = torch.compile(b, backend=backend, fullgraph=True)
        else:
            b.compile(backend=backend, fullgraph=True)
    return net


def case_whole(x):
    net = Net()
    train(torch.compile(net, backend=backend, fullgraph=True), 3, x)


def case_blocks(x):
    train(per_block(Net(), "torch.compile"), 3, x)


def case_method(x):
    train(per_block(Net(), "method"), 3, x)


def case_toggled(x):
    def between(i):
        (capture_start if i in (1, 3) else capture_stop)()
    net = Net()
    train(torch.compile(net, backend=backend, fullgraph=True), 6, x, between)
    restore()


def case_late(x):
    net = Net()
    compiled = torch.compile(net, backend=backend, fullgraph=True)
    train(compiled, 2, x)
    train(compiled, 2, x, lambda i: capture_start() if i == 0 else None)
    net2 = Net()
    train(torch.compile(net2, backend=backend, fullgraph=True), 2, x)
    restore()
    train(net2, 1, x)   # an eager step: the hooks go out at its boundary


def case_super(x):
    net = Net(SuperBlock)
    train(torch.compile(net, backend=backend, fullgraph=True), 3, x)


CASES = [("whole", case_whole), ("blocks", case_blocks),
         ("method", case_method), ("toggled", case_toggled),
         ("late", case_late), ("super", case_super)]


def ours():
    if gradtrace is None:
        return False
    import gradtrace._switch as W
    return nn.Module.__call__ is W._call_wrapper


def main():
    torch.manual_seed(0)
    x = torch.randn(4, 8)
    out, failed, seen_ours = {}, False, False
    for name, fn in CASES:
        torch._dynamo.reset()
        counters.clear()
        del graphs[:]
        try:
            fn(x)
            ok = True
        except Exception:
            traceback.print_exc()
            ok, failed = False, True
        seen_ours = seen_ours or ours()
        out[name] = {
            "graphs": list(graphs),
            "breaks": sum(counters["graph_break"].values()),
            "ok": ok,
        }
    out["call"] = seen_ours
    with open(sys.argv[1], "w") as f:
        json.dump(out, f)
    sys.exit(1 if failed else 0)


main()
