"""Batched bilinear scores between query and memory sets."""

import torch

queries = torch.randn(8, 5, 16)
memory = torch.randn(8, 7, 16)
scores = torch.bmm(queries, memory.transpose(1, 2))
weights = torch.softmax(scores, dim=-1)
read = torch.bmm(weights, memory)
print(read.shape)
