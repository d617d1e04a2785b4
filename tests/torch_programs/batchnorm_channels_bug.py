"""Conv, batch norm, ReLU: the standard conv block."""

import torch
import torch.nn as nn

block = nn.Sequential(
    nn.Conv2d(3, 24, 3, padding=1),
    nn.BatchNorm2d(32),
    nn.ReLU(),
    nn.MaxPool2d(2),
)
x = torch.randn(6, 3, 20, 20)
y = block(x)  # E: GPU100
print(y.shape)
