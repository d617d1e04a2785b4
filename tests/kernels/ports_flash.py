"""FlashAttention's Triton forward (Dao-AILab/flash-attention, flash_attn/flash_attn_triton.py,
`_fwd_kernel`), ported: softmax(q k^T * scale + bias) v with the log-sum-exp of each query's
scores, which the original stores for the backward pass."""

from mimir.array import Dim, Tensor, arange, float16, float32, gpu, where

B = Dim("B", max=2)
H = Dim("H", max=2)
Q = Dim("Q")  # queries
S = Dim("S")  # keys
T = Dim("T")  # queries and keys, causal
D = Dim("D", max=128)  # a head dim
# the originals' float("-inf"): -inf has no spelling in a kernel, and a score of -1e30
# gives exp() = 0 the same
NEG_INF = -1e30


# flash_attn_triton.py `_fwd_kernel`, BIAS_TYPE "matrix", not causal: a bias per (query, key)
@gpu
def flash_fwd_matrix_bias(
    q: Tensor[float32, B, H, Q, D],
    k: Tensor[float32, B, H, S, D],
    v: Tensor[float32, B, H, S, D],
    bias: Tensor[float32, B, H, Q, S],
    softmax_scale: float,
) -> tuple[Tensor[float32, B, H, Q, D], Tensor[float32, B, H, Q]]:
    scores = q @ k.transpose(0, 1, 3, 2) * softmax_scale + bias
    m = scores.max(axis=-1)
    lse = m + (scores - m[..., None]).exp().sum(axis=-1).log()
    return scores.softmax(axis=-1) @ v, lse


# flash_attn_triton.py `_fwd_kernel` on float16 q, k, v as the original runs, with BIAS_TYPE
# "vector" (one bias per key, broadcast over the queries) and causal: a key past its query
# scores NEG_INF. `tl.dot` keeps a float32 accumulator, so the halves are widened (exactly)
# before the products; the output is stored as float16, the log-sum-exp as float32
@gpu
def flash_fwd_vector_bias_causal_f16(
    q: Tensor[float16, B, H, T, D],
    k: Tensor[float16, B, H, T, D],
    v: Tensor[float16, B, H, T, D],
    bias: Tensor[float32, B, H, T],
    softmax_scale: float,
) -> tuple[Tensor[float16, B, H, T, D], Tensor[float32, B, H, T]]:
    keep = arange(T)[:, None] >= arange(T)[None, :]
    product = q.astype(float32) @ k.astype(float32).transpose(0, 1, 3, 2)
    scores = where(keep, product * softmax_scale + bias[:, :, None, :], NEG_INF)
    m = scores.max(axis=-1)
    lse = m + (scores - m[..., None]).exp().sum(axis=-1).log()
    return (scores.softmax(axis=-1) @ v.astype(float32)).astype(float16), lse
