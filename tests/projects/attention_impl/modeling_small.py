"""The attention function is the module's eager one unless the configuration names
another from transformers' registry; the configuration leaves it open, so the eager one
is run (every registered one returns its output in the same shape)."""

import torch.nn as nn
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from .configuration_small import SmallConfig


def eager_attention_forward(module, query, key, value):
    scores = (query @ key.transpose(-1, -2)).softmax(-1)
    return (scores @ value).transpose(1, 2)


class HeadsLeftUnmerged(nn.Module):
    def __init__(self, config: SmallConfig):
        super().__init__()
        self.config = config
        self.heads = config.num_heads
        self.head_dim = config.hidden_size // config.num_heads
        self.qkv = nn.Linear(config.hidden_size, 3 * config.hidden_size)
        self.out = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, x):
        b, t, _ = x.shape
        qkv = self.qkv(x).view(b, t, 3, self.heads, self.head_dim)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        attention_interface = eager_attention_forward
        if self.config._attn_implementation != "eager":
            attention_interface = ALL_ATTENTION_FUNCTIONS[self.config._attn_implementation]
        context = attention_interface(self, q, k, v)
        return self.out(context.reshape(*context.shape[:-1], -1))  # E: GPU100


class HeadsMergedOk(nn.Module):
    def __init__(self, config: SmallConfig):
        super().__init__()
        self.config = config
        self.heads = config.num_heads
        self.head_dim = config.hidden_size // config.num_heads
        self.qkv = nn.Linear(config.hidden_size, 3 * config.hidden_size)
        self.out = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, x):
        b, t, _ = x.shape
        qkv = self.qkv(x).view(b, t, 3, self.heads, self.head_dim)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        attention_interface = eager_attention_forward
        if self.config._attn_implementation != "eager":
            attention_interface = ALL_ATTENTION_FUNCTIONS[self.config._attn_implementation]
        context = attention_interface(self, q, k, v)
        return self.out(context.reshape(*context.shape[:-2], -1))
