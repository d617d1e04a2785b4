"""Kernels over the project's sizes, brought in with a star import."""

from mimir.array import Tensor, float32, gpu

from .dims import *


@gpu
def linear(
    x: Tensor[float32, N, D_IN], w: Tensor[float32, D_IN, D_OUT]
) -> Tensor[float32, N, D_OUT]:
    return x @ w


@gpu
def transposed(
    x: Tensor[float32, N, D_IN], w: Tensor[float32, D_OUT, D_IN]
) -> Tensor[float32, N, D_OUT]:
    return x @ w  # E: GPU011
