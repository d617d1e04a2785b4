"""Attention as one launch (`schedule._attention`, `kernels._attention`): softmax(f(q @ k.T))
@ v with v's width proven at most 128, the scores never stored. Cross attention (queries
and keys of other counts, v of another width), a causal mask made in the kernel, a mask
input, heads over a batch, a batch broadcast, computed operands, an epilogue after the
product, and sizes proven multiples of the blocks. Causal masks whose keys past the
diagonal score -1e30 let a launch skip those blocks of keys (`kernels.causal_reach`); the
masks that must not (a fill of 0, rows with no key kept, a mask read from data, a mask
broadcast along the keys) are here to show that they do not."""

import math

from mimir.array import Dim, Tensor, arange, bool_, float32, gpu, ones, tril, where

T = Dim("T")
Q = Dim("Q")
S = Dim("S")
D = Dim("D", max=128)  # a head dim
E = Dim("E", max=40)
B = Dim("B", max=3)
H = Dim("H", max=2)
R = Dim("R", multiple_of=64)  # queries and keys in whole blocks


@gpu
def flash_attention(
    q: Tensor[float32, T, D], k: Tensor[float32, T, D], v: Tensor[float32, T, D], scale: float
) -> Tensor[float32, T, D]:
    return ((q @ k.T) * scale).softmax() @ v


@gpu
def causal(
    q: Tensor[float32, T, D], k: Tensor[float32, T, D], v: Tensor[float32, T, D]
) -> Tensor[float32, T, D]:
    scores = (q @ k.T) / math.sqrt(D)
    return where(tril(ones((T, T))) > 0.0, scores, -1e30).softmax() @ v


@gpu
def cross(
    q: Tensor[float32, Q, 24], k: Tensor[float32, S, 24], v: Tensor[float32, S, E]
) -> Tensor[float32, Q, E]:
    return ((q @ k.T) * 0.2).softmax(axis=-1) @ v * 2.0 + 1.0


@gpu
def masked(
    q: Tensor[float32, T, 16],
    k: Tensor[float32, T, 16],
    v: Tensor[float32, T, 8],
    keep: Tensor[bool_, T, T],
) -> Tensor[float32, T, 8]:
    return where(keep, q @ k.T, -1e30).softmax() @ v


@gpu
def heads(
    q: Tensor[float32, B, H, T, D], k: Tensor[float32, B, H, T, D], v: Tensor[float32, B, H, T, D]
) -> Tensor[float32, B, H, T, D]:
    scores = (q @ k.transpose(0, 1, 3, 2)) / (D**0.5)
    return scores.softmax(axis=-1) @ v


@gpu
def shared_keys(
    q: Tensor[float32, B, T, 8], k: Tensor[float32, T, 8], v: Tensor[float32, T, 8]
) -> Tensor[float32, B, T, 8]:
    return (q @ k.T).softmax() @ v


@gpu
def computed(x: Tensor[float32, T, 12], w: Tensor[float32, T, 12]) -> Tensor[float32, T, 12]:
    return ((x * 0.5) @ (x + w).T).softmax() @ (w - 1.0)


@gpu
def whole_blocks(
    q: Tensor[float32, R, 64], k: Tensor[float32, R, 64], v: Tensor[float32, R, 64]
) -> Tensor[float32, R, 64]:
    return ((q @ k.T) * 0.125).softmax() @ v


@gpu
def scores_kept(
    q: Tensor[float32, T, 16], k: Tensor[float32, T, 16], v: Tensor[float32, T, 16]
) -> tuple[Tensor[float32, T, T], Tensor[float32, T, 16]]:
    probs = (q @ k.T).softmax()
    return probs, probs @ v


@gpu
def causal_by_positions(
    q: Tensor[float32, T, D], k: Tensor[float32, T, D], v: Tensor[float32, T, D]
) -> Tensor[float32, T, D]:
    keep = arange(T)[None, :] <= arange(T)[:, None]
    return where(keep, (q @ k.T) * 0.25, -1e30).softmax() @ v


@gpu
def causal_band(
    q: Tensor[float32, T, 16], k: Tensor[float32, T, 16], v: Tensor[float32, T, 16]
) -> Tensor[float32, T, 16]:
    # each position sees 70 positions ahead too: the first block past it is still kept
    return where(tril(ones((T, T)), k=70) > 0.5, q @ k.T, -3e38).softmax() @ v


@gpu
def causal_heads(
    q: Tensor[float32, H, T, 16], k: Tensor[float32, H, T, 16], v: Tensor[float32, H, T, 16]
) -> Tensor[float32, H, T, 16]:
    keep = tril(ones((T, T))) != 0.0
    return where(keep, q @ k.transpose(0, 2, 1), -1e30).softmax(axis=-1) @ v


@gpu
def causal_of_a_mask(
    q: Tensor[float32, T, 16],
    k: Tensor[float32, T, 16],
    v: Tensor[float32, T, 16],
    keep: Tensor[bool_, T, T],
) -> Tensor[float32, T, 16]:
    # a mask input, its upper triangle cleared: a row keep clears is all fill, and its
    # softmax spreads over every key, the skipped ones too
    return where(tril(keep), q @ k.T, -1e30).softmax() @ v


@gpu
def late_keys(
    q: Tensor[float32, T, 16], k: Tensor[float32, T, 16], v: Tensor[float32, T, 16]
) -> Tensor[float32, T, 16]:
    # causal, and no key before 3: rows 0 to 2 keep nothing
    keep = (tril(ones((T, T))) > 0.0) & (arange(T)[None, :] >= 3)
    return where(keep, q @ k.T, -1e30).softmax() @ v


@gpu
def above_one(
    q: Tensor[float32, T, 16], k: Tensor[float32, T, 16], v: Tensor[float32, T, 16]
) -> Tensor[float32, T, 16]:
    # tril's ones are not above 1.0: every score is the fill
    return where(tril(ones((T, T))) > 1.0, q @ k.T, -1e30).softmax() @ v


@gpu
def zero_filled(
    q: Tensor[float32, T, 16], k: Tensor[float32, T, 16], v: Tensor[float32, T, 16]
) -> Tensor[float32, T, 16]:
    # exp(0 - max) is not 0: every key counts
    return where(tril(ones((T, T))) > 0.0, q @ k.T, 0.0).softmax() @ v


@gpu
def strictly_causal(
    q: Tensor[float32, T, 16], k: Tensor[float32, T, 16], v: Tensor[float32, T, 16]
) -> Tensor[float32, T, 16]:
    # row 0 keeps no key: its softmax spreads over every key
    keep = arange(T)[:, None] > arange(T)[None, :]
    return where(keep, q @ k.T, -1e30).softmax() @ v


@gpu
def one_key_column(
    q: Tensor[float32, T, 16], k: Tensor[float32, T, 16], v: Tensor[float32, T, 16]
) -> Tensor[float32, T, 16]:
    # a mask one key wide, broadcast along the keys: tril of a column keeps everything
    keep = tril(ones((T, 1))) > 0.0
    return where(keep, q @ k.T, -1e30).softmax() @ v
