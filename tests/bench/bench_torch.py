#!/usr/bin/env python3
"""Training-step cost of gradtrace on CPU models, side by side with
torch.profiler (CPU activity) in the same run, on torch 1.13 and 2.x.

Models (one intra-op thread, SGD):
  overhead   24 blocks Linear -> GELU -> Linear (residual), hidden 8,
             batch 1: each step is pure framework overhead (~150 autograd
             nodes, 97 module calls); the idle target is measured here.
  dispatch   the same blocks at hidden 32, batch 32: dispatcher-bound.
  decoder    a small decoder-only transformer (4 layers, d_model 64,
             4 heads, feed-forward 256, sequence 32, batch 4, vocabulary
             500).

Configurations, each in --procs long-lived processes per interpreter
(round r in process r % procs, so that one process's placement does not
pass for a cost), driven in interleaved rounds (every configuration runs
one round of every model before any runs its next), so drift on a shared
machine hits all alike:
  none        no agent, no profiler
  control     the same as none, in processes of its own: its difference
              to none is this run's noise floor, the smallest cost the
              other rows can resolve
  idle        agent + Python package, nothing captured or armed
  capture     agent + package capturing (GRADTRACE_FILE, no daemon), the
              default detail: layers, nodes and steps, no operators
  capture-ops the same with every aten operator (GRADTRACE_OPS=1,
              record --ops)
  capture-py  capture with the Python module hooks (GRADTRACE_C_HOOKS=0)
  profiler    no agent; torch.profiler.profile(activities=[CPU]) on for
              the whole process (its results are not processed)
Figures: per configuration the median over rounds of each round's median
step time, its ratio to "none" and the spread of that ratio over rounds
(min..max), next to the targets (idle <= 0.5 % on overhead, capture
<= 2 % on dispatch, <= 1 % on decoder); then per model capture-ops'
overhead as a fraction of torch.profiler's for the same operators
(target <= 0.25).

Per call: a Sequential of 50 nn.Identity called in a loop with no hooks,
with do-nothing global hooks in C (_gthooks.noop: torch's own hook path)
and in Python, with gradtrace's hooks in C and in Python as global hooks,
and as the package installs them (the nn.Module.__call__ wrapper, which
keeps torch's fast path), capturing: what torch's path costs and what
ours adds, per module call. Per node: a chain
of multiplies with capture toggled in one process (the agent's C hooks).

Times are the training thread's CPU time (time.thread_time), so other
processes on a shared machine do not count; the agent's streamer thread
and the profiler's own threads run beside it and are not in it.

Benchmarks print figures; they never pass or fail on time.
Usage: bench_torch.py [--rounds R] [--procs P] [--quick] [--python PY ...]
"""

import argparse
import json
import os
import shutil
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
VENV_PY = os.path.expanduser("~/.cache/gradtrace/torch2-venv/bin/python")
CONFIGS = ["none", "control", "idle", "capture", "capture-ops",
           "capture-py", "profiler"]
# model -> (iterations per round, warm-up)
MODELS = {"overhead": (150, 30), "dispatch": (100, 20), "decoder": (40, 5)}
# The training thread's CPU time, not wall time: on a shared machine
# (2 cores, load above 5 while this was written) wall time mostly measures
# the other processes. What the agent's own threads (the streamer) spend
# is not in it; they run beside the training thread, off its path.
CLOCK = time.thread_time
TARGETS = {("idle", "overhead"): 0.5, ("capture", "dispatch"): 2.0,
           ("capture", "decoder"): 1.0}


# ------------------------------------------------------------- children

def build_model(name):
    import torch
    from torch import nn

    torch.manual_seed(0)
    if name in ("overhead", "dispatch"):
        hidden, batch = (8, 1) if name == "overhead" else (32, 32)

        model = block_stack(hidden)
        x = torch.randn(batch, hidden)
        loss_of = lambda: model(x).pow(2).mean()  # noqa: E731
    else:
        vocab, d, seq, batch = 500, 64, 32, 4

        class Decoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = nn.Embedding(vocab, d)
                self.pos = nn.Parameter(torch.zeros(seq, d))
                self.layers = nn.ModuleList([
                    nn.TransformerEncoderLayer(d, 4, 4 * d, dropout=0.0,
                                               batch_first=True)
                    for _ in range(4)])
                self.norm = nn.LayerNorm(d)
                self.head = nn.Linear(d, vocab)
                self.register_buffer("mask", torch.triu(
                    torch.full((seq, seq), float("-inf")), 1))

            def forward(self, tok):
                h = self.emb(tok) + self.pos
                for layer in self.layers:
                    h = layer(h, src_mask=self.mask)
                return self.head(self.norm(h))

        model = Decoder()
        tok = torch.randint(0, vocab, (batch, seq))
        tgt = torch.randint(0, vocab, (batch * seq,))
        loss_of = lambda: nn.functional.cross_entropy(  # noqa: E731
            model(tok).reshape(-1, vocab), tgt)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)

    def step():
        opt.zero_grad()
        loss_of().backward()
        opt.step()
    return step


def child(config):
    """Serves rounds: reads "MODEL ITERS" lines, answers with the step
    times of one round as a JSON list."""
    import torch

    torch.set_num_threads(1)
    steps = {}
    if config == "profiler":
        # One profiling session over every round of this process, as a
        # user profiling a whole run would have it.
        from torch.profiler import ProfilerActivity, profile
        profile(activities=[ProfilerActivity.CPU]).start()
    for line in sys.stdin:
        name, iters = line.split()
        if name not in steps:
            steps[name] = build_model(name)
            for _ in range(MODELS[name][1]):
                steps[name]()
        step, times = steps[name], []

        def run():
            for _ in range(int(iters)):
                t0 = CLOCK()
                step()
                times.append(CLOCK() - t0)
        run()
        sys.stdout.write(json.dumps(times) + "\n")
        sys.stdout.flush()
    # The profiler's results are never looked at: skip its post-processing
    # (seconds per round), which is not what a step costs.
    os._exit(0)


def percall():
    """Per module call: torch's own hook path and ours (run with the
    agent preloaded, capturing, PYTHONPATH=python)."""
    import torch
    from torch import nn
    import torch.nn.modules.module as MM
    import gradtrace._scopes as S
    import gradtrace._switch as W
    from gradtrace import _gthooks

    seq = nn.Sequential(*[nn.Identity() for _ in range(50)])
    x = torch.zeros(1)

    W._hooks_wanted = lambda: 0     # the package's own hooks out
    W._hooks_off()

    def clear():
        for d in ("_global_forward_pre_hooks", "_global_forward_hooks",
                  "_global_forward_hooks_always_called"):
            getattr(MM, d, {}).clear()

    def sample(n=200):
        t0 = CLOCK()
        for _ in range(n):
            seq(x)
        return (CLOCK() - t0) / n / 51

    def py_noop_pre(m, a):
        return None

    def py_noop_post(m, a, o):
        return None

    kinds = {"bare": None,
             "noop-c": (_gthooks.noop, _gthooks.noop),
             "noop-py": (py_noop_pre, py_noop_post),
             "ours-c": (_gthooks.pre_hook, _gthooks.post_hook),
             "ours-py": (S._pre_hook, S._post_hook)}
    if W._is_compiling:
        kinds["ours-c-compiling"] = (W._compiling_pre_hook,
                                     W._compiling_post_hook)
    # Interleaved short samples, best of each: on a loaded machine the
    # minimum is what the code costs, the rest is other processes.
    kinds["ours-wrapper"] = "wrapper"
    if W._c_call_ok:
        kinds["ours-wrapper-py"] = "wrapper-py"
        kinds["ours-wrapper-off"] = "wrapper-off"
    res = {k: 1e9 for k in kinds}
    torch_call = nn.Module.__call__
    for _ in range(60):
        for k, hooks in kinds.items():
            clear()
            if hooks == "wrapper":     # how the package installs them
                W._hooks_on()
            elif hooks == "wrapper-py":  # its bytecode alone (where the
                # C vectorcall defers to it, or is not built)
                form, on = W._callform.make(torch_call, W._is_compiling,
                                            W._fast_pre, W._fast_post)
                on[0] = True
                nn.Module.__call__ = form
            elif hooks == "wrapper-off":  # ours left in place, switched
                # off (hooks out once torch._dynamo is imported)
                form, on = W._make_wrapper(torch_call)
                nn.Module.__call__ = form
            elif hooks:
                MM.register_module_forward_pre_hook(hooks[0])
                MM.register_module_forward_hook(hooks[1])
            sample(5)
            res[k] = min(res[k], sample())
            W._hooks_off()
            nn.Module.__call__ = torch_call
    clear()
    print(json.dumps(res))


def pernode():
    """A chain of multiplies, capture toggled in one process: the agent's
    C hooks per autograd node (created and run backward)."""
    import gradtrace
    import torch

    torch.set_num_threads(1)
    x = torch.zeros(1, requires_grad=True)
    n = 2000

    def fb():
        y = x
        for _ in range(n):
            y = y * 1.0
        y.backward()

    def best(k=7):
        b = 1e9
        for _ in range(k):
            t = CLOCK()
            fb()
            b = min(b, CLOCK() - t)
        return b / n

    for _ in range(3):
        fb()
    off, on = [], []
    for _ in range(6):
        gradtrace.capture_stop()
        off.append(best())
        gradtrace.capture_start()
        on.append(best())
    print(json.dumps([min(off), min(on)]))


# --------------------------------------------------------------- parent

def env_for(config, tmp, tag):
    env = dict(os.environ)
    for k in ("LD_PRELOAD", "PYTHONPATH", "GRADTRACE_C_HOOKS", "GRADTRACE_OPS",
              "GRADTRACE_CAPTURE", "GRADTRACE_FILE", "GRADTRACE_TRIGGER"):
        env.pop(k, None)
    if config in ("idle", "capture", "capture-ops", "capture-py",
                  "percall", "pernode"):
        env["LD_PRELOAD"] = AGENT
        env["GRADTRACE_FILE"] = os.path.join(tmp, "%s-%s.gtr" % (tag, config))
        env["GRADTRACE_CAPTURE"] = "0" if config == "idle" else "1"
        env["PYTHONPATH"] = os.path.join(ROOT, "python")
        if config == "capture-py":
            env["GRADTRACE_C_HOOKS"] = "0"
        # Operators are opt-in: only capture-ops asks for them. pernode
        # times the node's own cost (operators are bench_ops.py's and
        # bench_ops_idle.py's: with them, "off" would be free and "on"
        # would add libtorch's RecordFunction per operator).
        env["GRADTRACE_OPS"] = "1" if config == "capture-ops" else "0"
    return env


def one_shot(py, what, tmp, tag):
    out = subprocess.run([py, os.path.abspath(__file__), "--" + what],
                         env=env_for(what, tmp, tag), check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def side_by_side(py, args, tmp, tag):
    # Each configuration runs in args.procs processes, round r in process
    # r % procs: a process has its own placement (memory layout, caches),
    # which shifts all its rounds alike by up to a percent or two here, so
    # one process per configuration would read that as a cost.
    # A child's stderr goes to a file (Kineto prints its start-up lines
    # there), shown only when the child fails.
    errs = {(c, k): os.path.join(tmp, "%s-%s-%d.stderr" % (tag, c, k))
            for c in CONFIGS for k in range(args.procs)}
    procs = {}
    for (c, k), err in errs.items():
        with open(err, "w") as ef:
            procs[(c, k)] = subprocess.Popen(
                [py, os.path.abspath(__file__), "--child", c],
                env=env_for(c, tmp, "%s-%d" % (tag, k)), stderr=ef,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    rounds = {(c, m): [] for c in CONFIGS for m in MODELS}
    try:
        for r in range(args.rounds):
            for m, (iters, _) in MODELS.items():
                order = CONFIGS[r % len(CONFIGS):] + CONFIGS[:r % len(CONFIGS)]
                for c in order:
                    p = procs[(c, r % args.procs)]
                    p.stdin.write("%s %d\n" % (m, iters // args.quick))
                    p.stdin.flush()
                    line = p.stdout.readline()
                    if not line:
                        with open(errs[(c, r % args.procs)]) as ef:
                            tail = ef.read().strip().splitlines()[-5:]
                        raise RuntimeError("%s child %s died: %s" % (
                            py, c, " | ".join(tail) or "no output"))
                    rounds[(c, m)].append(statistics.median(json.loads(line)))
    finally:
        for p in procs.values():
            p.stdin.close()
            p.wait()
    return rounds


def report(rounds, args):
    print("  %-9s %-13s %10s %9s %17s %s" % ("model", "config", "median ms",
                                            "vs none", "spread (rounds)",
                                            "target"))
    for m in MODELS:
        base = rounds[("none", m)]
        for c in CONFIGS:
            r = rounds[(c, m)]
            ratios = [100.0 * (a / b - 1) for a, b in zip(r, base)]
            med = statistics.median(r)
            tgt = TARGETS.get((c, m))
            print("  %-9s %-13s %10.3f %+8.2f%% %+7.2f..%+6.2f%% %s" % (
                m, c, med * 1e3, 100.0 * (med / statistics.median(base) - 1),
                min(ratios), max(ratios),
                "<= %.1f %%" % tgt if tgt is not None else ""))
    # The budget with operators is relative: capture-ops' overhead over
    # torch.profiler's, recording the same operators, in the same rounds.
    for m in MODELS:
        none = statistics.median(rounds[("none", m)])
        ops = statistics.median(rounds[("capture-ops", m)]) - none
        prof = statistics.median(rounds[("profiler", m)]) - none
        print("  %-9s capture-ops / profiler overhead: %s (target <= 0.25)" % (
            m, "%.2f" % (ops / prof) if prof > 0 else "n/a (profiler costs nothing here)"))


def torch_version(py):
    """py's torch version, or None (said) when py has no torch."""
    ver = subprocess.run([py, "-c", "import torch; print(torch.__version__)"],
                         capture_output=True, text=True)
    if ver.returncode != 0:
        print("%s: no torch, skipped" % py)
        return None
    return ver.stdout.strip()


def run_for(py, args, tmp):
    ver = torch_version(py)
    if ver is None:
        return
    tag = "t" + ver.replace("+", "_")
    print("torch %s (%s): %d interleaved rounds over %d processes per "
          "configuration, step iterations per round: %s"
          % (ver, py, args.rounds, args.procs,
             ", ".join("%s %d" % (m, v[0] // args.quick)
                       for m, v in MODELS.items())))
    report(side_by_side(py, args, tmp, tag), args)
    pc = one_shot(py, "percall", tmp, tag)
    ns = lambda k: pc[k] * 1e9  # noqa: E731
    print("  per module call (Sequential of 50 nn.Identity, best of 60 "
          "interleaved samples, pre + post hook):")
    print("    no global hooks: %.0f ns; torch's own hook path (C no-op "
          "hooks): +%.0f ns; with Python no-op hooks: +%.0f ns"
          % (ns("bare"), ns("noop-c") - ns("bare"), ns("noop-py") - ns("bare")))
    print("    gradtrace's hooks, capturing, over the C no-ops: C %+.0f ns "
          "(target <= 500), Python %+.0f ns%s"
          % (ns("ours-c") - ns("noop-c"), ns("ours-py") - ns("noop-c"),
             "; C behind torch.compile's Python guard %+.0f ns"
             % (ns("ours-c-compiling") - ns("noop-c"))
             if "ours-c-compiling" in pc else ""))
    print("    as installed (our nn.Module.__call__, C hooks, torch's "
          "fast path kept): %+.0f ns over no hooks (target <= 500)%s"
          % (ns("ours-wrapper") - ns("bare"),
             "; its bytecode alone (where the C call defers to it) "
             "%+.0f ns; in place but off (idle once torch._dynamo is "
             "imported) %+.0f ns"
             % (ns("ours-wrapper-py") - ns("bare"),
                ns("ours-wrapper-off") - ns("bare"))
             if "ours-wrapper-py" in pc else ""))
    off, on = one_shot(py, "pernode", tmp, tag)
    print("  per autograd node (created + run backward, C hooks, operators "
          "off, capture toggled in one process): %.0f ns per op off, %.0f "
          "on: %+.0f ns"
          % (off * 1e9, on * 1e9, (on - off) * 1e9))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", dest="config")
    ap.add_argument("--percall", action="store_true")
    ap.add_argument("--pernode", action="store_true")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--procs", type=int, default=2,
                    help="processes per configuration, rounds spread over them")
    ap.add_argument("--quick", action="store_const", const=4, default=1,
                    help="a quarter of the iterations per round")
    ap.add_argument("--python", nargs="*")
    args = ap.parse_args()
    if args.config:
        child(args.config)
        return 0
    if args.percall:
        percall()
        return 0
    if args.pernode:
        pernode()
        return 0
    return run_interpreters("bench_torch", args, run_for)


def tool_missing(bench, tool, package):
    """Says so (the benchmark is skipped) and @return True when tool is
    not on PATH."""
    if shutil.which(tool):
        return False
    print("%s: %s not installed (scripts/install-deps.sh installs %s): "
          "skipped" % (bench, tool, package))
    return True


def run_interpreters(name, args, run_one):
    """run_one(py, args, tmp) for each interpreter: args.python, else
    this one and the torch 2.x venv's. @return the exit status."""
    if not os.path.exists(AGENT):
        print("%s: %s not built" % (name, AGENT))
        return 1
    pys = args.python or [sys.executable] + (
        [VENV_PY] if os.path.exists(VENV_PY) else [])
    with tempfile.TemporaryDirectory() as tmp:
        for py in pys:
            run_one(py, args, tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
