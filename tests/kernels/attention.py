"""Attention: softmax(q @ k.T * scale) @ v, with symbolic sequence length and width."""

from mimir.array import Dim, Tensor, float32, gpu

T = Dim("T")
D = Dim("D")
B = Dim("B", min=1, max=8)


@gpu
def attention(
    q: Tensor[float32, T, D], k: Tensor[float32, T, D], v: Tensor[float32, T, D], scale: float
) -> Tensor[float32, T, D]:
    scores = (q @ k.T) * scale
    return scores.softmax() @ v


@gpu
def batched_attention(
    q: Tensor[float32, B, T, D], k: Tensor[float32, B, T, D], v: Tensor[float32, B, T, D]
) -> Tensor[float32, B, T, D]:
    scores = q @ k.transpose(0, 2, 1) * 0.125
    return scores.softmax(axis=-1) @ v


@gpu
def log_probs(logits: Tensor[float32, B, T]) -> Tensor[float32, B, T]:
    return logits.log_softmax()


@gpu
def softmax_first_axis(x: Tensor[float32, T, 3]) -> Tensor[float32, T, 3]:
    return x.softmax(axis=0)
