"""Kernels as people port them from CUDA and Triton: module-level float constants and
`math.pi`, dims declared in one statement, `math` on elements and sizes in index-level
kernels, and an output each program zeroes and then accumulates into."""

import math

from mimir.array import Dim, Tensor, float32, gpu, program_id

N, M = Dim("N"), Dim("M")
GELU_SCALING_FACTOR = math.sqrt(2.0 / math.pi)


@gpu
def gelu_tanh(x: Tensor[float32, N, M]) -> Tensor[float32, N, M]:
    cube = 0.044715 * x * x * x
    return 0.5 * x * (1.0 + (GELU_SCALING_FACTOR * (x + cube)).tanh())


@gpu
def times_pi(x: Tensor[float32, N]) -> Tensor[float32, N]:
    return x * math.pi - math.e


@gpu(grid=(N,))
def row_sums_accumulated(x: Tensor[float32, N, M], out: Tensor[float32, N]):
    i = program_id(0)
    out[i] = 0.0
    for j in range(M):
        out[i] += x[i, j]


@gpu(grid=(N,))
def rows_zeroed_then_scaled(x: Tensor[float32, N, M], out: Tensor[float32, N, M]):
    i = program_id(0)
    for j in range(M):
        out[i, j] = 0.0
    scale = 1.0 / math.sqrt(M)
    for j in range(M):
        out[i, j] = out[i, j] + x[i, j] * scale


@gpu(grid=(N,))
def softplus_elements(x: Tensor[float32, N], out: Tensor[float32, N]):
    i = program_id(0)
    out[i] = math.log(1.0 + math.exp(x[i])) * GELU_SCALING_FACTOR
