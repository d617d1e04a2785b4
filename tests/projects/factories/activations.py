"""Activation layers of the project's own, picked by name elsewhere."""

import torch
from torch import nn
from torch.nn import functional as F


class Sigmoid(nn.Module):
    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, x):
        return x.sigmoid_() if self.inplace else x.sigmoid()


class HardSigmoid(nn.Module):
    def forward(self, x):
        return F.relu6(x + 3.0) / 6.0


def swish(x):
    return x * torch.sigmoid(x)
