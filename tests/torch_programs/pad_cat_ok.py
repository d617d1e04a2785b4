"""Padding a shorter sequence so two batches can be concatenated."""

import torch
import torch.nn.functional as F

a = torch.randn(4, 10)
b = torch.randn(4, 7)
b = F.pad(b, (0, 3))
both = torch.cat([a, b], dim=0)
print(both.shape)
