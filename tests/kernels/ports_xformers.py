"""xformers' Triton kernels (facebookresearch/xformers, xformers/triton/), ported: each computes
what the original's forward kernel stores, at symbolic sizes."""

import math

from mimir.array import Dim, Tensor, arange, float32, gpu, rand, where

N = Dim("N")
M = Dim("M")
B = Dim("B", max=4)
T = Dim("T")
GELU_ALPHA = math.sqrt(2.0 / math.pi)
# the originals' float("-inf"): -inf has no spelling in a kernel, and a score of -1e30
# gives exp() = 0 the same
NEG_INF = -1e30


# xformers triton/k_dropout.py `k_dropout_fw` with k_activations.py `gelu`: y = x + bias,
# the tanh GELU of it, then kept where Philox's uniform at the element's offset exceeds p,
# scaled by 1 / (1 - p)
@gpu
def xformers_dropout_bias_gelu(
    x: Tensor[float32, N, M], bias: Tensor[float32, M], p: float, seed: int
) -> Tensor[float32, N, M]:
    y = x + bias
    y = 0.5 * y * (1.0 + (GELU_ALPHA * (y + 0.044715 * y * y * y)).tanh())
    offsets = arange(N)[:, None] * M + arange(M)[None, :]
    return where(rand(seed, offsets) > p, y * (1.0 / (1.0 - p)), 0.0)


# xformers triton/k_dropout.py with k_activations.py `squared_relu`: relu(x + bias)^2, dropped
@gpu
def xformers_dropout_bias_squared_relu(
    x: Tensor[float32, N, M], bias: Tensor[float32, M], p: float, seed: int
) -> Tensor[float32, N, M]:
    y = (x + bias).relu()
    offsets = arange(N)[:, None] * M + arange(M)[None, :]
    return where(rand(seed, offsets) > p, y * y / (1.0 - p), 0.0)


# xformers triton/k_softmax.py `_softmax` with log=True, causal=True and an additive mask:
# columns past the row are NEG_INF, then z = x - max, y = z - log(sum(exp(z)))
@gpu
def xformers_causal_log_softmax(
    x: Tensor[float32, B, T, T], mask: Tensor[float32, T, T]
) -> Tensor[float32, B, T, T]:
    x = where(arange(T)[None, :] > arange(T)[:, None], NEG_INF, x) + mask
    z = x - x.max(axis=2, keepdims=True)
    return z - z.exp().sum(axis=2, keepdims=True).log()
