"""A regression loss between predictions and targets."""

import torch
import torch.nn.functional as F

pred = torch.randn(12, 3, requires_grad=True)
target = torch.randn(12, 4)
loss = F.mse_loss(pred, target)  # E: GPU010
loss.backward()
