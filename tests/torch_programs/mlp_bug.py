"""A two-layer MLP on flattened MNIST-sized inputs, one SGD step."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self, hidden=256):
        super().__init__()
        self.fc1 = nn.Linear(784, hidden)
        self.fc2 = nn.Linear(512, 10)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        return self.fc2(x)  # E: GPU100


model = MLP()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(64, 784)
y = torch.randint(0, 10, (64,))
loss = F.cross_entropy(model(x), y)
opt.zero_grad()
loss.backward()
opt.step()
