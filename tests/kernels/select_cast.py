"""where, clip, maximum/minimum and astype (saturating, nan to 0)."""

from mimir.array import Dim, Tensor, float16, float32, gpu, int32, maximum, minimum, uint32, where

N = Dim("N")


@gpu
def where_clip(x: Tensor[float32, N], y: Tensor[float32, N]) -> Tensor[float32, N]:
    return where(x > y, x.clip(-0.5, 0.5), maximum(y, 0.25) - minimum(x, y))


@gpu
def casts(x: Tensor[float32, N]):
    big = x * 3.0e9
    return big.astype(int32), big.astype(uint32), (x > 0.0).astype(float32)


@gpu
def half_math(x: Tensor[float16, N], y: Tensor[float16, N]) -> Tensor[float16, N]:
    return (x * y + 0.1).tanh() + x.astype(float32).sigmoid().astype(float16)


@gpu
def unary_zoo(x: Tensor[float32, N]) -> Tensor[float32, N]:
    a = x.abs() + 0.5
    return a.log() + a.sqrt() + a.rsqrt() + x.exp() + x.tanh() + (-x).relu() + a**1.5


@gpu
def float_floor_mod_pow(x: Tensor[float32, N], y: Tensor[float32, N]):
    return x // y, x % y, x**y, (x < y) | (x != x)
