"""Class probabilities from logits."""

import torch

logits = torch.randn(8, 5)
probs = torch.softmax(logits, dim=2)  # E: GPU014
print(probs.sum(dim=1))
