"""Splitting the model dimension into attention heads with unflatten."""

import torch

x = torch.randn(2, 10, 64)
heads = x.unflatten(-1, (8, 6))  # E: GPU013
merged = heads.flatten(-2)
print(merged.shape)
