"""Token features normalised with LayerNorm before a projection."""

import torch
import torch.nn as nn

x = torch.randn(4, 12, 128)
norm = nn.LayerNorm(64)
proj = nn.Linear(128, 32)
y = proj(norm(x))  # E: GPU100
y.sum().backward()
