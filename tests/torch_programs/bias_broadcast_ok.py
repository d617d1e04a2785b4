"""A hand-written linear layer with an explicit bias."""

import torch

x = torch.randn(16, 32)
w = torch.randn(32, 10)
b = torch.zeros(10)
y = x @ w + b
print(y.shape)
