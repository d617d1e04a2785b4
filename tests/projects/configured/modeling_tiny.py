import torch.nn as nn

from .configuration_tiny import TinyConfig


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
