"""Python's `math` and `**` on sizes and scalars: `1 / math.sqrt(D)` as attention scales it."""

import math

from mimir.array import Dim, Tensor, float32, gpu

T = Dim("T")
D = Dim("D")


@gpu
def scaled_scores(q: Tensor[float32, T, D], k: Tensor[float32, T, D]) -> Tensor[float32, T, T]:
    scale = 1.0 / math.sqrt(D)
    return (q @ k.T * scale).softmax()


@gpu
def size_math(x: Tensor[float32, D], t: float) -> Tensor[float32, D]:
    return x * (D**-0.5) + math.log(D) - math.exp(t * 0.25) + math.sqrt(2.0)
