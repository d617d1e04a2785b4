"""A layer of the project's own, imported by the model file (as transformers' `Conv1D`)."""

from collections import OrderedDict

import torch
import torch.nn as nn


class Conv1D(nn.Module):
    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))

    def forward(self, x):
        size_out = x.size()[:-1] + (self.nf,)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        return x.view(size_out)


class GELUActivation(nn.Module):
    def forward(self, input):
        return nn.functional.gelu(input)


class ClassInstantier(OrderedDict):
    """A table of activation classes that builds the one asked for (transformers' ACT2FN)."""

    def __getitem__(self, key):
        content = super().__getitem__(key)
        cls, kwargs = content if isinstance(content, tuple) else (content, {})
        return cls(**kwargs)


ACT2FN = ClassInstantier({"gelu": GELUActivation, "relu": (nn.ReLU, {"inplace": False})})
