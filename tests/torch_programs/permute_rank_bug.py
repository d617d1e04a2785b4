"""Channels-last images converted for a convolution."""

import torch
import torch.nn as nn

images = torch.rand(4, 32, 32, 3)
conv = nn.Conv2d(3, 8, 3)
out = conv(images.permute(0, 3, 1))  # E: GPU017
print(out.shape)
