"""Linear layers: matmul tiled through threadgroup memory with fused epilogues."""

from mimir.array import Dim, Tensor, float32, gpu

N = Dim("N")


@gpu
def linear_relu(
    x: Tensor[float32, N, 20], w: Tensor[float32, 20, 33], b: Tensor[float32, 33]
) -> Tensor[float32, N, 33]:
    return (x @ w + b).relu()


@gpu
def linear_gelu_scaled(
    x: Tensor[float32, N, 17], w: Tensor[float32, 17, 5], b: Tensor[float32, 5], scale: float
) -> Tensor[float32, N, 5]:
    return ((x @ w) * scale + b).gelu()


@gpu
def matmul_square(
    a: Tensor[float32, 64, 64], b: Tensor[float32, 64, 64]
) -> Tensor[float32, 64, 64]:
    return a @ b
