"""The package's nn.Module.__call__ (one Python function, run in C): with
capture on from the start it is in place, and TorchScript (trace,
script) and FX (symbolic_trace) work through it; torch.compile traces
through it (its Python) with no graph break, fullgraph=True, and dynamo
warns of nothing, and it stays the same function (torch 2.x;
t_torch2_compile.sh compares graphs with and without the agent). Prints
"ok" or fails with what differs."""
import sys
import warnings

import gradtrace

gradtrace.install_when_torch_imported()
import torch  # noqa: E402
from torch import nn  # noqa: E402

import gradtrace._switch as W  # noqa: E402

# The package's start-up leaves torch._dynamo alone (importing it costs a
# training job over a second); the C form is usable all the same.
assert "torch._dynamo" not in sys.modules, "the package imported torch._dynamo"

assert W._c_call_ok, "C __call__ not usable on this torch"
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
x = torch.randn(2, 4)
model(x)
assert nn.Module.__call__ is W._call_wrapper, "ours not in: %r" % (
    nn.Module.__call__,)
# TorchScript and FX with the C form in place: trace, script and
# symbolic_trace the model, train a step through each, get its outputs.
import inspect  # noqa: E402
import torch.fx  # noqa: E402
want = model(x)
opt = torch.optim.SGD(model.parameters(), lr=0.0)
with warnings.catch_warnings():  # 2.x: TorchScript is deprecated
    warnings.simplefilter("ignore")
    made_all = (torch.jit.trace(model, x), torch.jit.script(model),
                torch.fx.symbolic_trace(model))
for made in made_all:
    opt.zero_grad()
    out = made(x)
    out.sum().backward()
    opt.step()
    assert torch.allclose(out, want), type(made)
assert nn.Module.__call__ is W._call_wrapper
assert "self" in str(inspect.signature(nn.Module.__call__))
if not hasattr(torch, "compile"):
    print("ok (TorchScript and FX; no torch.compile)")
    sys.exit(0)
compiled = torch.compile(model, backend="eager", fullgraph=True)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    compiled(x).sum().backward()
from torch._dynamo.utils import counters  # noqa: E402
breaks = dict(counters["graph_break"])
assert not breaks, "graph breaks: %r" % (breaks,)
dyn = [str(w.message) for w in caught if "Dynamo" in str(w.message)]
assert not dyn, dyn
assert nn.Module.__call__ is W._call_wrapper, "after compiling: %r" % (
    nn.Module.__call__,)
print("ok")
