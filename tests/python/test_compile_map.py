"""The compile-time map of torch.compile'd graphs (python/gradtrace/
_compile.py, _compile_rules.py; schema/torch.md "Compiled models: the
compile-time map"), without the agent:

  - the rules, on made-up node metadata (every torch): dynamo's path
    forms, wrapper segments, a node's module and phase, the owner of a
    kernel (one module; fused modules -> their deepest common ancestor on
    the call stack; no module -> unowned), kernels called at several sites;
  - on torch 2.x with inductor (CPU), on small models built here (MLP
    blocks, a decoder block with attention and layer norm, a checkpointed
    block inside the compiled region, a graph break, a cross-block
    fusion), whole-model, per-block and module.compile(), fullgraph on
    and off, recompiles: every kernel and extern call of every forward and
    backward wrapper has an owner or an explicit fused/unowned mark;
    backward kernels land on the modules of their forward; a kernel fused
    across two blocks belongs to their common ancestor and lists both;
    recomputed kernels are the recompute phase; each generated kernel
    runs in a RecordFunction scope (torch.profiler) named as the map says;
    the same graphs, graph breaks and generated code with the map on as
    without it; the map agrees with inductor's own provenance tracking
    (the same calls in the same order; each owner's forward holds the
    source lines of what the call computes); maps survive inductor's
    cache (in the process and on disk); a failing rule is counted and
    never reaches the program.

Runs under pytest, or as a script (exit 0, 77 when torch is missing);
`make pyunit` runs it with each interpreter that has torch (on torch 1.13
the compile parts skip).
"""
import atexit
import os
import shutil
import sys
import tempfile

_CACHE = tempfile.mkdtemp(prefix="gt-inductor-")
atexit.register(shutil.rmtree, _CACHE, True)
os.environ["TORCHINDUCTOR_CACHE_DIR"] = _CACHE
os.environ.pop("TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE", None)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyunit  # noqa: E402  (puts this checkout's package on the path)

torch, MISSING = pyunit.torch_or_reason()
if torch is not None:
    from torch import nn
    from gradtrace import _compile, _compile_rules as R

NO_COMPILE = None
if torch is not None:
    try:
        import torch._inductor.config as _icfg
        import torch._dynamo
        from torch._dynamo.utils import counters
        _icfg.compile_threads = 1  # no worker pool for a few tiny kernels
        _compile.install()
    except Exception as e:  # torch 1.13: no torch.compile
        NO_COMPILE = "no torch.compile/inductor: %s" % e


# --- the rules (any torch) -------------------------------------------------

def _stack(*paths):
    return {"k%d" % i: (p, "Linear") for i, p in enumerate(paths)}


def test_paths_in_dynamos_forms():
    if torch is None:
        return _skip()
    for s in ("L['self'].blocks.0.up", "L['self'].blocks[0].up",
              "L['self']._modules['blocks']._modules['0']._modules['up']",
              "getattr(L['self'].blocks, '0').up", "self.blocks.0.up"):
        assert R.parse_path(s) == ("self", ["blocks", "0", "up"]), s
    assert R.parse_path("L['s']") == ("s", [])
    assert R.parse_path("G['model'].head") == ("model", ["head"])
    assert R.parse_path("not a path!") is None
    assert R.parse_path(None) is None


def test_wrapper_segments_removed():
    if torch is None:
        return _skip()
    stack = {"a": ("L['self'].blocks.0", "CheckpointWrapper"),
             "b": ("L['self'].blocks.0._checkpoint_wrapped_module",
                   "Block"),
             "c": ("L['self'].blocks.0._checkpoint_wrapped_module.up",
                   "Linear")}
    assert R.user_stack(stack) == ("self", ("blocks.0", "blocks.0.up"))
    stack = {"a": ("L['m']", "OptimizedModule"),
             "b": ("L['m']._orig_mod.head", "Linear")}
    assert R.user_stack(stack) == ("m", ("", "head"))
    assert R.user_stack("junk") is None


def test_node_module_and_phase():
    if torch is None:
        return _skip()
    fwd = {"nn_module_stack": _stack("L['self'].b", "L['self'].b.up"),
           "seq_nr": 3, "partitioner_tag": "is_forward"}
    assert R.node_entry(fwd, False) == ("self", ("b", "b.up"), "forward")
    # The same forward node inside a backward graph is recomputed.
    assert R.node_entry(fwd, True)[1:] == (("b", "b.up"), "recompute")
    bwd = {"fwd_nn_module_stack": _stack("L['self'].b"), "seq_nr": 3,
           "partitioner_tag": "is_backward"}
    assert R.node_entry(bwd, True) == ("self", ("b",), "backward")
    # Forward op in the frame itself: its backward has a None copy.
    top = {"fwd_nn_module_stack": None, "seq_nr": 9,
           "partitioner_tag": "is_backward"}
    assert R.node_entry(top, True) == (None, (), "backward")
    assert R.node_entry({"seq_nr": 1}, False) == (None, (), "forward")
    made_up = {"partitioner_tag": "is_backward"}  # a pass's node
    assert R.node_entry(made_up, True) == (None, None, "backward")
    # Older 2.x: no partitioner tags; backward nodes lack nn_module_stack.
    old_bwd = {"seq_nr": 4}
    assert R.node_entry(old_bwd, True) == (None, None, "backward")
    old_fwd = {"nn_module_stack": _stack("L['self'].b"), "seq_nr": 4}
    assert R.node_entry(old_fwd, True)[2] == "recompute"
    # A backward op the partitioner moved into the forward graph.
    assert R.node_entry(bwd, False) == ("self", ("b",), "forward")


def test_owner_of_a_kernel():
    if torch is None:
        return _skip()
    one = R.attribute([(("b0", "b0.act"), "forward"),
                       (None, "forward")])
    assert (one["owner"], one["mark"], one["fused"]) == \
        ("b0.act", "module", [])
    fused = R.attribute([(("body", "body.b0"), "forward"),
                         (("body", "body.b1", "body.b1.up"), "forward")])
    assert (fused["owner"], fused["mark"], fused["fused"]) == \
        ("body", "fused", ["body.b0", "body.b1.up"])
    top = R.attribute([((), "forward"), (("head",), "forward")])
    assert (top["owner"], top["fused"]) == ("", ["", "head"])
    none = R.attribute([(None, "backward")])
    assert (none["owner"], none["mark"], none["phase"]) == \
        (None, "unowned", "backward")
    mixed = R.attribute([(("a",), "recompute"), (("a",), "backward")])
    assert (mixed["phase"], mixed["recompute"]) == ("backward", True)
    rec = R.attribute([(("a",), "recompute")])
    assert (rec["phase"], rec["recompute"]) == ("recompute", False)


def test_kernel_called_at_several_sites():
    if torch is None:
        return _skip()
    a = R.attribute([(("b0", "b0.act"), "forward")])
    b = R.attribute([(("b1", "b1.act"), "forward")])
    m = R.merge_sites([a, b])
    assert (m["owner"], m["mark"], m["fused"]) == \
        ("", "shared", ["b0.act", "b1.act"]), m
    assert R.merge_sites([a])["owner"] == "b0.act"
    assert "stack" not in R.merge_sites([a])


def test_inert_without_compile():
    if torch is None:
        return _skip()
    if NO_COMPILE is None:
        assert _compile.available()
        return
    assert not _compile.install() and not _compile._patched


# --- models ----------------------------------------------------------------

if torch is not None:
    class Block(nn.Module):
        def __init__(self, d=8):
            super().__init__()
            self.up = nn.Linear(d, 2 * d)
            self.act = nn.GELU()
            self.down = nn.Linear(2 * d, d)

        def forward(self, x):
            return x + self.down(self.act(self.up(x)))

    class MLP(nn.Module):
        def __init__(self, d=8, n=2, ckpt=False):
            super().__init__()
            self.blocks = nn.ModuleList([Block(d) for _ in range(n)])
            self.head = nn.Linear(d, 1)
            self.ckpt = ckpt

        def forward(self, x):
            for i, b in enumerate(self.blocks):
                if self.ckpt and i == 0:
                    x = torch.utils.checkpoint.checkpoint(
                        b, x, use_reentrant=False)
                else:
                    x = b(x)
            return self.head(x).tanh()

    class Attention(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)

        def forward(self, x):
            q, k, v = self.qkv(x).chunk(3, -1)
            y = nn.functional.scaled_dot_product_attention(
                q.unsqueeze(1), k.unsqueeze(1), v.unsqueeze(1),
                is_causal=True)
            return self.proj(y.squeeze(1))

    class DecoderBlock(nn.Module):
        def __init__(self, d=16):
            super().__init__()
            self.ln1 = nn.LayerNorm(d)
            self.attn = Attention(d)
            self.ln2 = nn.LayerNorm(d)
            self.mlp = Block(d)

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return self.mlp(self.ln2(x))

    class Decoder(nn.Module):
        def __init__(self, d=16):
            super().__init__()
            self.blocks = nn.ModuleList([DecoderBlock(d)])
            self.head = nn.Linear(d, 4)

        def forward(self, x):
            for b in self.blocks:
                x = b(x)
            return self.head(x)

    class LinRelu(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.fc = nn.Linear(d, d)

        def forward(self, x):
            return torch.relu(self.fc(x))

    class Scale(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.w = nn.Parameter(torch.ones(d))

        def forward(self, x):
            return x * self.w + 1.0

    class Stage(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.blocks = nn.ModuleList([LinRelu(d), Scale(d)])

        def forward(self, x):
            for b in self.blocks:
                x = b(x)
            return x

    class Broken(nn.Module):
        """A graph break between two blocks (not in a loop: a break in a
        loop makes dynamo skip the whole frame)."""

        def __init__(self, d=5):
            super().__init__()
            self.blocks = nn.ModuleList([LinRelu(d), LinRelu(d)])
            self.head = nn.Linear(d, 1)

        def forward(self, x):
            x = self.blocks[0](x)
            torch._dynamo.graph_break()
            return self.head(self.blocks[1](x))

    class Fusing(nn.Module):
        """blocks.0 ends with relu and blocks.1 is pointwise: inductor
        fuses the two into one kernel inside body."""

        def __init__(self, d=12):
            super().__init__()
            self.body = Stage(d)
            self.head = nn.Linear(d, 1)

        def forward(self, x):
            return self.head(self.body(x))


def _compiled(model, how, fullgraph):
    if how == "whole":
        return torch.compile(model, fullgraph=fullgraph)
    if how == "method":
        model.compile(fullgraph=fullgraph)
        return model
    for i, b in enumerate(model.blocks):  # per block
        model.blocks[i] = torch.compile(b, fullgraph=fullgraph)
    return model


def _run(model, how="whole", fullgraph=True, shape=(4, 8), steps=2):
    """Compiles model, runs forward and backward steps. @return the maps
    emitted meanwhile and the compiled callable."""
    torch._dynamo.reset()
    start = len(_compile.maps)
    m = _compiled(model, how, fullgraph)
    x = torch.randn(*shape)
    for _ in range(steps):
        m(x).sum().backward()
    return _compile.compile_maps()[start:], m


def _paths(model):
    return {""} | {p for p, _ in model.named_modules()}


def _check_marks(maps, valid):
    """Every call has an owner or an explicit fused/unowned mark."""
    assert maps, "no map"
    for g in maps:
        assert g["phase"] in ("forward", "backward", "inference"), g
        for c in g["calls"]:
            assert c["mark"] in ("module", "fused", "unowned"), c
            assert (c["owner"] is None) == (c["mark"] == "unowned"), c
            assert bool(c["fused"]) == (c["mark"] == "fused"), c
            if c["owner"] is not None:
                assert c["owner"] in valid, (c, sorted(valid))
            assert set(c["fused"]) <= valid, c
            assert c["kind"] in ("kernel", "extern"), c
            assert c["phase"] in ("forward", "backward", "recompute"), c
            if g["phase"] != "backward":
                assert c["phase"] == "forward", c
        for name, k in g["kernels"].items():
            assert all(g["calls"][i]["kernel"] == name for i in k["calls"])


def _holders(calls):
    out = set()
    for c in calls:
        out.update(c["fused"] or ([c["owner"]] if c["owner"] is not None
                                  else []))
    return out


def _leaves(model, kinds=None):
    kinds = kinds or (nn.Linear, nn.GELU, nn.LayerNorm)
    return {p for p, m in model.named_modules() if isinstance(m, kinds)}


def _by_phase(maps, phase):
    return [c for g in maps if g["phase"] == phase for c in g["calls"]]


def _summary(name, maps):
    # What the map looks like, for the record (shown when run as a script).
    calls = [c for g in maps for c in g["calls"]]
    n = len(calls) or 1
    share = {k: sum(c["mark"] == k for c in calls) * 100 // n
             for k in ("module", "fused", "unowned")}
    print("  %s: %d graphs, %d calls (%d fwd, %d bwd of which %d "
          "recompute; %d kernels, %d extern): %d%% one module, %d%% fused, "
          "%d%% unowned" % (
              name, len(maps), len(calls),
              len(_by_phase(maps, "forward")), len(_by_phase(maps,
                                                             "backward")),
              sum(c["phase"] == "recompute" for c in calls),
              sum(c["kind"] == "kernel" for c in calls),
              sum(c["kind"] == "extern" for c in calls),
              share["module"], share["fused"], share["unowned"]))


# --- compiled models (torch 2.x) -------------------------------------------

def test_mlp_whole_model():
    if _no_compile():
        return
    torch.manual_seed(0)
    model = MLP()
    maps, _ = _run(model, "whole", fullgraph=True)
    _check_marks(maps, _paths(model))
    _summary("MLP whole fullgraph", maps)
    assert {g["phase"] for g in maps} == {"forward", "backward"}
    assert all(g["base"] == ["self"] for g in maps), maps
    fwd, bwd = _by_phase(maps, "forward"), _by_phase(maps, "backward")
    leaves = _leaves(model)
    # Each leaf's forward is in the map, and its backward lands on it too.
    assert leaves <= _holders(fwd), (leaves, _holders(fwd))
    assert leaves <= _holders(bwd), (leaves, _holders(bwd))
    assert {c["owner"] for c in fwd if c["kind"] == "extern"} == \
        {p for p in leaves if p.endswith(("up", "down", "head"))}


def test_mlp_per_block_and_method():
    if _no_compile():
        return
    torch.manual_seed(0)
    maps, _ = _run(MLP(d=10), "block", fullgraph=False, shape=(4, 10))
    # A block's graph names paths from the block (the layer open around
    # the compiled call at run time).
    _check_marks(maps, {"", "up", "act", "down"})
    _summary("MLP per block", maps)
    assert {c["owner"] for c in _by_phase(maps, "backward")} >= \
        {"up", "down"}
    model = MLP()  # the graphs of test_mlp_whole_model: from the cache
    maps, _ = _run(model, "method", fullgraph=False)
    _check_marks(maps, _paths(model))
    _summary("MLP module.compile()", maps)
    assert _leaves(model) <= _holders(_by_phase(maps, "backward"))


def test_decoder_block_with_attention():
    if _no_compile():
        return
    torch.manual_seed(0)
    model = Decoder()
    maps, _ = _run(model, "whole", fullgraph=True, shape=(2, 5, 16))
    _check_marks(maps, _paths(model))
    _summary("decoder whole fullgraph", maps)
    fwd, bwd = _by_phase(maps, "forward"), _by_phase(maps, "backward")
    leaves = _leaves(model)
    assert leaves <= _holders(fwd), leaves - _holders(fwd)
    assert leaves <= _holders(bwd), leaves - _holders(bwd)
    # The attention op itself is an extern call owned by the attention.
    sdpa = [c for c in fwd + bwd if "scaled_dot_product" in c["kernel"]]
    assert len(sdpa) == 2 and all(
        c["owner"] == "blocks.0.attn" and c["kind"] == "extern"
        for c in sdpa), sdpa


def test_checkpointed_block_is_recomputed():
    if _no_compile():
        return
    torch.manual_seed(0)
    model = MLP(d=12, ckpt=True)
    maps, _ = _run(model, "whole", fullgraph=True, shape=(4, 12))
    _check_marks(maps, _paths(model))
    _summary("MLP checkpointed block", maps)
    bwd = _by_phase(maps, "backward")
    # Kernels that only recompute are the checkpointed block's (the
    # partitioner also recomputes cheap ops elsewhere, fused into
    # backward kernels: those are backward, marked "recompute").
    rec = [c for c in bwd if c["phase"] == "recompute"]
    assert rec and all(c["owner"].startswith("blocks.0") for c in rec), rec
    # The checkpointed block's matmul runs again in the backward.
    assert any(c["phase"] == "recompute" and c["kind"] == "extern" and
               c["owner"] == "blocks.0.up" for c in bwd), bwd


def test_graph_break_gives_a_map_per_graph():
    if _no_compile():
        return
    maps, _, got = _break_run()
    assert got["graph_break"] == 1, got
    _check_marks(maps, _paths(Broken()))
    _summary("graph-break model", maps)
    fwd = [g for g in maps if g["phase"] == "forward"]
    assert len(fwd) == 2, maps
    owners = [_holders(g["calls"]) for g in fwd]
    assert {"blocks.0", "blocks.0.fc"} in owners and \
        {"blocks.1", "blocks.1.fc", "head"} in owners, owners


def test_recompile_adds_maps():
    if _no_compile():
        return
    torch.manual_seed(0)
    torch._dynamo.reset()
    model = Fusing(d=9)
    start = len(_compile.maps)
    m = torch.compile(model)
    for n in (2, 3):  # the second shape recompiles with dynamic shapes
        m(torch.randn(n, 9)).sum().backward()
    maps = _compile.compile_maps()[start:]
    _check_marks(maps, _paths(model))
    ids = {g["compile_id"] for g in maps}
    assert len(ids) >= 2 and len(maps) >= 4, [(g["compile_id"],
                                               g["phase"]) for g in maps]


def test_kernel_fused_across_blocks():
    if _no_compile():
        return
    torch.manual_seed(0)
    model = Fusing()
    maps, _ = _run(model, "whole", fullgraph=True, shape=(4, 12))
    _check_marks(maps, _paths(model))
    _summary("cross-block fusion", maps)
    across = [c for c in _by_phase(maps, "forward")
              if {"body.blocks.0", "body.blocks.1"} <= set(c["fused"])]
    assert across and all(c["owner"] == "body" for c in across), maps


def test_kernels_are_profiler_scopes():
    if _no_compile():
        return
    from torch.profiler import profile, ProfilerActivity
    torch.manual_seed(0)
    maps, m = _run(MLP(), "whole", fullgraph=True)  # cached, if run before
    x = torch.randn(4, 8)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        m(x).sum().backward()
    seen = {e.name for e in prof.events()}
    scopes = {c["scope"] for g in maps for c in g["calls"]
              if c["kind"] == "kernel"}
    assert None not in scopes
    assert scopes == {n for n in seen if n.startswith("graph_")
                      and "_cpp_" in n}, (scopes, seen)
    externs = {c["scope"] for g in maps for c in g["calls"]
               if c["kind"] == "extern"}
    assert externs and externs <= seen, (externs, seen)


def _wrappers(fn):
    # The generated wrapper modules of what fn compiles, with inductor's
    # caches off (each compile generates its code) and the graph and AOT
    # ids, which count compiles in the process, made equal.
    import re
    from torch._inductor.utils import run_and_get_code
    torch._dynamo.reset()
    counters.clear()
    with _icfg.patch(fx_graph_cache=False):
        with torch._functorch.config.patch(enable_autograd_cache=False):
            _, codes = run_and_get_code(fn)
    got = {k: dict(counters[k]) for k in ("frames", "stats")}
    got["graph_break"] = sum(counters["graph_break"].values())
    return [re.sub(r"graph_\d+_", "graph_N_",
                   re.sub(r"# AOT ID: .*", "# AOT ID", c)) for c in codes], got


def _break_model_run():
    torch.manual_seed(0)
    m = torch.compile(Broken())
    m(torch.ones(2, 5)).sum().backward()


_break_result = []


def _break_run():
    """The graph-break model compiled with the map on and inductor's
    caches off, once: (maps, normalized wrapper code, counters)."""
    if not _break_result:
        start = len(_compile.maps)
        codes, got = _wrappers(_break_model_run)
        _break_result.append((_compile.compile_maps()[start:], codes, got))
    return _break_result[0]


def test_compiling_is_unchanged_by_the_map():
    if _no_compile():
        return
    _, codes, got = _break_run()
    _compile._unhook()
    try:
        without = _wrappers(_break_model_run)
    finally:
        _compile._hook_now()
    assert got == without[1], (got, without[1])
    assert got["graph_break"] == 1 and len(codes) == 4, got
    assert codes == without[0]
    # Kernel profiling adds scopes to the kernels, not kernels.
    import re
    with _icfg.patch({"cpp.enable_kernel_profile": False}):
        plain = _wrappers(_break_model_run)
    names = [sorted(set(re.findall(r"\bcpp_fused_\w+", c))) for c in plain[0]]
    assert names == [sorted(set(re.findall(r"\bcpp_fused_\w+", c)))
                     for c in codes]
    assert plain[1] == got


def test_maps_survive_inductors_cache():
    if _no_compile():
        return
    torch.manual_seed(0)
    first, _ = _run(MLP(d=11), "whole", shape=(2, 11))
    hits = _compile.stats["cache_hits"]
    again, _ = _run(MLP(d=11), "whole", shape=(2, 11))  # cache hits
    assert _compile.stats["cache_hits"] >= hits + 2
    strip = [{k: v for k, v in g.items() if k != "compile_id"}
             for g in first]
    assert [{k: v for k, v in g.items() if k != "compile_id"}
            for g in again] == strip
    _compile._by_code.clear()  # a later process: the map from disk
    disk, _ = _run(MLP(d=11), "whole", shape=(2, 11))
    assert [{k: v for k, v in g.items() if k != "compile_id"}
            for g in disk] == strip


def _provenance_run(model, how, shape):
    """Compiles model with inductor's own provenance tracking on as well
    (its debug globals, snapshotted per graph: inductor resets them around
    each compile). @return [(our map, [(kernel name, its nodes' stack
    traces)] in inductor's call order)] per graph."""
    import torch._inductor.debug as dbg
    import torch._inductor.graph as ig
    snaps = []
    real = ig.GraphLowering.compile_to_module

    def compile_to_module(self, *a, **k):
        dbg._inductor_triton_kernel_to_post_grad_node_info.clear()
        dbg._inductor_kernel_stack_trace.clear()
        out = real(self, *a, **k)
        snaps.append([(key.rsplit(":", 1)[0],
                       list(dbg._inductor_kernel_stack_trace.get(key, [])))
                      for key in dbg._inductor_triton_kernel_to_post_grad_node_info])
        return out
    ig.GraphLowering.compile_to_module = compile_to_module
    try:
        with _icfg.patch({"trace.provenance_tracking_level": 1,
                          "fx_graph_cache": False}):
            with torch._functorch.config.patch(enable_autograd_cache=False):
                maps, _ = _run(model, how, shape=shape, steps=1)
    finally:
        ig.GraphLowering.compile_to_module = real
    assert len(maps) == len(snaps), (len(maps), len(snaps))
    return list(zip(maps, snaps))


def _forward_lines():
    """(first, last) source line of each forward defined in this file,
    by class name."""
    import inspect
    out = {}
    for name, cls in list(globals().items()):
        if isinstance(cls, type) and issubclass(cls, nn.Module) and \
                "forward" in cls.__dict__:
            lines, first = inspect.getsourcelines(cls.forward)
            out[name] = (first, first + len(lines) - 1)
    return out


def test_map_agrees_with_inductors_provenance():
    """Inductor's own provenance tracking, an independent reading of the
    same compile: the kernels and extern calls it records are the map's,
    one for one in the wrapper's order; and the source lines of the nodes
    each call computes (their stack traces) run inside the owner's
    forward: for each module a call names (its owner, or each module it
    fused), the innermost module class of this file around it (the
    module itself, or for torch's own modules the one that calls them) is
    the innermost class of one of the call's stack traces."""
    if _no_compile():
        return
    import re
    here = os.path.basename(__file__).replace(".pyc", ".py")
    fwd = _forward_lines()
    frame = re.compile(r'File "([^"]+)", line (\d+), in forward')
    for name, model, how, shape in (
            ("decoder whole", Decoder(), "whole", (2, 5, 16)),
            ("MLP whole", MLP(d=9), "whole", (4, 9)),
            ("MLP per block", MLP(d=10), "block", (4, 10)),
            ("fusing whole", Fusing(d=7), "whole", (3, 7))):
        torch.manual_seed(0)
        mods = dict(model.named_modules())
        agree = total = 0
        for g, calls in _provenance_run(model, how, shape):
            assert [c["kernel"] for c in g["calls"]] == [k for k, _ in calls], \
                (name, g["phase"], [c["kernel"] for c in g["calls"]], calls)
            base = "blocks.0." if how == "block" else ""  # block-relative
            for c, (_, traces) in zip(g["calls"], calls):
                if c["mark"] == "unowned":
                    continue
                inner = set()
                for t in traces:
                    fs = [int(l) for f, l in frame.findall(t)
                          if os.path.basename(f) == here]
                    if fs:
                        ln = fs[-1]
                        inner |= {k for k, (a, b) in fwd.items() if a <= ln <= b}
                assert traces and inner, (name, c)
                for p in c["fused"] or [c["owner"]]:
                    path = (base + p).rstrip(".") if how == "block" else p
                    while type(mods[path]).__name__ not in fwd:
                        path = path.rpartition(".")[0]
                    total += 1
                    agree += type(mods[path]).__name__ in inner
                    assert type(mods[path]).__name__ in inner, \
                        (name, g["phase"], c["kernel"], p, inner)
        print("  %s: %d of %d owners agree with inductor's provenance"
              % (name, agree, total))


def test_a_failing_rule_is_counted_not_raised():
    if _no_compile():
        return
    failures = _compile.stats["failures"]
    real = R.attribute

    def broken(entries):
        raise RuntimeError("rule bug")
    R.attribute = broken
    try:
        torch.manual_seed(0)
        model = MLP(d=13)
        x = torch.randn(2, 13)
        want = model(x)
        _run(model, "whole", shape=(2, 13), steps=1)
        got = torch.compile(model)(x)
    finally:
        R.attribute = real
    assert _compile.stats["failures"] > failures
    assert torch.allclose(want, got, atol=1e-5)


def _no_compile():
    if torch is None:
        _skip()
        return True
    if NO_COMPILE is not None:
        _skip(NO_COMPILE)
        return True
    return False


def _skip(why=None):
    pyunit.skip(why or MISSING, torch is None)


if __name__ == "__main__":
    pyunit.main(globals(), MISSING if torch is None else None)
