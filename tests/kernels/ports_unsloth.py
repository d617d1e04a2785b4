"""unsloth's Triton kernels (unslothai/unsloth, unsloth/kernels/), ported: each computes what
the original's kernel stores, at symbolic sizes."""

import math

from mimir.array import (
    Dim,
    InOut,
    Range,
    Tensor,
    arange,
    concatenate,
    float16,
    float32,
    gpu,
    int32,
    maximum,
    take_along_axis,
    where,
)

N = Dim("N")
D = Dim("D")
V = Dim("V")
B = Dim("B", max=4)
T = Dim("T")
H = Dim("H", max=4)
R = Dim("R", max=64)  # half a head dim
IGNORE_INDEX = -100
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
RSQRT_2 = 1.0 / math.sqrt(2.0)


# unsloth kernels/rms_layernorm.py, `_rms_layernorm_forward`: inv_var = rsqrt(mean(x^2) + eps),
# x * inv_var rounded to the weight's dtype, times the weight; float16 as the original runs
@gpu
def unsloth_rms_layernorm(
    x: Tensor[float16, N, D], w: Tensor[float16, D], eps: float
) -> tuple[Tensor[float16, N, D], Tensor[float32, N]]:
    h = x.astype(float32)
    inv_var = ((h * h).mean(axis=1) + eps).rsqrt()
    return (h * inv_var[:, None]).astype(float16) * w, inv_var


# unsloth kernels/rms_layernorm.py, `_gemma_rms_layernorm_forward`: the same in float32 with
# the weight offset by one, x * inv_var * (w + 1)
@gpu
def unsloth_gemma_rms_layernorm(
    x: Tensor[float32, N, D], w: Tensor[float32, D], eps: float
) -> Tensor[float32, N, D]:
    inv_var = ((x * x).mean(axis=1, keepdims=True) + eps).rsqrt()
    return x * inv_var * (w + 1.0)


# unsloth kernels/rope_embedding.py, `_rope_embedding`: q of shape (batch, seq, heads, head
# dim) rotated in place by halves, [q1 cos - q2 sin, q2 cos + q1 sin]; the tables are
# (seq, head dim) and the first half is read
@gpu
def unsloth_rope_inplace(
    q: InOut[Tensor[float32, B, T, H, 2 * R]],
    cos: Tensor[float32, T, 2 * R],
    sin: Tensor[float32, T, 2 * R],
):
    c = cos[:, None, :R]
    s = sin[:, None, :R]
    q1 = q[:, :, :, :R]
    q2 = q[:, :, :, R:]
    q = concatenate([q1 * c - q2 * s, q2 * c + q1 * s], axis=3)


# unsloth kernels/swiglu.py, `_fg_kernel`: f = e * sigmoid(e) rounded to the input's dtype,
# h = f * g; float16 as the original runs
@gpu
def unsloth_swiglu(e: Tensor[float16, N, D], g: Tensor[float16, N, D]) -> Tensor[float16, N, D]:
    h = e.astype(float32)
    return (h * h.sigmoid()).astype(float16) * g


# unsloth kernels/geglu.py, `_exact_forward_kernel`: f = 0.5 e (1 + erf(e / sqrt 2)), h = f g
@gpu
def unsloth_geglu_exact(
    e: Tensor[float32, N, D], g: Tensor[float32, N, D]
) -> Tensor[float32, N, D]:
    return 0.5 * e * ((e * RSQRT_2).erf() + 1.0) * g


# unsloth kernels/geglu.py, `_approx_forward_kernel`: the tanh GELU as unsloth factors it,
# 0.5 e (tanh(sqrt(2/pi) e (1 + 0.044715 e^2)) + 1), times g
@gpu
def unsloth_geglu_approx(
    e: Tensor[float32, N, D], g: Tensor[float32, N, D]
) -> Tensor[float32, N, D]:
    inner = SQRT_2_OVER_PI * e * (1.0 + 0.044715 * e * e)
    return 0.5 * e * (inner.tanh() + 1.0) * g


# unsloth kernels/cross_entropy_loss.py, `_cross_entropy_forward` with Gemma 2's logit
# softcapping, t tanh(x / t): each row's loss (0 where the label is the ignore index) and
# its log-sum-exp, which the backward pass reads
@gpu
def unsloth_cross_entropy_softcap(
    logits: Tensor[float32, N, V], labels: Tensor[int32, N, Range(IGNORE_INDEX, V)], softcap: float
) -> tuple[Tensor[float32, N], Tensor[float32, N]]:
    capped = softcap * (logits / softcap).tanh()
    c = capped.max(axis=1)
    lse = c + (capped - c[:, None]).exp().sum(axis=1).log()
    x = take_along_axis(capped, maximum(labels, 0)[:, None], axis=1)[:, 0]
    return where(labels != IGNORE_INDEX, lse - x, 0.0), lse


# unsloth kernels/cross_entropy_loss.py, `_cross_entropy_backward` with softcapping: from the
# stored log-sum-exp, dloss * (exp(x - lse) - [col == label]) * (1 - tanh^2(x / t)), and 0
# for an ignored row
@gpu
def unsloth_cross_entropy_backward(
    logits: Tensor[float32, N, V],
    dloss: Tensor[float32, N],
    lse: Tensor[float32, N],
    labels: Tensor[int32, N, Range(IGNORE_INDEX, V)],
    softcap: float,
) -> Tensor[float32, N, V]:
    partial = (logits / softcap).tanh()
    y = (softcap * partial - lse[:, None]).exp()
    y = where(arange(V)[None, :] == labels[:, None], y - 1.0, y)
    scale = where(labels != IGNORE_INDEX, dloss, 0.0)
    return scale[:, None] * y * (1.0 - partial * partial)
