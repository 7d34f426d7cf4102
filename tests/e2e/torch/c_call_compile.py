"""nn.Module.__call__ in C until dynamo compiles (torch 2.x): with capture
on from the start, the package's __call__ is the C form; torch.compile's
first compilation switches it to the Python form before dynamo traces
any module call, so the compiled model has no graph break and dynamo
warns of nothing. Prints "ok" or fails with what differs."""
import sys
import warnings

import gradtrace

gradtrace.install_when_torch_imported()
import torch  # noqa: E402
from torch import nn  # noqa: E402

import gradtrace._modules as M  # noqa: E402

if not hasattr(torch, "compile"):
    print("ok (no torch.compile)")
    sys.exit(0)
assert M._c_call_ok, "C __call__ not usable on this torch"
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
x = torch.randn(2, 4)
model(x)
assert nn.Module.__call__ is M._c_call, "before compiling: %r" % (
    nn.Module.__call__,)
compiled = torch.compile(model, backend="eager")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    compiled(x).sum().backward()
from torch._dynamo.utils import counters  # noqa: E402
breaks = dict(counters["graph_break"])
assert not breaks, "graph breaks: %r" % (breaks,)
dyn = [str(w.message) for w in caught if "Dynamo" in str(w.message)]
assert not dyn, dyn
assert nn.Module.__call__ is M._call_wrapper, "after compiling: %r" % (
    nn.Module.__call__,)
print("ok")
