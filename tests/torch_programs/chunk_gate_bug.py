"""A gated linear unit: half the features gate the other half."""

import torch
import torch.nn as nn

proj = nn.Linear(20, 64)
out = nn.Linear(64, 5)
x = torch.randn(9, 20)
a, b = proj(x).chunk(2, dim=-1)
h = a * torch.sigmoid(b)
y = out(h)  # E: GPU100
print(y.shape)
