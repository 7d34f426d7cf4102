"""Models the torch benchmarks share (bench_torch.py, bench_ops.py)."""


def block_stack(hidden, blocks=24):
    """blocks residual blocks Linear -> GELU -> Linear of width hidden:
    framework-overhead-bound at hidden 8, batch 1; dispatcher-bound at
    hidden 32, batch 32."""
    from torch import nn

    class Block(nn.Module):
        def __init__(self, h):
            super().__init__()
            self.fc1 = nn.Linear(h, h)
            self.act = nn.GELU()
            self.fc2 = nn.Linear(h, h)

        def forward(self, x):
            return x + self.fc2(self.act(self.fc1(x)))

    return nn.Sequential(*[Block(hidden) for _ in range(blocks)])
