#!/usr/bin/env python3
"""A training loop whose DataLoader has two worker processes, each
applying a module (an nn.Linear "augmentation") to every sample: under
`gradtrace record` the workers record too. For
tests/e2e/t_report_procs.sh. Silent on success."""
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset
torch.set_num_threads(1)
class DS(Dataset):
    def __init__(self):
        self.aug = nn.Linear(16, 16)  # a module used in the workers
    def __len__(self): return 64
    def __getitem__(self, i):
        with torch.no_grad():
            x = torch.randn(16)
            y = self.aug(x)
        return y, i % 3
class Net(nn.Module):
    def __init__(s):
        super().__init__(); s.fc1 = nn.Linear(16, 32); s.fc2 = nn.Linear(32, 3)
    def forward(s, x): return s.fc2(torch.relu(s.fc1(x)))
if __name__ == "__main__":
    m = Net(); opt = torch.optim.SGD(m.parameters(), lr=0.01)
    for x, y in DataLoader(DS(), batch_size=8, num_workers=2):
        opt.zero_grad(); nn.functional.cross_entropy(m(x), y).backward(); opt.step()
