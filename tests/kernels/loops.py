"""`for` loops in tensor-level kernels: unrolled, each iteration checked with its own shapes."""

from mimir.array import Dim, Tensor, float32, gpu

N = Dim("N")
LAYERS = 3


@gpu
def stacked_layers(x: Tensor[float32, N, 8], w: Tensor[float32, 8, 8]) -> Tensor[float32, N, 8]:
    h = x
    for i in range(LAYERS):
        h = (h @ w * 0.5).tanh() + i * 0.25
    return h


@gpu
def shrinking_window(x: Tensor[float32, N, 8]) -> Tensor[float32, N, 5]:
    h = x
    for _ in range(3):
        h = h[:, 1:] + h[:, :-1]
    return h


@gpu
def nested(x: Tensor[float32, N, 4]) -> Tensor[float32, N]:
    total = x[:, 0] * 0.0
    for i in range(4):
        for j in range(i, 4, 2):
            total = total + x[:, i] * x[:, j]
    return total
