"""A convolutional autoencoder bottleneck with a dense code."""

import torch
import torch.nn as nn


class AE(nn.Module):
    def __init__(self, code=32):
        super().__init__()
        self.enc = nn.Sequential(nn.Conv2d(1, 8, 3, stride=2, padding=1), nn.ReLU())
        self.to_code = nn.Linear(8 * 14 * 14, code)
        self.from_code = nn.Linear(code, 8 * 14 * 14)

    def forward(self, x):
        h = self.enc(x)
        z = self.to_code(h.reshape(h.size(0), -1))
        h = self.from_code(z).view(-1, 8, 15, 14)  # E: GPU013
        return h


model = AE()
out = model(torch.rand(5, 1, 28, 28))
out.abs().mean().backward()
