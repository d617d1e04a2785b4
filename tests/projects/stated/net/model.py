"""A model whose sizes only a caller states: `example.py` builds it with literal sizes.

Checked on its own, `width` and `hidden` are free sizes and `Linear(width, width)` after
`Linear(width, hidden)` could hold (when they are equal); the configuration the project
states (`hidden=128`, `width=64`) says it cannot.
"""

import torch.nn as nn


class Tower(nn.Module):
    def __init__(self, *, width, hidden, depth):
        super().__init__()
        self.up = nn.Linear(width, hidden)
        self.down = nn.Linear(width, width)
        self.depth = depth

    def forward(self, x):
        return self.down(self.up(x))  # E: GPU100
