"""Splitting the model dimension into attention heads with unflatten."""

import torch

x = torch.randn(2, 10, 64)
heads = x.unflatten(-1, (8, 8))
merged = heads.flatten(-2)
print(merged.shape)
