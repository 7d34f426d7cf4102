"""Runs one large-model training recipe with the gradtrace agent preloaded
and writes torch's own view of it (the ground truth) as JSON, for
check_recipes.py to compare with the .gtr the agent wrote.

Recipes (CASE), each on a model built here for it:
  ckpt_reentrant     torch.utils.checkpoint(use_reentrant=True) on some
                     blocks of a residual MLP stack
  ckpt_nonreentrant  use_reentrant=False, called from inside a block's
                     forward around a sub-module (attention-like blocks)
  ckpt_nested        reentrant checkpoints nested in reentrant ones, and
                     a non-reentrant one around a function of two modules
  ckpt_seq           checkpoint_sequential over transformer layers, and a
                     non-reentrant checkpoint of one
  gradpen            a gradient penalty: torch.autograd.grad with
                     create_graph=True on a conv net, then backward
                     through the double-backward graph; the input is a
                     leaf that accumulates a gradient too
  retain             loss.backward(retain_graph=True), then again
  reuse              a module called twice in one forward, one module
                     object shared by every block, tied weights (one
                     Parameter owned by two modules)
  gan                two nn.Sequential roots (generator, discriminator)

Ground truth, all from the same process and run:
  - torch.autograd.profiler.profile(use_kineto=False): each module forward
    is wrapped in a record_function range "gtmod::<name>" by per-module
    hooks installed here, with the names python/gradtrace/_modules.py
    documents (first root bare, later roots under a unique prefix). Forward
    ops carry (thread, sequence_nr): the last op that started with a pair
    created that node; its innermost gtmod range is its layer call, and
    its innermost enclosing "evaluate_function" event is the backward node
    running while it was created (recompute, double backward); an op of a
    backward pass (a "gtpass" range) outside every such event is the
    engine summing a node's outputs after it ran, inside the last node
    that ended. A gtmod range inside an evaluate_function event is a
    recomputed call;
  - every parameter (named_parameters(): the owner is the module path
    before the last dot) gets a tensor hook that opens and closes a
    gradtrace user scope "<owner>|<name>" inside its AccumulateGrad node;
    input leaves get "leaf|". So the trace itself says which parameter
    each AccumulateGrad node accumulated.

Usage: recipes.py CASE OUT.json
"""

import json
import os
import sys

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

import gradtrace
from nesting import inside, innermost

torch.set_num_threads(1)
profiler = torch.autograd.profiler
EVAL = "autograd::engine::evaluate_function: "


def names_of(model, prefix=""):
    out = {}
    for path, m in model.named_modules():
        if prefix:
            out[m] = prefix + "." + path if path else prefix
        else:
            out[m] = path or type(model).__name__
    return out


def add_range_hooks(model, prefix=""):
    names = names_of(model, prefix)
    stack = []

    def pre(m, args):
        rf = profiler.record_function("gtmod::" + names[m])
        rf.__enter__()
        stack.append(rf)

    def post(m, args, out):
        stack.pop().__exit__(None, None, None)

    for m in names:
        m.register_forward_pre_hook(pre)
        try:  # 2.x: also when a recompute stops early by raising
            m.register_forward_hook(post, always_call=True)
        except TypeError:
            m.register_forward_hook(post)


def scope_hook(name):
    def hook(grad):
        with gradtrace.scope(name):
            pass
    return hook


def add_param_hooks(model, prefix=""):
    root = prefix or type(model).__name__
    owners = {}
    for path, p in model.named_parameters():
        mpath, _, pname = path.rpartition(".")
        if prefix:
            owner = prefix + "." + mpath if mpath else prefix
        else:
            owner = mpath or root
        owners[path] = owner + "|" + pname
        p.register_hook(scope_hook(owner + "|" + pname))
    return owners


def instrument(model, prefix="", extra=None):
    """Range and parameter hooks; with extra, also records the root's
    name ("roots", in order) and every "<owner>|<name>" of its
    named_parameters() ("params") for check_trace.py."""
    add_range_hooks(model, prefix)
    owners = add_param_hooks(model, prefix)
    if extra is not None:
        extra.setdefault("roots", []).append(prefix or type(model).__name__)
        extra.setdefault("params", []).extend(owners.values())
    return owners


# ---------------------------------------------------------------- models

class MLPBlock(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.up = nn.Linear(d, h)
        self.act = nn.GELU()
        self.down = nn.Linear(h, d)

    def forward(self, x):
        return x + self.down(self.act(self.up(x)))


class Stack(nn.Module):
    def __init__(self, d=12, h=20, n=4, ckpt=(1, 2, 3)):
        super().__init__()
        self.inp = nn.Linear(6, d)
        self.blocks = nn.ModuleList([MLPBlock(d, h) for _ in range(n)])
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, 1)
        self.ckpt = set(ckpt)

    def forward(self, x):
        x = self.inp(x)
        for i, b in enumerate(self.blocks):
            if i in self.ckpt:
                x = checkpoint(b, x, use_reentrant=True)
            else:
                x = b(x)
        return self.head(self.norm(x))


class Mixer(nn.Module):
    """Attention-like token mixing, then an MLP the block checkpoints."""

    def __init__(self, d):
        super().__init__()
        self.qk = nn.Linear(d, 2 * d, bias=False)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        q, k = self.qk(x).chunk(2, dim=-1)
        w = torch.softmax(q @ k.transpose(-1, -2), dim=-1)
        return self.proj(w @ x)


class AttnBlock(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.mix = Mixer(d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.SiLU(),
                                 nn.Linear(2 * d, d))

    def forward(self, x):
        x = x + checkpoint(self.mix, self.ln(x), use_reentrant=False)
        return x + checkpoint(self.mlp, x, use_reentrant=False)


class Encoder(nn.Module):
    def __init__(self, d=8, n=3):
        super().__init__()
        self.layers = nn.Sequential(*[AttnBlock(d) for _ in range(n)])
        self.out = nn.Linear(d, 3)

    def forward(self, x):
        return self.out(self.layers(x)).mean(1)


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(2, 4, 3), nn.ReLU(),
                                      nn.Conv2d(4, 4, 3), nn.Tanh())
        self.flat = nn.Flatten()
        self.score = nn.Linear(4 * 2 * 2, 1)
        self.temp = nn.Parameter(torch.tensor(0.7))  # the root's own

    def forward(self, x):
        h = self.flat(self.features(x))
        # score's weight is used by score and, directly, by the root.
        return self.score(h) * self.temp + h @ self.score.weight.t()


class Tied(nn.Module):
    """Shared act module in every block, a module called twice, tied
    embedding/output weights."""

    def __init__(self, vocab=11, d=10, n=3):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.shared_act = nn.Tanh()
        self.blocks = nn.ModuleList()
        for _ in range(n):
            b = nn.Module()
            b.fc = nn.Linear(d, d)
            b.act = self.shared_act  # the same object in every block
            self.blocks.append(b)
        self.twice = nn.Linear(d, d)
        self.out = nn.Linear(d, vocab, bias=False)
        self.out.weight = self.emb.weight  # owned by emb (named first)

    def forward(self, tok):
        x = self.emb(tok)
        for b in self.blocks:
            x = b.act(b.fc(x))
        x = self.twice(self.twice(x) * 0.5)
        return self.out(x)


class Outer(nn.Module):
    """Checkpoints its own sub-module, and is checkpointed itself."""

    def __init__(self, d):
        super().__init__()
        self.pre = nn.Linear(d, d)
        self.inner = nn.Sequential(nn.Linear(d, d), nn.Sigmoid())
        self.post = nn.Linear(d, d)

    def forward(self, x):
        x = checkpoint(self.inner, self.pre(x), use_reentrant=True)
        return self.post(x)


class Nest(nn.Module):
    def __init__(self, d=9):
        super().__init__()
        self.stem = nn.Linear(5, d)
        self.outers = nn.ModuleList([Outer(d) for _ in range(2)])
        self.pair = nn.ModuleList([nn.Linear(d, d), nn.ELU()])

    def forward(self, x):
        x = self.stem(x)
        for o in self.outers:
            x = checkpoint(o, x, use_reentrant=True)
        # A function, not a module, recomputes two modules.
        x = checkpoint(lambda t: self.pair[1](self.pair[0](t)), x,
                       use_reentrant=False)
        return x.sum(-1)


# ---------------------------------------------------------------- recipes

def backward(loss, **kw):
    """loss.backward() inside a "gtpass" range: ops in it but outside any
    backward node are the engine's own (summing gradients for the next
    node after the previous one ran)."""
    with profiler.record_function("gtpass"):
        loss.backward(**kw)


# extra["ckpt"] (check_trace.py): {module path: recomputes per forward call}
# for each checkpointed module; a module under one is recomputed as often
# as its nearest listed ancestor. Recipes without it recompute nothing.


def sgd(*models):
    ps = [p for m in models for p in m.parameters()]
    return torch.optim.SGD(ps, lr=0.01)


def run_ckpt_reentrant(extra):
    model = Stack()
    instrument(model, extra=extra)
    extra["ckpt"] = {"blocks.%d" % i: 1 for i in model.ckpt}
    opt = sgd(model)
    x = torch.randn(5, 6)
    for _ in range(2):
        opt.zero_grad()
        backward(model(x).pow(2).mean())
        opt.step()


def run_ckpt_nonreentrant(extra):
    model = Encoder()
    instrument(model, extra=extra)
    extra["ckpt"] = {"layers.%d.%s" % (i, m): 1
                     for i in range(len(model.layers)) for m in ("mix", "mlp")}
    opt = sgd(model)
    x = torch.randn(2, 5, 8)
    for _ in range(2):
        opt.zero_grad()
        backward(model(x).pow(2).sum())
        opt.step()


def run_ckpt_nested(extra):
    model = Nest()
    instrument(model, extra=extra)
    # Each outer is recomputed once; its inner once inside that recompute
    # (reentrant recomputes run the inner checkpoint's forward too) and
    # once more by its own checkpoint node.
    extra["ckpt"] = {"pair.0": 1, "pair.1": 1}
    for i in range(len(model.outers)):
        extra["ckpt"]["outers.%d" % i] = 1
        extra["ckpt"]["outers.%d.inner" % i] = 2
    opt = sgd(model)
    x = torch.randn(4, 5)
    for _ in range(2):
        opt.zero_grad()
        backward(model(x).pow(2).mean())
        opt.step()


class SeqNet(nn.Module):
    """checkpoint_sequential over transformer layers and norms (reentrant,
    the default both versions accept), then a non-reentrant checkpoint
    of a whole TransformerEncoderLayer."""

    def __init__(self, d=8):
        super().__init__()
        layer = lambda ff: nn.TransformerEncoderLayer(
            d, 2, dim_feedforward=ff, dropout=0.0, batch_first=True)
        self.body = nn.Sequential(layer(16), nn.LayerNorm(d), layer(12),
                                  nn.Linear(d, d))
        self.tail = layer(8)

    def forward(self, x):
        from torch.utils.checkpoint import checkpoint_sequential
        h = checkpoint_sequential(self.body, 2, x)
        return checkpoint(self.tail, h, use_reentrant=False)


def run_ckpt_seq(extra):
    model = SeqNet()
    instrument(model, extra=extra)
    # checkpoint_sequential(body, 2): the first segment is checkpointed,
    # the last one runs plainly; body itself is never called.
    extra["ckpt"] = {"body.0": 1, "body.1": 1, "tail": 1}
    opt = sgd(model)
    x = torch.randn(2, 3, 8, requires_grad=True)
    for _ in range(2):
        opt.zero_grad()
        backward(model(x).pow(2).mean())
        opt.step()


def run_gradpen(extra):
    model = Critic()
    instrument(model, extra=extra)
    opt = sgd(model)
    for _ in range(2):
        x = torch.randn(3, 2, 6, 6, requires_grad=True)
        x.register_hook(scope_hook("leaf|"))
        opt.zero_grad()
        out = model(x)
        with profiler.record_function("gtpass"):
            g, = torch.autograd.grad(out.sum(), x, create_graph=True)
        pen = (g.flatten(1).norm(dim=1) - 1).pow(2).mean()
        backward(out.mean() + 10 * pen)
        opt.step()


def run_retain(extra):
    model = nn.Sequential(nn.Linear(7, 9), nn.Tanh(), nn.Linear(9, 4),
                          nn.Softplus(), nn.Linear(4, 1))
    instrument(model, extra=extra)
    opt = sgd(model)
    x = torch.randn(6, 7)
    for _ in range(2):
        opt.zero_grad()
        loss = model(x).pow(2).mean()
        backward(loss, retain_graph=True)
        backward(loss)
        opt.step()


def run_reuse(extra):
    model = Tied()
    instrument(model, extra=extra)
    # Called more than once per pass, between other layers' nodes: their
    # backward time must be their nodes' time, below their wall span.
    extra["reused"] = ["shared_act", "twice"]
    opt = sgd(model)
    tok = torch.randint(0, 11, (4, 3))
    for _ in range(2):
        opt.zero_grad()
        backward(nn.functional.cross_entropy(model(tok).flatten(0, 1),
                                             tok.flatten()))
        opt.step()


def run_gan(extra):
    g = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 6))
    d = nn.Sequential(nn.Linear(6, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))
    # The generator runs first: it is the bare root, the discriminator the
    # second root of the same class.
    instrument(g, extra=extra)
    instrument(d, "Sequential#2", extra)
    og, od = sgd(g), sgd(d)
    real = torch.randn(5, 6)
    for _ in range(2):
        fake = g(torch.randn(5, 4))
        od.zero_grad()
        backward(d(real).mean() - d(fake.detach()).mean())
        od.step()
        og.zero_grad()
        backward(d(fake).mean())
        og.step()


CASES = {
    "ckpt_reentrant": run_ckpt_reentrant,
    "ckpt_nonreentrant": run_ckpt_nonreentrant,
    "ckpt_nested": run_ckpt_nested,
    "ckpt_seq": run_ckpt_seq,
    "gradpen": run_gradpen,
    "retain": run_retain,
    "reuse": run_reuse,
    "gan": run_gan,
}


# ---------------------------------------------------------------- truth

def truth(events):
    by_thread = {}
    for e in events:
        by_thread.setdefault(e.thread, []).append(e)
    out = {"creators": [], "backward": [], "acc_total": 0, "calls": {}}
    for thread, evs in by_thread.items():
        evs.sort(key=lambda e: e.id)
        ranges = [e for e in evs if e.name.startswith("gtmod::")]
        evals = [e for e in evs if e.name.startswith(EVAL)]
        label = {}
        count = {}
        for r in ranges:
            path = r.name[len("gtmod::"):]
            count[path] = count.get(path, 0) + 1
            label[id(r)] = "%s#%d" % (path, count[path])
            out["calls"]["%d:%s" % (thread, label[id(r)])] = \
                innermost(evals, r) is not None
        for e in evals:
            name = e.name[len(EVAL):]
            if "AccumulateGrad" in name:
                out["acc_total"] += 1
            if e.sequence_nr is not None and e.sequence_nr >= 0:
                out["backward"].append([e.fwd_thread, e.sequence_nr, name])
        creator = {}
        for e in evs:
            if e.sequence_nr is None or e.sequence_nr < 0 or e.fwd_thread:
                continue
            if e.name.startswith(("gtmod::", "gtpass", "profiler::", EVAL)):
                continue
            creator[(thread, e.sequence_nr)] = e  # last start wins
        passes = [e for e in evs if e.name == "gtpass"]
        for (tid, seq), op in creator.items():
            r = innermost(ranges, op)
            ev = innermost(evals, op)
            p = innermost(passes, op) if ev is None else None
            if p is not None:
                # The engine's own work after a node ran (its outputs summed
                # into the next node's inputs, differentiable with
                # create_graph): still inside that node's evaluate_function.
                done = [e for e in evals if p.id < e.id < op.id
                        and not inside(e, op)]
                ev = max(done, key=lambda e: e.id) if done else None
            out["creators"].append([
                tid, seq, label[id(r)] if r is not None else "",
                ev.fwd_thread if ev is not None else -1,
                ev.sequence_nr if ev is not None else -1])
    return out


def main():
    case, path = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    extra = {}
    with profiler.profile(use_kineto=False) as prof:
        CASES[case](extra)
    out = truth(prof.function_events)
    out.update(case=case, torch=torch.__version__, extra=extra,
               python_module=gradtrace.available())
    with open(path, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
