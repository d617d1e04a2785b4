"""Reductions over every axis, with and without keepdims, of any size."""

from mimir.array import Dim, Tensor, bool_, float16, float32, gpu, int32, uint32

A = Dim("A")
B = Dim("B")
C = Dim("C")


@gpu
def sum_axis0(x: Tensor[float32, A, B, C]) -> Tensor[float32, B, C]:
    return x.sum(axis=0)


@gpu
def mean_axis1_keepdims(x: Tensor[float32, A, B, C]) -> Tensor[float32, A, 1, C]:
    return x.mean(axis=1, keepdims=True)


@gpu
def max_axis2(x: Tensor[float32, A, B, C]) -> Tensor[float32, A, B]:
    return x.max(axis=2)


@gpu
def min_axes02_keepdims(x: Tensor[float32, A, B, C]) -> Tensor[float32, 1, B, 1]:
    return x.min(axis=(0, 2), keepdims=True)


@gpu
def sum_all(x: Tensor[float32, A, B, C]) -> Tensor[float32]:
    return x.sum()


@gpu
def sum_small_axis(x: Tensor[float32, A, 7]) -> Tensor[float32, A]:
    return x.sum(axis=1)


@gpu
def int_sum_and_bool_any(x: Tensor[int32, A, B], m: Tensor[bool_, A, B]):
    return x.sum(axis=0), m.max(axis=1), m.sum(axis=1)


@gpu
def int_max_min(x: Tensor[int32, A, 40]) -> Tensor[int32, A]:
    return x.max(axis=1) - x.min(axis=1)


@gpu
def activations_and_their_sum(x: Tensor[float32, A, B]):
    y = (x * 2.0 - 1.0).relu()
    return y, y.sum()


@gpu
def range_and_scaled(x: Tensor[float32, A, B], h: Tensor[float16, A, B]):
    wide = h.astype(float32)
    return x.max(), x.min(), (x * 0.5 + wide).astype(float16), wide.mean()


@gpu
def column_stats(x: Tensor[float32, A, B]):
    return x.mean(axis=0), x.max(axis=0), (x * x).sum(axis=0)


@gpu
def one_row_statistics(x: Tensor[float32, 1, B]):
    return x.sum(axis=1), x.var(axis=1), x.argmax(axis=1)


@gpu
def mean_of_a_whole_var(x: Tensor[float32, A]) -> Tensor[float32]:
    """A reduction of a 0-d tensor (the mean of a whole variance): once a compile crash
    (IndexError in `schedule._row_groups`), found by `benchmarks/fuzz.py --seed 49`."""
    return x.var(axis=0).mean().abs()


@gpu
def total_mean_added_to_a_row(x: Tensor[uint32, A], y: Tensor[float32, A]) -> Tensor[float32, A]:
    """The mean of a 1-element sum, added to a row of symbolic length: a thread per short
    row wrote that row with a loop unrolled over its length, so compile-gpu died with a
    TypeError on the symbolic A. Found by `benchmarks/fuzz.py --seed 56`."""
    return x.sum(axis=0, keepdims=True).astype(float32).mean(axis=0) + y
