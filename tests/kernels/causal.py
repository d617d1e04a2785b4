"""Causal attention without an input mask: `arange` comparisons and `tril`, plus the
other new layout ops (`triu`, `concatenate`, `stack`) on symbolic sizes."""

from mimir.array import (
    Dim,
    Tensor,
    arange,
    concatenate,
    float16,
    float32,
    gpu,
    int32,
    ones,
    stack,
    tril,
    triu,
    where,
)

T = Dim("T")
D = Dim("D")
N = Dim("N")
M = Dim("M")


@gpu
def causal_attention(
    q: Tensor[float32, T, D], k: Tensor[float32, T, D], v: Tensor[float32, T, D]
) -> Tensor[float32, T, D]:
    scores = (q @ k.T) * 0.125
    keep = arange(T)[:, None] >= arange(T)[None, :]
    return where(keep, scores, -1e30).softmax() @ v


@gpu
def causal_tril(q: Tensor[float32, T, D], k: Tensor[float32, T, D]) -> Tensor[float32, T, T]:
    mask = tril(ones((T, T)))
    return where(mask > 0.0, (q @ k.T).softmax(), 0.0)


@gpu
def bands(x: Tensor[float32, 3, N, M]) -> Tensor[float32, 3, N, M]:
    return tril(x, k=1) - triu(x, k=-2) * 0.5


@gpu
def positions(x: Tensor[int32, N, M]) -> Tensor[int32, N, M]:
    return x * arange(M) + arange(N)[:, None]


@gpu
def float_ramp(x: Tensor[float16, N]) -> Tensor[float16, N]:
    return x + arange(N, dtype=float16) * 0.5


@gpu
def cache_concat(cache: Tensor[float32, T, D], new: Tensor[float32, 1, D]) -> Tensor[float32, T + 1, D]:
    return concatenate((cache, new), axis=0)


@gpu
def features(
    a: Tensor[float32, N, 3], b: Tensor[int32, N, M], c: Tensor[float32, N, 1]
) -> Tensor[float32, N, M + 4]:
    return concatenate((a, b.astype(float32), c * 2.0), axis=-1)


@gpu
def pairs(a: Tensor[float32, N, M], b: Tensor[float32, N, M]) -> Tensor[float32, N, 2, M]:
    return stack((a + b, a - b), axis=1)


@gpu
def stack_last(a: Tensor[int32, N], b: Tensor[int32, N]) -> Tensor[int32, N, 3]:
    return stack((a, b, a * b), axis=-1)


@gpu
def with_row_sums(x: Tensor[float32, N, M]) -> Tensor[float32, N, M + 1]:
    return concatenate((x, x.sum(axis=1, keepdims=True)), axis=1).relu()
