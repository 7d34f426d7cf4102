"""C++ exceptions unwinding through the agent's hooks: a custom Function
whose backward raises (the error crosses evaluate_function and
Engine::execute), and a second backward through a freed graph (raised
inside Engine::execute). The program must see torch's own errors and carry
on; tests/e2e/t_torch_exceptions.sh then checks the trace is balanced."""
import torch
class Bad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x): return x * 2
    @staticmethod
    def backward(ctx, g): raise RuntimeError("boom in backward")
x = torch.randn(4, requires_grad=True)
for i in range(3):
    try:
        (Bad.apply(x * 3) + 1).sum().backward()
    except RuntimeError as e:
        print("caught", str(e)[:30])
    y = (x * 2).sum(); y.backward(); y2 = (x*3).sum()
try:
    y.backward()   # second backward through freed graph
except RuntimeError as e:
    print("caught2", str(e)[:30])
print("ok", x.grad.shape)


# A forward that raises inside nested modules, caught outside the model:
# on torch 1.13 the module post-hooks do not run, so the package must close
# the stale scopes itself when the model is called again.
class Flaky(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fail = True
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        if self.fail:
            raise ValueError("flaky forward")
        return self.lin(x)


model = torch.nn.Sequential(torch.nn.Linear(4, 4),
                            torch.nn.Sequential(Flaky()))
inp = torch.randn(2, 4)
try:
    model(inp)
except ValueError:
    print("caught3")
model[1][0].fail = False
model(inp).sum().backward()
print("ok2")
