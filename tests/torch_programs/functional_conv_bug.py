"""A convolution written with torch.nn.functional and explicit weights."""

import torch
import torch.nn.functional as F

weight = torch.randn(8, 1, 5, 5, requires_grad=True)
bias = torch.zeros(8, requires_grad=True)
x = torch.randn(2, 3, 24, 24)
y = F.conv2d(x, weight, bias, stride=2, padding=2)  # E: GPU100
z = F.avg_pool2d(y, 2)
z.mean().backward()
