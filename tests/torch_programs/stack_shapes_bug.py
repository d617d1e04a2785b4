"""Stacking per-view feature vectors into one tensor."""

import torch

front = torch.randn(8, 128)
side = torch.randn(8, 128)
top = torch.randn(8, 64)
views = torch.stack([front, side, top], dim=1)  # E: GPU103
pooled = views.mean(dim=1)
print(pooled.shape)
