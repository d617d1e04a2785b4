"""Attention with torch.nn.functional.scaled_dot_product_attention."""

import torch
import torch.nn.functional as F

q = torch.randn(2, 4, 10, 32)
k = torch.randn(2, 4, 12, 32)
v = torch.randn(2, 4, 12, 32)
out = F.scaled_dot_product_attention(q, k, v)
print(out.shape)
