"""bfloat16 inputs: read two to a 32-bit word, computed in float32, stored as float32."""

from mimir.array import Dim, Tensor, bfloat16, float32, gpu

N = Dim("N")
M = Dim("M")
K = Dim("K", max=256)


@gpu
def widen(x: Tensor[bfloat16, N]) -> Tensor[float32, N]:
    return x.astype(float32) * 2.0 + 1.0


@gpu
def bf16_arithmetic(x: Tensor[bfloat16, N, M], s: Tensor[bfloat16, M]) -> Tensor[float32, N, M]:
    return (x * s + 0.5).astype(float32)


@gpu
def bf16_weights(x: Tensor[float32, N, K], w: Tensor[bfloat16, K, M]) -> Tensor[float32, N, M]:
    return x @ w.astype(float32)


@gpu
def bf16_row_sums(x: Tensor[bfloat16, N, M]) -> Tensor[float32, N]:
    return x.astype(float32).sum(axis=1)
