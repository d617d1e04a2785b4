"""Every comparison on int32, uint32, float32 and float16, with equal operands occurring.

Each kernel returns three int32 bit sets, one bit per comparison (`<` 1, `<=` 2, `>` 4,
`>=` 8, `==` 16, `!=` 32): of `a` against `b`, of `a` against `hi = maximum(a, b)`, and of
`hi` against `a`. Random ints are drawn from a small range, so `a == b` happens; random
floats almost never coincide, but `hi` equals `a` wherever `a >= b`, so every comparison
meets equal operands, and in both orders. A backend that emits `<=` as `<` (or `>=` as
`>`) gets those elements wrong.
"""

from mimir.array import Dim, Tensor, float16, float32, gpu, int32, maximum, uint32

N = Dim("N")


@gpu
def compare_int32(a: Tensor[int32, N], b: Tensor[int32, N]):
    hi = maximum(a, b)
    with_b = (
        (a < b).astype(int32)
        + (a <= b).astype(int32) * 2
        + (a > b).astype(int32) * 4
        + (a >= b).astype(int32) * 8
        + (a == b).astype(int32) * 16
        + (a != b).astype(int32) * 32
    )
    with_hi = (
        (a < hi).astype(int32)
        + (a <= hi).astype(int32) * 2
        + (a > hi).astype(int32) * 4
        + (a >= hi).astype(int32) * 8
        + (a == hi).astype(int32) * 16
        + (a != hi).astype(int32) * 32
    )
    hi_with = (
        (hi < a).astype(int32)
        + (hi <= a).astype(int32) * 2
        + (hi > a).astype(int32) * 4
        + (hi >= a).astype(int32) * 8
        + (hi == a).astype(int32) * 16
        + (hi != a).astype(int32) * 32
    )
    return with_b, with_hi, hi_with


@gpu
def compare_uint32(a: Tensor[uint32, N], b: Tensor[uint32, N]):
    hi = maximum(a, b)
    with_b = (
        (a < b).astype(int32)
        + (a <= b).astype(int32) * 2
        + (a > b).astype(int32) * 4
        + (a >= b).astype(int32) * 8
        + (a == b).astype(int32) * 16
        + (a != b).astype(int32) * 32
    )
    with_hi = (
        (a < hi).astype(int32)
        + (a <= hi).astype(int32) * 2
        + (a > hi).astype(int32) * 4
        + (a >= hi).astype(int32) * 8
        + (a == hi).astype(int32) * 16
        + (a != hi).astype(int32) * 32
    )
    hi_with = (
        (hi < a).astype(int32)
        + (hi <= a).astype(int32) * 2
        + (hi > a).astype(int32) * 4
        + (hi >= a).astype(int32) * 8
        + (hi == a).astype(int32) * 16
        + (hi != a).astype(int32) * 32
    )
    return with_b, with_hi, hi_with


@gpu
def compare_float32(a: Tensor[float32, N], b: Tensor[float32, N]):
    hi = maximum(a, b)
    with_b = (
        (a < b).astype(int32)
        + (a <= b).astype(int32) * 2
        + (a > b).astype(int32) * 4
        + (a >= b).astype(int32) * 8
        + (a == b).astype(int32) * 16
        + (a != b).astype(int32) * 32
    )
    with_hi = (
        (a < hi).astype(int32)
        + (a <= hi).astype(int32) * 2
        + (a > hi).astype(int32) * 4
        + (a >= hi).astype(int32) * 8
        + (a == hi).astype(int32) * 16
        + (a != hi).astype(int32) * 32
    )
    hi_with = (
        (hi < a).astype(int32)
        + (hi <= a).astype(int32) * 2
        + (hi > a).astype(int32) * 4
        + (hi >= a).astype(int32) * 8
        + (hi == a).astype(int32) * 16
        + (hi != a).astype(int32) * 32
    )
    return with_b, with_hi, hi_with


@gpu
def compare_float16(a: Tensor[float16, N], b: Tensor[float16, N]):
    hi = maximum(a, b)
    with_b = (
        (a < b).astype(int32)
        + (a <= b).astype(int32) * 2
        + (a > b).astype(int32) * 4
        + (a >= b).astype(int32) * 8
        + (a == b).astype(int32) * 16
        + (a != b).astype(int32) * 32
    )
    with_hi = (
        (a < hi).astype(int32)
        + (a <= hi).astype(int32) * 2
        + (a > hi).astype(int32) * 4
        + (a >= hi).astype(int32) * 8
        + (a == hi).astype(int32) * 16
        + (a != hi).astype(int32) * 32
    )
    hi_with = (
        (hi < a).astype(int32)
        + (hi <= a).astype(int32) * 2
        + (hi > a).astype(int32) * 4
        + (hi >= a).astype(int32) * 8
        + (hi == a).astype(int32) * 16
        + (hi != a).astype(int32) * 32
    )
    return with_b, with_hi, hi_with
