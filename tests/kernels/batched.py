"""Batched matmul: equal batches, a broadcast batch, and a transposed operand."""

from mimir.array import Dim, Tensor, float32, gpu, int32

B = Dim("B")
M = Dim("M")
K = Dim("K")
N = Dim("N")


@gpu
def bmm(a: Tensor[float32, B, M, K], b: Tensor[float32, B, K, N]) -> Tensor[float32, B, M, N]:
    return a @ b


@gpu
def bmm_broadcast(
    a: Tensor[float32, B, M, K], w: Tensor[float32, 1, K, N], bias: Tensor[float32, N]
) -> Tensor[float32, B, M, N]:
    return (a @ w + bias).tanh()


@gpu
def matmul_transposed(a: Tensor[float32, K, M], b: Tensor[float32, N, K]) -> Tensor[float32, M, N]:
    return a.T @ b.T


@gpu
def int_matmul(a: Tensor[int32, M, K], b: Tensor[int32, K, N]) -> Tensor[int32, M, N]:
    return a @ b
