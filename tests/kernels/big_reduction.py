"""Reductions far past one workgroup: 100,000+ elements, strided loops, no size cap."""

from mimir.array import Dim, Tensor, float32, gpu

N = Dim("N")


@gpu
def total(x: Tensor[float32, N]) -> Tensor[float32]:
    return x.sum()


@gpu
def mean_abs(x: Tensor[float32, N]) -> Tensor[float32, 1]:
    return x.abs().mean(keepdims=True)


@gpu
def long_rows_max(x: Tensor[float32, 3, N]) -> Tensor[float32, 3]:
    return x.max(axis=1)


@gpu
def long_softmax(x: Tensor[float32, 2, N]) -> Tensor[float32, 2, N]:
    return x.softmax()
