"""A residual MLP whose layers live in a ModuleList."""

import torch
import torch.nn as nn


class ResMLP(nn.Module):
    def __init__(self, dim=32, depth=3):
        super().__init__()
        self.inp = nn.Linear(10, dim)
        self.layers = nn.ModuleList([nn.Linear(dim, dim) for _ in range(depth)])
        self.out = nn.Linear(dim, 1)

    def forward(self, x):
        h = self.inp(x)  # E: GPU100
        for layer in self.layers:
            h = h + torch.relu(layer(h))
        return self.out(h)


model = ResMLP()
y = model(torch.randn(7, 12))
y.sum().backward()
