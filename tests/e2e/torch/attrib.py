"""Runs one attribution scenario with the gradtrace agent preloaded and
writes torch's own view of it (the ground truth) as JSON.

Ground truth comes from torch.autograd.profiler.profile(use_kineto=False)
running in the same process at the same time as the agent's capture:
  - each module forward is wrapped in a record_function range
    "gtmod::<path>" by per-module hooks installed here (independent of
    gradtrace's global hooks);
  - a forward op carries the sequence number torch peeked when it started
    and its RecordFunction thread id; the autograd node with that number
    and thread was created by the last op that started with that pair (a
    composite op and the inner op that creates the node share the number,
    and ops that create nothing carry the number of the next node);
  - that op's innermost enclosing gtmod range (by time, on its thread) is
    the module the node belongs to ("" outside any module), and the range's
    ordinal among the same path's ranges on that thread is the call;
  - each "autograd::engine::evaluate_function: X" event is one backward
    node with sequence_nr and fwd_thread.

Output: {"layers": {"path#call": [[fwd_tid, seq], ...]}, "backward":
[[fwd_tid, seq, name], ...], "extra": {...}} for check.py to compare with
the .gtr the agent wrote.

Usage: attrib.py CASE OUT.json   (CASE: small resnet18 custom nested twice
threads nograd)
"""

import json
import os
import sys
import threading

import torch
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", ".."))
from examples.train_small import build_model, train  # noqa: E402
from nesting import innermost  # noqa: E402

torch.set_num_threads(1)
profiler = torch.autograd.profiler
EVAL_PREFIX = "autograd::engine::evaluate_function: "


def root_name(module):
    return type(module).__name__


def add_range_hooks(model, prefix=""):
    """record_function ranges around every module forward of model. A
    root other than the first one gradtrace sees has its paths under
    `prefix` (python/gradtrace/_modules.py, naming)."""
    names = {}
    for path, m in model.named_modules():
        if prefix:
            names[m] = prefix + "." + path if path else prefix
        else:
            names[m] = path or root_name(model)
    tls = threading.local()

    def pre(m, args):
        st = getattr(tls, "stack", None)
        if st is None:
            st = tls.stack = []
        rf = profiler.record_function("gtmod::" + names[m])
        rf.__enter__()
        st.append(rf)

    def post(m, args, out):
        tls.stack.pop().__exit__(None, None, None)

    for m in names:
        m.register_forward_pre_hook(pre)
        m.register_forward_hook(post)


def truth_from(events):
    """Ground truth from one profiler's function events (one thread's)."""
    ranges = {}
    for e in events:
        if e.name.startswith("gtmod::"):
            ranges.setdefault(e.thread, []).append(e)
    calls = {}
    for thread, rs in ranges.items():
        rs.sort(key=lambda e: e.id)
        count = {}
        for r in rs:
            path = r.name[len("gtmod::"):]
            count[path] = count.get(path, 0) + 1
            calls[id(r)] = "%s#%d" % (path, count[path])

    creator = {}
    for e in events:
        if e.sequence_nr is None or e.sequence_nr < 0:
            continue
        if e.name.startswith(("gtmod::", "profiler::")) or \
                e.name.startswith(EVAL_PREFIX) or e.fwd_thread:
            continue
        key = (e.thread, e.sequence_nr)
        prev = creator.get(key)
        if prev is None or e.id > prev.id:
            creator[key] = e

    def layer_of(op):
        best = innermost(ranges.get(op.thread, ()), op)
        return calls[id(best)] if best is not None else ""

    layers = {}
    backward = []
    for e in events:
        if not e.name.startswith(EVAL_PREFIX):
            continue
        if e.sequence_nr is None or e.sequence_nr < 0:
            continue  # AccumulateGrad: no number (UINT64_MAX)
        key = (e.fwd_thread, e.sequence_nr)
        backward.append([key[0], key[1], e.name[len(EVAL_PREFIX):]])
        op = creator.get(key)
        layer = layer_of(op) if op is not None else "<no forward op>"
        layers.setdefault(layer, []).append(list(key))
    return layers, backward


def merge(into, layers, backward):
    for k, v in layers.items():
        into["layers"].setdefault(k, []).extend(v)
    into["backward"].extend(backward)


# ---------------------------------------------------------------- cases

class Scale(torch.autograd.Function):
    """A custom autograd.Function (a PyNode in the backward)."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return x * w

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w, (g * x).sum(0)


class CustomLayer(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.w = nn.Parameter(torch.ones(d))
        self.lin = nn.Linear(d, d)

    def forward(self, x):
        return self.lin(Scale.apply(x, self.w)).relu()


class Inner(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.a = nn.Linear(d, d)
        self.b = nn.Sequential(nn.Linear(d, d), nn.Tanh())

    def forward(self, x):
        return self.b(self.a(x)) * 2


class Nested(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.outer = nn.ModuleDict({"left": Inner(d), "right": Inner(d)})
        self.custom = CustomLayer(d)
        self.head = nn.Linear(d, 1)

    def forward(self, x):
        x = self.outer["left"](x) + torch.sin(x)
        x = self.outer["right"](x)
        return self.head(self.custom(x))


class Twice(nn.Module):
    """One submodule called twice per forward: two spans, two node sets."""

    def __init__(self, d=16):
        super().__init__()
        self.shared = nn.Sequential(nn.Linear(d, d), nn.GELU())
        self.mid = nn.Linear(d, d)
        self.head = nn.Linear(d, 1)

    def forward(self, x):
        x = self.shared(x)
        x = self.mid(x)
        x = self.shared(x)
        return self.head(x)


def step(model, x, iters=2):
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(iters):
        opt.zero_grad()
        loss = model(x).float().pow(2).mean()
        loss.backward()
        opt.step()


def profiled(fn):
    with profiler.profile(use_kineto=False) as prof:
        fn()
    return truth_from(prof.function_events)


def run_case(case, out):
    torch.manual_seed(0)
    if case == "small":
        model = build_model()
        add_range_hooks(model)
        merge(out, *profiled(lambda: train(model, iters=3)))
    elif case == "resnet18":
        import torchvision
        model = torchvision.models.resnet18(num_classes=10)
        add_range_hooks(model)
        x = torch.randn(2, 3, 32, 32)
        y = torch.tensor([1, 7])

        def one_step():
            opt = torch.optim.SGD(model.parameters(), lr=0.01)
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        merge(out, *profiled(one_step))
    elif case in ("custom", "nested"):
        model = Nested() if case == "nested" else nn.Sequential(
            CustomLayer(16), nn.Linear(16, 1))
        add_range_hooks(model)
        x = torch.randn(8, 16)
        merge(out, *profiled(lambda: step(model, x)))
        out["extra"]["custom_name"] = "Scale" if case == "custom" else None
    elif case == "twice":
        model = Twice()
        add_range_hooks(model)
        x = torch.randn(8, 16)
        merge(out, *profiled(lambda: step(model, x)))
    elif case == "threads":
        results = {}
        barrier = threading.Barrier(2)
        # Distinct paths per thread, so a node attributed to the other
        # thread's model could not hide behind an equal name. Model 0 runs
        # once first, so it is the first root gradtrace sees (bare paths)
        # and model 1 is the second (paths under its class name).
        models = [build_model(seed=0), nn.Sequential(Nested())]
        with torch.no_grad():
            models[0](torch.randn(1, 32))

        def worker(i):
            torch.manual_seed(i)
            model = models[i]
            add_range_hooks(model, "" if i == 0 else "Sequential")
            x = torch.randn(8, 32 if i == 0 else 16)

            def work():
                barrier.wait()
                step(model, x, iters=3)
            results[i] = profiled(work)
        ts = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        for i in range(2):
            merge(out, *results[i])
    elif case == "nograd":
        import gradtrace
        model = build_model()
        add_range_hooks(model)
        x = torch.randn(4, 32)

        def work():
            with gradtrace.scope("no_grad_region"):
                with torch.no_grad():
                    model(x)
                    model(x)
            train(model, iters=1)
        merge(out, *profiled(work))
    else:
        raise SystemExit("unknown case " + case)


def main():
    case, path = sys.argv[1], sys.argv[2]
    out = {"case": case, "layers": {}, "backward": [], "extra": {},
           "torch": torch.__version__}
    try:
        import gradtrace
        out["extra"]["python_module"] = gradtrace.available()
    except ImportError:
        out["extra"]["python_module"] = False
    run_case(case, out)
    with open(path, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
