"""A bag-of-embeddings text classifier."""

import torch
import torch.nn as nn


class BagModel(nn.Module):
    def __init__(self, vocab=1000, dim=32, classes=5):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.out = nn.Linear(dim, classes)

    def forward(self, ids):
        e = self.emb(ids)
        return self.out(e.mean(dim=1))


model = BagModel()
ids = torch.randint(0, 1000, (8, 12))
logits = model(ids)
loss = nn.functional.cross_entropy(logits, torch.randint(0, 5, (8,)))
loss.backward()
