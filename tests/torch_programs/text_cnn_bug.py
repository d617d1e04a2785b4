"""A 1-d convolutional text classifier over word embeddings."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class TextCNN(nn.Module):
    def __init__(self, vocab=2000, dim=50, filters=32, classes=2):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.conv = nn.Conv1d(dim, filters, kernel_size=3)
        self.fc = nn.Linear(filters, classes)

    def forward(self, ids):
        x = self.emb(ids)
        x = F.relu(self.conv(x))  # E: GPU100
        x = x.max(dim=2).values
        return self.fc(x)


model = TextCNN()
ids = torch.randint(0, 2000, (4, 30))
loss = F.cross_entropy(model(ids), torch.tensor([0, 1, 1, 0]))
loss.backward()
