"""The bug Mimir exists for: inner dimensions that do not match."""

from mimir.array import Tensor, float32, gpu


@gpu
def bad_matmul(
    x: Tensor[float32, 32, 784], w: Tensor[float32, 128, 10]
) -> Tensor[float32, 32, 10]:
    return x @ w
