#!/usr/bin/env python3
"""Forward operators' cost (agent/ops.c) next to torch.profiler's with the
same detail (every operator, CPU activity), on CPU models; the module
hooks' and idle costs are tests/bench/bench_torch.py's.

Model: 24 blocks (Linear -> GELU -> Linear, residual), hidden 512, batch 64,
SGD, one intra-op thread: the "realistic" figure, where hook costs drown in
matrix products. A second run shrinks the same model to hidden 8, batch 1,
where each step is pure framework overhead (~150 autograd nodes, ~75 module
calls per iteration), so the hooks' own cost becomes visible; the per-event
cost is derived from it. Each configuration runs in its own process (the
agent is LD_PRELOADed), configurations are interleaved round-robin over
several rounds so that drift on a shared machine hits all of them alike,
and each reports per-iteration wall times after warm-up. Printed: median
and best-round medians per configuration and their ratios to "none".

(The C hooks' cost per autograd node is tests/bench/bench_torch.py's.)

Configurations:
  none      no agent, no profiler
  idle      agent + Python module loaded, capture off
  capture   agent + Python module, capturing (GRADTRACE_FILE, no daemon),
            forward operators on (every aten op a cpu_op: agent/ops.c)
  no-ops    the same with GRADTRACE_OPS=0 (no operator records)
  c-only    agent capturing, no Python module (C hooks only, no layers)
  profiler  no agent, torch.autograd.profiler.profile(use_kineto=False)
  kineto    no agent, torch.profiler.profile(activities=[CPU]): Kineto
            with every operator, the detail "capture" records

The per-operator cost is (capture - no-ops) over the operators one
iteration records (counted in the capture's trace).

Benchmarks print figures; they never pass or fail on time.
Usage: bench_ops.py [--rounds R] [--iters N] [--tiny-iters N]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

from models import block_stack

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("ROOT") or os.path.abspath(os.path.join(HERE, "..", ".."))
BUILD = os.environ.get("BUILD", "build")
AGENT = os.path.join(ROOT, BUILD, "libgradtrace.so")
CONFIGS = ["none", "idle", "capture", "no-ops", "c-only", "profiler", "kineto"]


def build(args):
    """The model, its input and its loss for args.model; returns step()."""
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)

    if args.model == "decoder":
        model, x, loss_of = decoder(args)
    else:
        model = block_stack(args.hidden, args.blocks)
        x = torch.randn(args.batch, args.hidden)
        loss_of = lambda y: y.pow(2).mean()  # noqa: E731
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)

    def step():
        opt.zero_grad()
        loss_of(model(x)).backward()
        opt.step()
    return step


def child(args):
    import torch

    step = build(args)
    for _ in range(args.warmup):
        step()
    times = []

    def run():
        for _ in range(args.iters):
            t0 = time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)

    if args.config == "profiler":
        with torch.autograd.profiler.profile(use_kineto=False):
            run()
    elif args.config == "kineto":
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU]):
            run()
    else:
        run()
    print(" ".join("%.9f" % t for t in times))


def decoder(args):
    """A small decoder-only language model: token embedding, 2 causal
    self-attention blocks (d_model 128, 4 heads, seq 64, batch 8), the
    vocabulary head and cross-entropy on the next token."""
    import torch
    from torch import nn

    vocab, d, seq, batch = 512, 128, 64, 8

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(vocab, d)
            self.blocks = nn.ModuleList([
                nn.TransformerEncoderLayer(d, 4, 4 * d, dropout=0.0,
                                           batch_first=True)
                for _ in range(2)])
            self.head = nn.Linear(d, vocab)
            self.register_buffer("mask", torch.triu(
                torch.full((seq, seq), float("-inf")), diagonal=1))

        def forward(self, t):
            h = self.emb(t)
            for b in self.blocks:
                h = b(h, src_mask=self.mask)
            return self.head(h)

    tokens = torch.randint(0, vocab, (batch, seq + 1))

    def loss_of(logits):
        return nn.functional.cross_entropy(logits.reshape(-1, vocab),
                                           tokens[:, 1:].reshape(-1))
    return Decoder(), tokens[:, :-1], loss_of


def ab(args):
    """In one process: steps timed with the measured thing off and on,
    alternately (best of short runs each, the training thread's CPU time),
    so that the difference is its cost per step without
    process-to-process noise. args.config:
    ab-ops / ab-noops (gradtrace capture toggled, forward operators on /
    GRADTRACE_OPS=0), ab-kineto (torch.profiler, CPU activity, started
    and stopped)."""
    import contextlib
    if args.config != "ab-kineto":
        sys.path.insert(0, os.path.join(ROOT, "python"))
        import gradtrace
    step = build(args)
    k = max(3, args.iters)

    def best(ctx):
        b = 1e9
        for _ in range(15):
            with ctx():
                # The training thread's CPU time: on this shared machine
                # wall time mostly measures other jobs (the streamer's
                # compression runs on its own thread and is not counted).
                t = time.thread_time()
                for _ in range(k):
                    step()
                b = min(b, (time.thread_time() - t) / k)
        return b

    if args.config == "ab-kineto":
        from torch.profiler import ProfilerActivity, profile
        on_ctx = lambda: profile(activities=[ProfilerActivity.CPU])  # noqa: E731
        off_ctx = contextlib.nullcontext
    else:
        @contextlib.contextmanager
        def on_ctx():
            gradtrace.capture_start()
            yield

        @contextlib.contextmanager
        def off_ctx():
            gradtrace.capture_stop()
            yield
    for _ in range(args.warmup):
        with on_ctx():
            step()
    off, on = [], []
    for _ in range(args.rounds):
        off.append(best(off_ctx))
        on.append(best(on_ctx))
    print("%.9f %.9f" % (min(off), min(on)))


def launch(config, args, tmp):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.pop("PYTHONPATH", None)
    if config in ("idle", "capture", "no-ops", "c-only", "ab-ops",
                  "ab-noops"):
        env["LD_PRELOAD"] = AGENT
        env["GRADTRACE_FILE"] = os.path.join(tmp, config + ".gtr")
        env["GRADTRACE_CAPTURE"] = "0" if config == "idle" else "1"
        # Operators are opt-in: each configuration says which it is.
        env["GRADTRACE_OPS"] = "0" if config in ("no-ops", "ab-noops") else "1"
        if config != "c-only":
            env["PYTHONPATH"] = os.path.join(ROOT, "python")
    cmd = [sys.executable, os.path.abspath(__file__), "--child", config,
           "--iters", str(args.iters), "--warmup", str(args.warmup),
           "--blocks", str(args.blocks), "--hidden", str(args.hidden),
           "--batch", str(args.batch), "--model", args.model]
    out = subprocess.run(cmd, env=env, check=True, capture_output=True,
                         text=True).stdout
    return [float(v) for v in out.split()]


def ops_per_iteration(gtr, tmp):
    """cpu_op events per ProfilerStep in a capture, from its conversion."""
    import json
    out = os.path.join(tmp, "ops.json")
    gt = os.path.join(ROOT, BUILD, "gradtrace")
    if subprocess.run([gt, "convert", "--quiet", "-o", out, gtr]).returncode:
        return 0
    ev = json.load(open(out))["traceEvents"]
    steps = [e for e in ev if e.get("name", "").startswith("ProfilerStep#")]
    ops = sum(1 for e in ev if e.get("cat") == "cpu_op")
    return ops / len(steps) if steps else 0


def in_process(args, tmp, label, ops):
    """The A/B figures (see ab()): the step overhead of gradtrace with and
    without forward operators and of torch.profiler, and per operator."""
    a = argparse.Namespace(**vars(args))
    a.iters = 5 if args.model == "mlp" else 2
    r = {c: launch(c, a, tmp) for c in ("ab-ops", "ab-noops", "ab-kineto")}
    d = {c: (on - off) * 1e6 for c, (off, on) in r.items()}
    print("%s, in one process, toggled (best of 15 x %d steps, %d rounds): step "
          "%.1f us; overhead gradtrace %+.1f us (no operators %+.1f), "
          "torch.profiler CPU %+.1f us" % (label, a.iters, a.rounds,
                                           r["ab-noops"][0] * 1e6, d["ab-ops"],
                                           d["ab-noops"], d["ab-kineto"]))
    if ops:
        print("  forward operators: %+.0f ns per operator (%.0f per step); "
              "gradtrace / torch.profiler overhead: %.2f"
              % ((d["ab-ops"] - d["ab-noops"]) * 1e3 / ops, ops,
                 d["ab-ops"] / d["ab-kineto"] if d["ab-kineto"] > 0 else float("nan")))
    # RecordFunction's own bookkeeping once the callback exists (it runs
    # for every operator, capturing or not): the "off" steps of the two
    # gradtrace processes.
    print("  libtorch RecordFunction with the callback registered, capture "
          "off: %+.1f us per step (across processes)"
          % ((r["ab-ops"][0] - r["ab-noops"][0]) * 1e6))


def measure(args, tmp, label):
    per_round = {c: [] for c in CONFIGS}
    all_times = {c: [] for c in CONFIGS}
    for _ in range(args.rounds):
        for c in CONFIGS:
            t = launch(c, args, tmp)
            all_times[c].extend(t)
            per_round[c].append(statistics.median(t))
    base_med = statistics.median(all_times["none"])
    base_best = min(per_round["none"])
    shape = ("2 blocks, d_model 128, seq 64, batch 8" if args.model == "decoder"
             else "%d blocks, hidden %d, batch %d" % (args.blocks, args.hidden,
                                                      args.batch))
    print("%s: %s, 1 thread; %d rounds x %d iterations per configuration "
          "(after %d warm-up)" % (label, shape, args.rounds, args.iters,
                                  args.warmup))
    print("  %-9s %12s %8s %14s %8s" % ("config", "median ms", "ratio",
                                        "best-round ms", "ratio"))
    res = {}
    for c in CONFIGS:
        med = statistics.median(all_times[c])
        best = min(per_round[c])
        res[c] = best
        print("  %-9s %12.3f %8.3f %14.3f %8.3f"
              % (c, med * 1e3, med / base_med, best * 1e3, best / base_best))
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", dest="config")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--iters", type=int, default=8)
    ap.add_argument("--tiny-iters", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--blocks", type=int, default=24)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--model", default="mlp", choices=["mlp", "decoder"])
    ap.add_argument("--no-decoder", action="store_true",
                    help="skip the small decoder model's measurement")
    args = ap.parse_args()
    if args.config and args.config.startswith("ab-"):
        ab(args)
        return 0
    if args.config:
        child(args)
        return 0
    if not os.path.exists(AGENT):
        print("bench_ops: %s not built" % AGENT)
        return 1

    with tempfile.TemporaryDirectory() as tmp:
        measure(args, tmp, "realistic")
        if not args.no_decoder:
            dec = argparse.Namespace(**vars(args))
            dec.model = "decoder"
            dres = measure(dec, tmp, "small decoder")
            dops = ops_per_iteration(os.path.join(tmp, "capture.gtr"), tmp)
            over = lambda c: dres[c] - dres["none"]  # noqa: E731
            print("  decoder, across processes: gradtrace capture %+.2f ms per "
                  "step, torch.profiler (CPU, every op) %+.2f ms; %.0f operators "
                  "per step" % (over("capture") * 1e3, over("kineto") * 1e3, dops))
            in_process(dec, tmp, "small decoder", dops)
        big = {c: os.path.getsize(os.path.join(tmp, c + ".gtr"))
               for c in ("capture", "c-only")}
        tiny = argparse.Namespace(**vars(args))
        tiny.hidden, tiny.batch, tiny.iters = 8, 1, args.tiny_iters
        tiny.rounds, tiny.warmup = max(3, args.rounds), 20
        res = measure(tiny, tmp, "overhead-bound")
        ops = ops_per_iteration(os.path.join(tmp, "capture.gtr"), tmp)
        in_process(tiny, tmp, "overhead-bound", ops)
    # Events per iteration of this model: per block fc1, fc2 (addmm + t
    # nodes each), gelu, add -> 6 created + 6 run backward; plus pow, mean.
    nodes = 6 * args.blocks + 2
    modules = 4 * args.blocks + 1
    per_iter = lambda a, b: (res[a] - res[b]) * 1e6  # noqa: E731
    print("where the time goes (overhead-bound, best rounds, per iteration "
          "of %d autograd nodes and %d module calls):" % (nodes, modules))
    print("  C hooks capturing (c-only - none):        %+8.1f us" %
          per_iter("c-only", "none"))
    print("  Python module hooks, capture off (idle - none): %+8.1f us" %
          per_iter("idle", "none"))
    print("  full capture (capture - none):            %+8.1f us"
          " = %.2f us per module call if all of it is Python" %
          (per_iter("capture", "none"), per_iter("capture", "none") / modules))
    if ops:
        d = per_iter("capture", "no-ops")
        print("  forward operators (capture - no-ops):     %+8.1f us"
              " = %.0f ns per operator (%.0f operators per iteration)"
              % (d, d * 1e3 / ops, ops))
    print("  torch.profiler, CPU, every operator (kineto - none): %+8.1f us"
          % per_iter("kineto", "none"))
    print("  gradtrace capture / torch.profiler overhead: %.2f"
          % (per_iter("capture", "none") / max(per_iter("kineto", "none"), 1e-9)))
    print("trace bytes, realistic run's last round: capture %d, c-only %d"
          % (big["capture"], big["c-only"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
