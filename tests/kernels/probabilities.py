"""A softmax of a product returned (attention's probabilities) as one launch
(`schedule._scores_softmax`, `kernels._scores_softmax`): the scores computed twice, never
stored, when the product contracts over at most 32 proven values. A scale, a causal mask
made in the kernel (before and after the softmax; with log-softmax, over queries and keys
of other counts), a mask input, log-softmax, heads over
a batch, queries and keys of other counts, sizes proven multiples of the blocks; and two
that stay a matmul and a softmax (a contraction over 48 values, the scores returned too)."""

import math

from mimir.array import Dim, Tensor, arange, bool_, float32, gpu, ones, tril, where

T = Dim("T")
Q = Dim("Q")
S = Dim("S")
D = Dim("D", max=32)
B = Dim("B", max=3)
H = Dim("H", max=2)
R = Dim("R", multiple_of=64)  # queries and keys in whole blocks


@gpu
def probabilities(
    q: Tensor[float32, T, D], k: Tensor[float32, T, D], scale: float
) -> Tensor[float32, T, T]:
    return ((q @ k.T) * scale).softmax()


@gpu
def causal_probabilities(
    q: Tensor[float32, T, D], k: Tensor[float32, T, D]
) -> Tensor[float32, T, T]:
    causal = tril(ones((T, T))) > 0.0
    scores = where(causal, (q @ k.T) / math.sqrt(D), -1e30)
    return where(causal, scores.softmax(), 0.0)


@gpu
def log_probabilities(
    q: Tensor[float32, Q, 24], k: Tensor[float32, S, 24]
) -> Tensor[float32, Q, S]:
    return ((q @ k.T) * 0.2).log_softmax(axis=-1) * 2.0 + 1.0


@gpu
def causal_log_probabilities(
    q: Tensor[float32, Q, 24], k: Tensor[float32, S, 24]
) -> Tensor[float32, Q, S]:
    # the keys past a query's position score -1e30: their log-probabilities are about that
    keep = arange(S)[None, :] <= arange(Q)[:, None]
    return where(keep, q @ k.T, -1e30).log_softmax(axis=-1)


@gpu
def masked_probabilities(
    q: Tensor[float32, T, 16], k: Tensor[float32, T, 16], keep: Tensor[bool_, T, T]
) -> Tensor[float32, T, T]:
    return where(keep, where(keep, q @ k.T, -1e30).softmax(), -1.0)


@gpu
def head_probabilities(
    q: Tensor[float32, B, H, T, D], k: Tensor[float32, B, H, T, D]
) -> Tensor[float32, B, H, T, T]:
    return (q @ k.transpose(0, 1, 3, 2) / (D**0.5)).softmax(axis=-1)


@gpu
def block_probabilities(
    q: Tensor[float32, R, 32], k: Tensor[float32, R, 32]
) -> Tensor[float32, R, R]:
    return ((q @ k.T) * 0.125).softmax()


@gpu
def long_contraction(q: Tensor[float32, T, 48], k: Tensor[float32, T, 48]) -> Tensor[float32, T, T]:
    return (q @ k.T).softmax()


@gpu
def scores_and_probabilities(q: Tensor[float32, T, D], k: Tensor[float32, T, D]):
    scores = q @ k.T
    return scores, scores.softmax()
