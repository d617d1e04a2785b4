"""A deep stack of conv/pool stages on small 16x16 patches."""

import torch
import torch.nn as nn

conv1 = nn.Conv2d(1, 8, 3, padding=1)
conv2 = nn.Conv2d(8, 16, 3, padding=1)
pool = nn.MaxPool2d(2)
x = torch.randn(2, 1, 16, 16)
x = pool(conv1(x))
x = pool(conv2(x))
x = pool(x)
x = pool(x)
x = pool(x)  # E: GPU102
print(x.shape)
