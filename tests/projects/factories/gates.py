"""Channel attention whose gate is made by name in another module (timm's ECA and SE):
`forward` pools the last two axes of `x` first, so `x` is 4-d."""

from torch import nn

from .factory import create_layer


class ChannelGate(nn.Module):
    """The 1-d conv loses its padding: two channels short, expanded against all of them
    (it works only at 3 channels, where one side is 1 by coincidence)."""

    def __init__(self, kernel_size: int = 3, gate_layer: str = "Sigmoid"):
        super().__init__()
        self.conv = nn.Conv1d(1, 1, kernel_size=kernel_size, padding=0, bias=False)
        self.gate = create_layer(gate_layer)

    def forward(self, x):
        y = x.mean((2, 3)).view(x.shape[0], 1, -1)
        y = self.conv(y)
        y = self.gate(y).view(x.shape[0], -1, 1, 1)
        return x * y.expand_as(x)  # E: GPU010


class ChannelGateOk(nn.Module):
    def __init__(self, kernel_size: int = 3, gate_layer: str = "Sigmoid"):
        super().__init__()
        assert kernel_size % 2 == 1
        padding = (kernel_size - 1) // 2
        self.conv = nn.Conv1d(1, 1, kernel_size=kernel_size, padding=padding, bias=False)
        self.gate = create_layer(gate_layer)

    def forward(self, x):
        y = x.mean((2, 3)).view(x.shape[0], 1, -1)
        y = self.conv(y)
        y = self.gate(y).view(x.shape[0], -1, 1, 1)
        return x * y.expand_as(x)


class SqueezeGate(nn.Module):
    """The excitation is left at the squeezed width: a quarter of the channels, scaled
    against all of them (the gate is found by name, so what follows it is checked)."""

    def __init__(self, channels: int = 64, gate_layer: str = "ReLU"):
        super().__init__()
        self.fc = nn.Linear(channels, channels // 4)
        self.gate = create_layer(gate_layer)

    def forward(self, x):
        y = self.gate(self.fc(x.mean((2, 3))))
        return x * y[:, :, None, None]  # E: GPU010


class SqueezeGateOk(nn.Module):
    def __init__(self, channels: int = 64, gate_layer: str = "ReLU"):
        super().__init__()
        self.fc = nn.Linear(channels, channels)
        self.gate = create_layer(gate_layer)

    def forward(self, x):
        y = self.gate(self.fc(x.mean((2, 3))))
        return x * y[:, :, None, None]


class VideoGateOk(nn.Module):
    """Pooled over two middle axes of a 5-d clip: not the last ones, so no rank is taken."""

    def __init__(self, gate_layer: str = "identity"):
        super().__init__()
        self.gate = create_layer(gate_layer)

    def forward(self, x):
        y = self.gate(x.mean((1, 2)))
        return x * y[:, None, None]
