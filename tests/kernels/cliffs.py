"""Fusion cliffs: each computation in two spellings that must plan the same launches."""

from mimir.array import Dim, Tensor, einsum, float32, gpu, maximum, where

T = Dim("T")
D = Dim("D", max=128)  # a head dim: the attention path holds a row of v
N = Dim("N")
K = Dim("K")
M = Dim("M")
B = Dim("B", max=8)
H = Dim("H", max=4)
C = Dim("C", max=1024)  # a row a workgroup holds


@gpu
def attention_matmul(
    q: Tensor[float32, T, D], k: Tensor[float32, T, D], v: Tensor[float32, T, D], scale: float
) -> Tensor[float32, T, D]:
    p = ((q @ k.T) * scale).softmax()
    return p @ v


@gpu
def attention_einsum(
    q: Tensor[float32, T, D], k: Tensor[float32, T, D], v: Tensor[float32, T, D], scale: float
) -> Tensor[float32, T, D]:
    p = (einsum("td,sd->ts", q, k) * scale).softmax()
    return einsum("ts,sd->td", p, v)


@gpu
def batched_attention_matmul(
    q: Tensor[float32, B, H, T, D], k: Tensor[float32, B, H, T, D], v: Tensor[float32, B, H, T, D]
) -> Tensor[float32, B, H, T, D]:
    p = (q @ k.transpose(0, 1, 3, 2) * 0.125).softmax(axis=-1)
    return p @ v


@gpu
def batched_attention_einsum(
    q: Tensor[float32, B, H, T, D], k: Tensor[float32, B, H, T, D], v: Tensor[float32, B, H, T, D]
) -> Tensor[float32, B, H, T, D]:
    p = (einsum("bhtd,bhsd->bhts", q, k) * 0.125).softmax(axis=-1)
    return einsum("bhts,bhsd->bhtd", p, v)


@gpu
def attention_heads_merged(
    q: Tensor[float32, B, H, T, D], k: Tensor[float32, B, H, T, D], v: Tensor[float32, B, H, T, D]
) -> Tensor[float32, B, T, H * D]:
    p = (q @ k.transpose(0, 1, 3, 2) * 0.125).softmax(axis=-1)
    return (p @ v).transpose(0, 2, 1, 3).reshape(B, T, H * D)


@gpu
def attention_heads_einsum(
    q: Tensor[float32, B, H, T, D], k: Tensor[float32, B, H, T, D], v: Tensor[float32, B, H, T, D]
) -> Tensor[float32, B, T, H * D]:
    p = (einsum("bhtd,bhsd->bhts", q, k) * 0.125).softmax(axis=-1)
    return einsum("bhts,bhsd->bthd", p, v).reshape(B, T, H * D)


@gpu
def linear_matmul(x: Tensor[float32, N, K], w: Tensor[float32, M, K]) -> Tensor[float32, N, M]:
    return (x @ w.T).relu()


@gpu
def linear_einsum(x: Tensor[float32, N, K], w: Tensor[float32, M, K]) -> Tensor[float32, N, M]:
    return einsum("nk,mk->nm", x, w).relu()


@gpu
def product_transposed(a: Tensor[float32, N, K], b: Tensor[float32, K, M]) -> Tensor[float32, M, N]:
    return (a @ b).T


@gpu
def batched_matmul_permuted(
    a: Tensor[float32, B, N, K], b: Tensor[float32, B, K, M], c: Tensor[float32, M]
) -> Tensor[float32, N, B, M]:
    return (a @ b + c).gelu().transpose(1, 0, 2)


@gpu
def relu_epilogue(a: Tensor[float32, N, K], b: Tensor[float32, K, M]) -> Tensor[float32, N, M]:
    return (a @ b).relu()


@gpu
def leaky_relu_where(a: Tensor[float32, N, K], b: Tensor[float32, K, M]) -> Tensor[float32, N, M]:
    y = a @ b
    return where(y > 0, y, 0.01 * y)


@gpu
def leaky_relu_maximum(a: Tensor[float32, N, K], b: Tensor[float32, K, M]) -> Tensor[float32, N, M]:
    y = a @ b
    return maximum(y, 0.01 * y)


@gpu
def gelu_method(a: Tensor[float32, N, K], b: Tensor[float32, K, M]) -> Tensor[float32, N, M]:
    return (a @ b).gelu()


@gpu
def gelu_written(a: Tensor[float32, N, K], b: Tensor[float32, K, M]) -> Tensor[float32, N, M]:
    y = a @ b
    return 0.5 * y * (1.0 + (0.7978845608 * (y + 0.044715 * y * y * y)).tanh())


@gpu
def layernorm_stats_index(
    x: Tensor[float32, B, T, C], w: Tensor[float32, C], b: Tensor[float32, C]
) -> tuple[Tensor[float32, B, T, C], Tensor[float32, B, T], Tensor[float32, B, T]]:
    mean = x.mean(axis=-1)
    xc = x - mean[:, :, None]
    rstd = ((xc * xc).mean(axis=-1) + 1e-5).rsqrt()
    return xc * rstd[:, :, None] * w + b, mean, rstd


@gpu
def layernorm_stats_keepdims(
    x: Tensor[float32, B, T, C], w: Tensor[float32, C], b: Tensor[float32, C]
) -> tuple[Tensor[float32, B, T, C], Tensor[float32, B, T], Tensor[float32, B, T]]:
    mean = x.mean(axis=-1, keepdims=True)
    xc = x - mean
    rstd = ((xc * xc).mean(axis=-1, keepdims=True) + 1e-5).rsqrt()
    return xc * rstd * w + b, mean[:, :, 0], rstd[:, :, 0]


@gpu
def attention_lse_written(
    q: Tensor[float32, T, D], k: Tensor[float32, T, D], v: Tensor[float32, T, D], scale: float
) -> tuple[Tensor[float32, T, D], Tensor[float32, T]]:
    s = (q @ k.T) * scale
    m = s.max(axis=-1)
    lse = m + (s - m[:, None]).exp().sum(axis=-1).log()
    return (s - lse[:, None]).exp() @ v, lse


@gpu
def attention_lse_softmax(
    q: Tensor[float32, T, D], k: Tensor[float32, T, D], v: Tensor[float32, T, D], scale: float
) -> tuple[Tensor[float32, T, D], Tensor[float32, T]]:
    s = (q @ k.T) * scale
    m = s.max(axis=-1)
    lse = m + (s - m[:, None]).exp().sum(axis=-1).log()
    return s.softmax(axis=-1) @ v, lse


@gpu
def layernorm_backward(
    dout: Tensor[float32, B, T, C],
    inp: Tensor[float32, B, T, C],
    weight: Tensor[float32, C],
    mean: Tensor[float32, B, T],
    rstd: Tensor[float32, B, T],
) -> tuple[Tensor[float32, B, T, C], Tensor[float32, C], Tensor[float32, C]]:
    norm = (inp - mean[:, :, None]) * rstd[:, :, None]
    dnorm = dout * weight
    dnorm_mean = dnorm.mean(axis=-1)
    dnorm_norm_mean = (dnorm * norm).mean(axis=-1)
    dinp = (dnorm - dnorm_mean[:, :, None] - norm * dnorm_norm_mean[:, :, None]) * rstd[:, :, None]
    return dinp, (dout * norm).sum(axis=(0, 1)), dout.sum(axis=(0, 1))


@gpu
def layernorm_backward_keepdims(
    dout: Tensor[float32, B, T, C],
    inp: Tensor[float32, B, T, C],
    weight: Tensor[float32, C],
    mean: Tensor[float32, B, T],
    rstd: Tensor[float32, B, T],
) -> tuple[Tensor[float32, B, T, C], Tensor[float32, C], Tensor[float32, C]]:
    r = rstd[:, :, None]
    norm = (inp - mean[:, :, None]) * r
    dnorm = dout * weight
    dinp = (
        dnorm
        - dnorm.mean(axis=-1, keepdims=True)
        - norm * (dnorm * norm).mean(axis=-1, keepdims=True)
    ) * r
    rows = dout.reshape(B * T, C)
    return dinp, (rows * norm.reshape(B * T, C)).sum(axis=0), rows.sum(axis=0)


@gpu
def matmul_backward(
    dout: Tensor[float32, N, M], inp: Tensor[float32, N, K], weight: Tensor[float32, M, K]
) -> tuple[Tensor[float32, N, K], Tensor[float32, M, K], Tensor[float32, M]]:
    return dout @ weight, dout.T @ inp, dout.sum(axis=0)


@gpu
def matmul_backward_einsum(
    dout: Tensor[float32, N, M], inp: Tensor[float32, N, K], weight: Tensor[float32, M, K]
) -> tuple[Tensor[float32, N, K], Tensor[float32, M, K], Tensor[float32, M]]:
    dinp = einsum("nm,mk->nk", dout, weight)
    dweight = einsum("nm,nk->mk", dout, inp)
    return dinp, dweight, einsum("nm->m", dout)
