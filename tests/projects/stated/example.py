"""Builds the model with the sizes it is used with."""

import torch
from net import Tower

model = Tower(width=64, hidden=128, depth=2)


def features(batch):
    return model(batch)


if __name__ == "__main__":
    print(features(torch.randn(8, 64)).shape)
