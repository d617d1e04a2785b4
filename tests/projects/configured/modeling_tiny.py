import torch.nn as nn

from .configuration_tiny import TinyConfig
from .layers import ACT2FN, Conv1D


class TinyEmbeddings(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.words = nn.Embedding(config.vocab_size, config.hidden_size)
        self.positions = nn.Embedding(config.max_positions, config.d_ff)

    def forward(self, input_ids, position_ids):
        embeddings = self.words(input_ids)
        embeddings += self.positions(position_ids)  # E: GPU010
        return embeddings


class TinyBlock(nn.Module):
    def __init__(self, config: TinyConfig):
        super().__init__()
        self.up = nn.Linear(config.d_model, config.d_ff)
        self.down = nn.Linear(config.d_ff, config.hidden_size)

    def forward(self, x):
        return self.down(self.up(x))


class TinyAttention(nn.Module):
    """The imported layer is run: it makes two thirds of what is split in three."""

    def __init__(self, config):
        super().__init__()
        self.split = config.d_model
        self.c_attn = Conv1D(2 * config.d_model, config.d_model)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(self.split, dim=2)  # E: GPU107
        return q + k + v


class TinyFeedForward(nn.Module):
    """The activation comes from the project's table: its output keeps the shape, so the
    output layer built for the model width meets the feed-forward width."""

    def __init__(self, config):
        super().__init__()
        self.up = nn.Linear(config.d_model, config.d_ff)
        self.act = ACT2FN["gelu"]
        self.down = nn.Linear(config.d_model, config.d_model)

    def forward(self, x):
        return self.down(self.act(self.up(x)))  # E: GPU100


class TinyGatedFeedForward(nn.Module):
    """The activation's key and the gate are computed by the configuration's `__init__`
    (`feed_forward_proj.split("-")`): the down projection reads the model width."""

    def __init__(self, config):
        super().__init__()
        self.up = nn.Linear(config.d_model, config.n_inner)
        self.act = ACT2FN[config.dense_act_fn]
        self.gate = nn.Linear(config.d_model, config.n_inner) if config.is_gated_act else None
        self.down = nn.Linear(config.d_model, config.d_model)

    def forward(self, x):
        h = self.act(self.up(x))
        if self.gate is not None:
            h = h * self.gate(x)
        return self.down(h)  # E: GPU100


class TinyGatedFeedForwardRight(nn.Module):
    """Its twin, right for every configuration."""

    def __init__(self, config):
        super().__init__()
        self.up = nn.Linear(config.d_model, config.n_inner)
        self.act = ACT2FN[config.dense_act_fn]
        self.gate = nn.Linear(config.d_model, config.n_inner) if config.is_gated_act else None
        self.down = nn.Linear(config.n_inner, config.d_model)

    def forward(self, x):
        h = self.act(self.up(x))
        if self.gate is not None:
            h = h * self.gate(x)
        return self.down(h)
