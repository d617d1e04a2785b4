"""Sizes proven multiples of a tile: the kernels carry no bounds guard for them."""

from mimir.array import Dim, Tensor, float32, gpu

M = Dim("M", multiple_of=128)
K = Dim("K", multiple_of=8)
N = Dim("N", multiple_of=256)


@gpu
def tiled_matmul_bias_relu(
    a: Tensor[float32, M, K], w: Tensor[float32, K, 128], b: Tensor[float32, 128]
) -> Tensor[float32, M, 128]:
    return (a @ w + b).relu()


@gpu
def multiply_add(a: Tensor[float32, N], b: Tensor[float32, N]) -> Tensor[float32, N]:
    return a * b + a


@gpu
def rows_of_256(x: Tensor[float32, M, 256], s: Tensor[float32, 256]) -> Tensor[float32, M, 256]:
    return x * s + 1.0
