"""A binary classifier trained with BCEWithLogitsLoss."""

import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 1))
x = torch.randn(32, 10)
y = torch.randint(0, 2, (32,)).float()
criterion = nn.BCEWithLogitsLoss()
loss = criterion(model(x).squeeze(1), y)
loss.backward()
