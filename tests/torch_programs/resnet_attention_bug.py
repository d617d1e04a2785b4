"""A small ResNet with a conditional shortcut, attention over positions, and an eval pass."""

from collections import OrderedDict

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class Block(nn.Module):
    expansion = 1

    def __init__(self, in_planes, planes, stride=1):
        super(Block, self).__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, kernel_size=(3, 1), stride=1, padding=(1, 0), bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != self.expansion * planes:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_planes, self.expansion * planes, kernel_size=1, stride=stride, bias=False),
                nn.BatchNorm2d(self.expansion * planes),
            )

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += self.shortcut(x)
        return F.relu(out)


class Net(nn.Module):
    def __init__(self, num_classes=10, **kwargs):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        self.layer1 = nn.Sequential(Block(16, 16), Block(16, 32, stride=2))
        self.drop = nn.Dropout2d(0.1)
        self.attn = nn.MultiheadAttention(32, 4, batch_first=True)
        self.head = nn.Sequential(OrderedDict([("fc", nn.Linear(32, num_classes))]))
        self.fc = nn.Linear(16, num_classes)

    def forward(self, x):
        x = self.layer1(F.relu(self.stem(x)))
        if self.training:
            x = self.drop(x)
        b, c, h, w = x.shape
        seq = x.permute(0, 2, 3, 1).contiguous().view(b, h * w, c)
        seq, _ = self.attn(seq, seq, seq)
        pooled = x.mean([2, 3])
        feats = F.max_pool2d(x, kernel_size=2, stride=2)
        flat = torch.flatten(feats, start_dim=1)
        return self.fc(pooled) + 0 * flat.sum(), seq  # E: GPU100


X = torch.randn(20, 3, 16, 16)
Y = torch.randint(0, 10, (20,))
loader = DataLoader(TensorDataset(X, Y), batch_size=8, shuffle=True)
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
correct = 0
for epoch in range(2):
    model.train()
    for i, (inputs, labels) in enumerate(loader):
        outputs, _ = model(inputs)
        loss = F.cross_entropy(outputs, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        _, predicted = torch.max(outputs.data, 1)
        correct += (predicted == labels).sum().item()
model.eval()
with torch.no_grad():
    out, seq = model(X[:4])
    probs = F.softmax(out, dim=1).numpy()
    top = np.argmax(probs, axis=1)
    print(top.shape, np.mean(probs, axis=0).shape, probs.reshape(len(probs), -1).shape)
