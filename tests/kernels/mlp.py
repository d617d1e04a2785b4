"""A two-layer perceptron: two matmul launches with a scratch buffer between them."""

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
