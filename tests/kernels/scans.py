"""Prefix scans: `cumsum` and `cumprod` along any axis, of any length (a zoo prefix sum)."""

from mimir.array import Dim, Tensor, float16, float32, gpu, int32

N = Dim("N")
M = Dim("M")


@gpu
def prefix_sum(x: Tensor[float32, N]) -> Tensor[float32, N]:
    return x.cumsum()


@gpu
def rows_and_columns(x: Tensor[float32, N, M]):
    return x.cumsum(axis=1), x.cumsum(axis=0) * 0.5


@gpu
def int_counts(x: Tensor[int32, N, 3]) -> Tensor[int32, N, 3]:
    return (x % 7).cumsum(axis=0)


@gpu
def products(x: Tensor[float32, M, 5]) -> Tensor[float32, M, 5]:
    return (x * 0.5 + 1.0).cumprod(axis=-1)


@gpu
def flattened_half(x: Tensor[float16, N, 2]) -> Tensor[float32, 2 * N]:
    return x.cumsum().astype(float32)


@gpu
def bool_count(x: Tensor[float32, N]) -> Tensor[int32, N]:
    return (x > 0.0).cumsum(axis=0)
