"""A two-layer perceptron: with 3 outputs one `narrow` launch that computes the hidden layer
inside it; with 9, two tiled launches and the hidden layer in a scratch buffer."""

from mimir.array import Dim, Tensor, float32, gpu

N = Dim("N")
H = Dim("H")


@gpu
def mlp(
    x: Tensor[float32, N, 13],
    w1: Tensor[float32, 13, H],
    b1: Tensor[float32, H],
    w2: Tensor[float32, H, 3],
    b2: Tensor[float32, 3],
) -> Tensor[float32, N, 3]:
    h = (x @ w1 + b1).relu()
    return (h @ w2 + b2).sigmoid()


@gpu
def wide_mlp(
    x: Tensor[float32, N, 13],
    w1: Tensor[float32, 13, H],
    b1: Tensor[float32, H],
    w2: Tensor[float32, H, 17],
    b2: Tensor[float32, 17],
) -> Tensor[float32, N, 17]:
    """Seventeen outputs, past `schedule.NARROW`: two tiled launches and the hidden layer in
    scratch (the JavaScript host's tests of buffer reuse and per-launch timing use it)."""
    h = (x @ w1 + b1).relu()
    return (h @ w2 + b2).sigmoid()
