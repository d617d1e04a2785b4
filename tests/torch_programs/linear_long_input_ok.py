"""Counts fed to a linear model must be floats."""

import torch
import torch.nn as nn

counts = torch.randint(0, 20, (8, 6))
model = nn.Linear(6, 2)
out = model(counts.float())
print(out.shape)
