"""Multi-head attention scores written with einsum."""

import torch

b, h, t, d = 2, 4, 9, 16
q = torch.randn(b, h, t, d)
k = torch.randn(b, h, t, d)
v = torch.randn(b, h, t, d)
scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / d**0.5
out = torch.einsum("bhqk,bhkd->bhqd", scores.softmax(-1), v)
print(out.shape)
