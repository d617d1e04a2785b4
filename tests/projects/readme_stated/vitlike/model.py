"""Modules nothing in the package builds: the README's usage example states their sizes."""

import torch.nn as nn


class ReAttention(nn.Module):
    """The norm over the heads axis is sized by the model width: it fails for the
    README's configuration (64 wide, 4 heads), as for any where the two differ (with no
    configuration stated, the first demand that they are equal would be assumed)."""

    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, dim * 3)
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        b, n, _ = x.shape
        q, k, _ = self.qkv(x).chunk(3, dim=-1)
        q = q.view(b, n, self.heads, -1).transpose(1, 2)
        k = k.view(b, n, self.heads, -1).transpose(1, 2)
        scores = (q @ k.transpose(-1, -2)).permute(0, 2, 3, 1)
        return self.norm(scores)  # E: GPU100


class Mixer(nn.Module):
    """Token mixing over the sequence axis: right for the README's sizes."""

    def __init__(self, tokens, dim):
        super().__init__()
        self.tokens = nn.Linear(tokens, tokens)
        self.channels = nn.Linear(dim, dim)

    def forward(self, x):
        x = x + self.tokens(x.transpose(1, 2)).transpose(1, 2)
        return x + self.channels(x)
