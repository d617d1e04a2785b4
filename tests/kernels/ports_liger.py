"""Liger-Kernel's Triton kernels (linkedin/Liger-Kernel, src/liger_kernel/ops/), ported:
each computes what the original's forward kernel stores, at symbolic sizes."""

import math

from mimir.array import (
    Dim,
    Range,
    Tensor,
    arange,
    bfloat16,
    concatenate,
    float32,
    gpu,
    int32,
    maximum,
    take_along_axis,
    where,
)

N = Dim("N")  # rows: batch x sequence flattened
D = Dim("D")  # a row's width
V = Dim("V")  # a vocabulary
B = Dim("B", max=4)
H = Dim("H", max=4)
T = Dim("T")
R = Dim("R", max=64)  # half a head dim
G = Dim("G", max=8)  # groups
CG = Dim("CG", max=8)  # channels per group
L = Dim("L")  # positions per channel
K = Dim("K", max=64)  # a hidden width
IGNORE_INDEX = -100
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


# Liger-Kernel ops/rms_norm.py, `_rms_norm_forward_kernel`: rstd = 1/sqrt(mean(x^2) + eps),
# y = x * rstd * (offset + w); the row's rstd is kept for the backward pass
@gpu
def liger_rms_norm(
    x: Tensor[float32, N, D], w: Tensor[float32, D], eps: float, offset: float
) -> tuple[Tensor[float32, N, D], Tensor[float32, N]]:
    rstd = ((x * x).mean(axis=1) + eps).rsqrt()
    return x * rstd[:, None] * (offset + w), rstd


# Liger-Kernel ops/rms_norm.py, the "llama" casting mode for bfloat16: the row statistics in
# float32, x * rstd rounded to the input's dtype before the weight multiplies it
@gpu
def liger_rms_norm_bf16(
    x: Tensor[bfloat16, N, D], w: Tensor[bfloat16, D], eps: float
) -> Tensor[bfloat16, N, D]:
    h = x.astype(float32)
    rstd = ((h * h).mean(axis=1, keepdims=True) + eps).rsqrt()
    return (h * rstd).astype(bfloat16) * w


# Liger-Kernel ops/fused_add_rms_norm.py: s = x + residual is stored (the next layer's
# residual), then RMS-normalised: y = s * rstd * (offset + w)
@gpu
def liger_fused_add_rms_norm(
    x: Tensor[float32, N, D], residual: Tensor[float32, N, D], w: Tensor[float32, D], eps: float
) -> tuple[Tensor[float32, N, D], Tensor[float32, N, D]]:
    s = x + residual
    rstd = ((s * s).mean(axis=1, keepdims=True) + eps).rsqrt()
    return s * rstd * w, s


# Liger-Kernel ops/layer_norm.py, `_layer_norm_forward_kernel`: y = (x - mean) * rstd * w + b,
# with the row's mean and rstd stored
@gpu
def liger_layer_norm(
    x: Tensor[float32, N, D], w: Tensor[float32, D], b: Tensor[float32, D], eps: float
) -> tuple[Tensor[float32, N, D], Tensor[float32, N], Tensor[float32, N]]:
    mean = x.mean(axis=1)
    centred = x - mean[:, None]
    rstd = ((centred * centred).mean(axis=1) + eps).rsqrt()
    return centred * rstd[:, None] * w + b, mean, rstd


# Liger-Kernel ops/swiglu.py, `_swiglu_forward_kernel`: c = silu(a) * b
@gpu
def liger_swiglu(a: Tensor[float32, N, D], b: Tensor[float32, N, D]) -> Tensor[float32, N, D]:
    return a * a.sigmoid() * b


# Liger-Kernel ops/swiglu.py for bfloat16: silu in float32, rounded to b's dtype, times b
@gpu
def liger_swiglu_bf16(
    a: Tensor[bfloat16, N, D], b: Tensor[bfloat16, N, D]
) -> Tensor[bfloat16, N, D]:
    h = a.astype(float32)
    return (h * h.sigmoid()).astype(bfloat16) * b


# Liger-Kernel ops/geglu.py, `_geglu_tanh_forward_kernel`: the tanh GELU of a, written out,
# times b
@gpu
def liger_geglu(a: Tensor[float32, N, D], b: Tensor[float32, N, D]) -> Tensor[float32, N, D]:
    inner = SQRT_2_OVER_PI * (a + 0.044715 * a * a * a)
    return 0.5 * a * (1.0 + inner.tanh()) * b


# Liger-Kernel ops/rope.py, `_triton_rope`: q and k of shape (batch, heads, seq, head dim),
# rotated by halves: [q1 cos - q2 sin, q2 cos + q1 sin]; cos and sin are (seq, head dim)
# tables of which the first half is read
@gpu
def liger_rope(
    q: Tensor[float32, B, H, T, 2 * R],
    k: Tensor[float32, B, H, T, 2 * R],
    cos: Tensor[float32, T, 2 * R],
    sin: Tensor[float32, T, 2 * R],
) -> tuple[Tensor[float32, B, H, T, 2 * R], Tensor[float32, B, H, T, 2 * R]]:
    c = cos[:, :R]
    s = sin[:, :R]
    q1 = q[:, :, :, :R]
    q2 = q[:, :, :, R:]
    k1 = k[:, :, :, :R]
    k2 = k[:, :, :, R:]
    q_out = concatenate([q1 * c - q2 * s, q2 * c + q1 * s], axis=3)
    k_out = concatenate([k1 * c - k2 * s, k2 * c + k1 * s], axis=3)
    return q_out, k_out


# Liger-Kernel ops/cross_entropy.py, `liger_cross_entropy_kernel`: per row, with label
# smoothing and the z-loss, the loss and the gradient the kernel writes over the logits;
# rows whose label is the ignore index have loss 0 and gradient 0; `n_non_ignore` is the
# count the host passes. The z-loss term of the gradient is 2 z lse softmax, as current
# versions compute it (an older one applied it to softmax - eps)
@gpu
def liger_cross_entropy(
    logits: Tensor[float32, N, V],
    labels: Tensor[int32, N, Range(IGNORE_INDEX, V)],
    n_non_ignore: float,
    label_smoothing: float,
    lse_square_scale: float,
) -> tuple[Tensor[float32], Tensor[float32, N, V]]:
    kept = labels != IGNORE_INDEX
    m = logits.max(axis=1)
    d = (logits - m[:, None]).exp().sum(axis=1)
    lse = m + d.log()
    x_y = take_along_axis(logits, maximum(labels, 0)[:, None], axis=1)[:, 0]
    eps = label_smoothing / V
    smooth = -eps * logits.sum(axis=1) + label_smoothing * lse
    loss = (lse - x_y) * (1.0 - label_smoothing) + smooth + lse_square_scale * lse * lse
    probs = (logits - m[:, None]).exp() / d[:, None]
    grad = probs * (1.0 + 2.0 * lse_square_scale * lse[:, None]) - eps
    at_label = arange(V)[None, :] == labels[:, None]
    grad = where(at_label, grad - (1.0 - label_smoothing), grad) / n_non_ignore
    return where(kept, loss, 0.0).sum() / n_non_ignore, where(kept[:, None], grad, 0.0)


# Liger-Kernel ops/fused_linear_cross_entropy.py: the logits x @ w.T are never stored; each
# row's cross entropy against its label, averaged
@gpu
def liger_fused_linear_cross_entropy(
    x: Tensor[float32, N, K], w: Tensor[float32, V, K], labels: Tensor[int32, N, Range(0, V)]
) -> Tensor[float32]:
    logits = x @ w.T
    return -take_along_axis(logits.log_softmax(axis=1), labels[:, None], axis=1).mean()


# Liger-Kernel ops/kl_div.py, `_kldiv_kernel_forward` (log_target=False, reduction
# "batchmean"): sum of y_true * (log(max(y_true, eps)) - y_pred) over the batch's rows
@gpu
def liger_kl_div(
    y_pred: Tensor[float32, N, V], y_true: Tensor[float32, N, V], eps: float
) -> Tensor[float32]:
    return (y_true * (maximum(y_true, eps).log() - y_pred)).sum() / N


# Liger-Kernel ops/jsd.py, `_jsd_kernel`: the generalised Jensen-Shannon divergence of the
# log-probabilities x (student) and y (teacher), M = beta P + (1 - beta) Q; the loss summed
# and the gradient, both over the row count
@gpu
def liger_jsd(
    x: Tensor[float32, N, V], y: Tensor[float32, N, V], beta: float
) -> tuple[Tensor[float32], Tensor[float32, N, V]]:
    q = x.exp()
    p = y.exp()
    mix = beta * p + (1.0 - beta) * q
    log_mix = mix.log()
    loss = beta * p * y + (1.0 - beta) * q * x - mix * log_mix
    return loss.sum() / N, (1.0 - beta) * q * (x - log_mix) / N


# Liger-Kernel ops/group_norm.py, `_group_norm_forward_kernel`: each (batch, group) is
# normalised by its own mean and rstd, then each channel scaled and shifted. The original
# takes x as (batch, channels, positions) and the group count as an int; here the host
# passes the free view (batch, groups, channels per group, positions), as a `G * CG` axis
# fixes neither dim
@gpu
def liger_group_norm(
    x: Tensor[float32, B, G, CG, L], w: Tensor[float32, G, CG], b: Tensor[float32, G, CG]
) -> Tensor[float32, B, G, CG, L]:
    groups = x.reshape(B, G, CG * L)
    mean = groups.mean(axis=2, keepdims=True)
    centred = groups - mean
    rstd = ((centred * centred).mean(axis=2, keepdims=True) + 1e-6).rsqrt()
    return (centred * rstd).reshape(B, G, CG, L) * w[:, :, None] + b[:, :, None]


# Liger-Kernel ops/dyt.py, `_dyt_fwd_kernel`: dynamic tanh, gamma * tanh(alpha * x) + beta,
# alpha a learned one-element tensor
@gpu
def liger_dyt(
    x: Tensor[float32, N, D],
    alpha: Tensor[float32, 1],
    gamma: Tensor[float32, D],
    beta: Tensor[float32, D],
) -> Tensor[float32, N, D]:
    return gamma * (alpha * x).tanh() + beta


# Liger-Kernel ops/softmax.py, `_softmax_single_block_forward_kernel`: a row softmax
@gpu
def liger_softmax(x: Tensor[float32, N, D]) -> Tensor[float32, N, D]:
    return x.softmax(axis=1)


# Liger-Kernel ops/tvd.py, `_tv_distance_kernel`: total variation distance, 0.5 |p - q|,
# summed over the batch's rows and averaged, and its gradient 0.5 sign(p - q) / N
@gpu
def liger_tvd(
    p: Tensor[float32, N, V], q: Tensor[float32, N, V]
) -> tuple[Tensor[float32], Tensor[float32, N, V]]:
    diff = p - q
    return 0.5 * diff.abs().sum() / N, where(diff > 0.0, 0.5, -0.5) / N
