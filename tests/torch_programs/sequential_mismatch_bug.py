"""A regression MLP built with nn.Sequential."""

import torch
import torch.nn as nn

model = nn.Sequential(
    nn.Linear(13, 64),
    nn.ReLU(),
    nn.Linear(64, 32),
    nn.ReLU(),
    nn.Linear(64, 1),
)
x = torch.randn(20, 13)
y = torch.randn(20, 1)
loss = nn.MSELoss()(model(x), y)  # E: GPU100
loss.backward()
