"""A densely connected network as torchvision writes it (`dense_block_ok.py`), the width
after a block counted as if it had one layer: the transition's norm meets more channels."""

from collections import OrderedDict

import torch
import torch.nn as nn
import torch.nn.functional as F


class DenseLayer(nn.Module):
    def __init__(self, in_features: int, growth: int) -> None:
        super().__init__()
        self.norm = nn.BatchNorm2d(in_features)
        self.conv = nn.Conv2d(in_features, growth, kernel_size=3, padding=1, bias=False)

    def join(self, inputs: list[torch.Tensor]) -> torch.Tensor:
        return torch.cat(inputs, 1)

    def forward(self, inputs: list[torch.Tensor]) -> torch.Tensor:
        x = self.join(inputs)
        return self.conv(F.relu(self.norm(x)))


class DenseBlock(nn.ModuleDict):
    def __init__(self, num_layers: int, in_features: int, growth: int) -> None:
        super().__init__()
        for i in range(num_layers):
            layer = DenseLayer(in_features + i * growth, growth)
            self.add_module("denselayer%d" % (i + 1), layer)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = [x]
        for name, layer in self.items():
            features.append(layer(features))
        return torch.cat(features, 1)


class Transition(nn.Sequential):
    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        self.norm = nn.BatchNorm2d(in_features)
        self.conv = nn.Conv2d(in_features, out_features, kernel_size=1, bias=False)
        self.pool = nn.AvgPool2d(kernel_size=2, stride=2)


class DenseNet(nn.Module):
    def __init__(self, growth: int = 8, blocks: tuple[int, int] = (3, 2), classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            OrderedDict([("conv0", nn.Conv2d(3, 16, kernel_size=3, padding=1, bias=False))])
        )
        width = 16
        for i, num_layers in enumerate(blocks):
            self.features.add_module("denseblock%d" % (i + 1), DenseBlock(num_layers, width, growth))
            width = width + growth  # the block counted as one layer
            if i != len(blocks) - 1:
                self.features.add_module("transition%d" % (i + 1), Transition(width, width // 2))
                width = width // 2
        self.features.add_module("norm5", nn.BatchNorm2d(width))
        self.classifier = nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.features(x))  # E: GPU100
        out = torch.flatten(F.adaptive_avg_pool2d(out, (1, 1)), 1)
        return self.classifier(out)


net = DenseNet()
print(net(torch.randn(2, 3, 16, 16)).shape)
