"""A U-Net style skip connection: upsample, then add the encoder features."""

import torch
import torch.nn as nn
import torch.nn.functional as F

enc = nn.Conv2d(3, 16, 3, padding=1)
down = nn.MaxPool2d(2)
x = torch.randn(2, 3, 32, 32)
skip = enc(x)
low = down(skip)
up = F.interpolate(low, scale_factor=2)
merged = up + skip
print(merged.shape)
