"""Picking the logit of one class out of a score matrix."""

import torch

scores = torch.randn(16, 10)
last_class = scores[:, 9]
first_class = scores[:, 0]
margin = last_class - first_class
print(margin.shape)
