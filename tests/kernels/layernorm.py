"""Layer normalisation: reductions with keepdims, broadcasts and rsqrt."""

from mimir.array import Dim, Tensor, float32, gpu

N = Dim("N")
D = Dim("D")


@gpu
def layernorm(
    x: Tensor[float32, N, D], gamma: Tensor[float32, D], beta: Tensor[float32, D]
) -> Tensor[float32, N, D]:
    mean = x.mean(axis=-1, keepdims=True)
    centered = x - mean
    var = (centered * centered).mean(axis=-1, keepdims=True)
    return centered * (var + 1e-5).rsqrt() * gamma + beta


@gpu
def rmsnorm(x: Tensor[float32, N, 48], weight: Tensor[float32, 48]) -> Tensor[float32, N, 48]:
    return x / (x * x).mean(axis=1, keepdims=True).sqrt() * weight
