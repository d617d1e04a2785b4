"""Targets read from a float array must be converted to class indices."""

import torch
import torch.nn as nn

logits = torch.randn(6, 3, requires_grad=True)
raw = torch.tensor([0.0, 2.0, 1.0, 1.0, 0.0, 2.0])
loss = nn.functional.cross_entropy(logits, raw)  # E: GPU105
loss.backward()
