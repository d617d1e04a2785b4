"""Sorts along an axis: `sort` and `argsort` (stable), with ties, NaNs and a non-last axis."""

from mimir.array import Dim, Tensor, float32, gpu, int32, take_along_axis, uint32, where

N = Dim("N")
L = Dim("L", max=64)
S = Dim("S", max=300)


@gpu
def sort_rows(x: Tensor[float32, N, L]) -> Tensor[float32, N, L]:
    return x.sort()


@gpu
def argsort_ties(x: Tensor[float32, N, L]) -> Tensor[int32, N, L]:
    return (x * 3.0).astype(int32).argsort()


@gpu
def argsort_nans_descending(x: Tensor[float32, N, L]):
    # the negative inputs' logs are NaN (first, in their order), those past 0.5 tie at 1.0
    keys = where(x > 0.5, 1.0, x.log())
    return keys.argsort(descending=True), keys.sort(descending=True)


@gpu
def sort_columns(x: Tensor[float32, S, 3]):
    return x.sort(axis=0), x.argsort(axis=0)


@gpu
def sort_unsigned(x: Tensor[uint32, N, 5]) -> Tensor[uint32, N, 5]:
    return (x % 4).sort(axis=1, descending=True)


@gpu
def gather_sorted(x: Tensor[float32, N, L], y: Tensor[float32, N, L]) -> Tensor[float32, N, L]:
    return take_along_axis(y, x.argsort(), axis=-1) * 2.0
