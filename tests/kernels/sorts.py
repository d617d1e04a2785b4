"""Sorts along an axis: `sort` and `argsort` (stable), with ties, NaNs and a non-last axis."""

from mimir.array import Dim, Tensor, float32, gpu, int32, take_along_axis, topk, uint32, where

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


K = Dim("K", min=1, max=L)


@gpu
def top3(x: Tensor[float32, N, 5]):
    return topk(x, 3)


@gpu
def smallest_k(x: Tensor[float32, N, L], w: Tensor[float32, K]):
    values, positions = topk((x * 4.0).astype(int32), K, axis=1, largest=False)
    return values.astype(float32) * w, positions


@gpu
def top_of_columns(x: Tensor[float32, S, 3]) -> Tensor[int32, 1, 3]:
    _, positions = topk(x.log(), 1, axis=0)
    return positions


@gpu
def largest_of_rows(x: Tensor[uint32, N, 5]) -> Tensor[uint32, N, 1]:
    return topk(x % 3, 1)[0] + topk(x, 2, axis=-1, largest=False)[1][:, 1:].astype(uint32)
