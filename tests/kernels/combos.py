"""Fusion corner cases: prologues into matmuls and reductions, shared roots, creation ops."""

from mimir.array import (
    Dim,
    Tensor,
    bool_,
    float16,
    float32,
    full,
    gpu,
    int32,
    ones,
    uint32,
    where,
    zeros,
)

N = Dim("N")
M = Dim("M", max=64)
K = Dim("K", multiple_of=4)


@gpu
def scaled_matmul_transposed(
    x: Tensor[float32, N, K], s: Tensor[float32, K], w: Tensor[float32, M, K]
) -> Tensor[float32, N, M]:
    return (x * s[None, :]) @ w.T


@gpu
def reduce_a_view(x: Tensor[float32, N, M]) -> Tensor[float32, 1, N]:
    return x.T[1:].sum(axis=0, keepdims=True) + x[:, 0][None, :]


@gpu
def root_read_twice(x: Tensor[float32, N, 8], w: Tensor[float32, 8, M]):
    h = x @ w
    return h, h.softmax(), (h * h + h).max(axis=1)


@gpu
def reshape_a_reduction(x: Tensor[float32, N, 6, 4]) -> Tensor[float32, N, 2, 3]:
    return x.sum(axis=2).reshape(N, 2, 3) * 0.5


@gpu
def masked_by_mean(x: Tensor[float32, N, M]) -> Tensor[float32, N, M]:
    mask = x > x.mean(axis=1, keepdims=True)
    return where(mask, x, 0.0) + ones((N, M)) - full((M,), 2.5)


@gpu
def zeros_out(x: Tensor[float32, N]) -> Tensor[float32, N]:
    return zeros((N,))


@gpu
def scalar_math(x: Tensor[float32, N], s: float, n: int) -> Tensor[float32, N]:
    return x * (s * 2.0 + 1.0) + n // 2 - x.shape[0] / 2 + (n % 3) * (-s)


@gpu
def unsigned_and_ints(u: Tensor[uint32, N], i: Tensor[int32, N]):
    return -u, i.abs(), (u > 3) & (i < 0), u.max(), i.min(axis=0)


@gpu
def half_pipeline(x: Tensor[float16, N, 24], w: Tensor[float16, 24, M]) -> Tensor[float16, N, M]:
    return ((x @ w) * 0.25).softmax() + x.sum(axis=1, keepdims=True)


@gpu
def int_matmul_epilogue(
    a: Tensor[int32, N, 5], b: Tensor[int32, 5, M], bias: Tensor[int32, M]
) -> Tensor[int32, N, M]:
    return (a @ b + bias) // 3


@gpu
def bool_reductions(m: Tensor[bool_, N, M]):
    return m.min(axis=1), m.sum(), m.max(axis=0, keepdims=True)


@gpu
def side_by_side(x: Tensor[float32, N, M], y: Tensor[float32, M], z: Tensor[float32, 50]):
    return x.sum(axis=1), y * 2.0 - 1.0, (z + 1.0).sqrt()
