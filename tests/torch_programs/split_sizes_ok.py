"""Splitting a packed feature vector into its named parts."""

import torch

packed = torch.randn(10, 24)
pos, vel, extra = torch.split(packed, [3, 3, 18], dim=1)
speed = vel.norm(dim=1)
print(pos.shape, speed.shape, extra.shape)
