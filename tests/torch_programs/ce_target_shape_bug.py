"""A classifier whose labels come as a column vector from a CSV-like array."""

import torch
import torch.nn as nn
import torch.nn.functional as F

features = torch.randn(32, 20)
labels = torch.randint(0, 4, (32, 1))
model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 4))
opt = torch.optim.Adam(model.parameters())
for step in range(3):
    logits = model(features)
    loss = F.cross_entropy(logits, labels)  # E: GPU104
    opt.zero_grad()
    loss.backward()
    opt.step()
