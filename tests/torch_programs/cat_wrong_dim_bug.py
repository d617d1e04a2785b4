"""Two feature branches joined by concatenation before a classifier head."""

import torch
import torch.nn as nn


class TwoTower(nn.Module):
    def __init__(self):
        super().__init__()
        self.text = nn.Linear(300, 64)
        self.image = nn.Linear(512, 32)
        self.head = nn.Linear(96, 2)

    def forward(self, t, i):
        a = torch.relu(self.text(t))
        b = torch.relu(self.image(i))
        h = torch.cat([a, b], dim=0)  # E: GPU103
        return self.head(h)


model = TwoTower()
out = model(torch.randn(16, 300), torch.randn(16, 512))
out.sum().backward()
