"""Masking padded positions of a batch of sequences."""

import torch

scores = torch.randn(4, 6, 6)
lengths_mask = torch.ones(4, 6, dtype=torch.bool)
mask = lengths_mask.unsqueeze(1).expand(4, 6, 6)
scores = scores.masked_fill(~mask, float("-inf"))
print(scores.shape)
