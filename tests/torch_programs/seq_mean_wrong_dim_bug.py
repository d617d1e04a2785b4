"""A sequence encoder: embeddings averaged over time, then a linear classifier."""

import torch
import torch.nn as nn

vocab, dim, seq_len, batch = 500, 48, 20, 6
emb = nn.Embedding(vocab, dim)
clf = nn.Linear(dim, 3)
tokens = torch.randint(0, vocab, (batch, seq_len))
pooled = emb(tokens).mean(dim=2)
logits = clf(pooled)  # E: GPU100
loss = nn.CrossEntropyLoss()(logits, torch.randint(0, 3, (batch,)))
loss.backward()
