"""Modules imported by name: `d.N`, `dims.D_IN` and `layers.linear` mean what they mean there."""

from mimir.array import Tensor, float32, gpu, zeros

import app.dims as d
import app.layers
from app import dims, layers


@gpu
def first_half(x: Tensor[float32, d.N, dims.D_IN]) -> Tensor[float32, d.N, 392]:
    return x[:, : dims.D_IN // 2]


@gpu
def too_wide(x: Tensor[float32, d.N, dims.D_IN]) -> Tensor[float32, d.N, 392]:
    return x[:, : d.D_OUT * 4]  # E: GPU015


def run():
    x = zeros((8, d.D_IN))
    w = zeros((d.D_IN, 128)).to("gpu")
    layers.linear(x.to("gpu"), w)
    return app.layers.linear(x, w)  # E: GPU060
