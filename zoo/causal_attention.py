"""Causal (masked) attention: position t attends to positions 0..t only.

The mask is an input (`mask[t, s]` is true where `s <= t`), since `tril` and
`arange` are not yet in the language: rewrite as `tril(ones((T, T)))` when they land.
"""

from mimir.array import Dim, Tensor, bool_, float32, gpu, where

T = Dim("T", min=1)
D = Dim("D")

WAITING_FOR = "tril, arange"


@gpu
def causal_attention(
    q: Tensor[float32, T, D],
    k: Tensor[float32, T, D],
    v: Tensor[float32, T, D],
    mask: Tensor[bool_, T, T],
) -> Tensor[float32, T, D]:
    scores = (q @ k.T) / (D**0.5)
    return where(mask, scores, -1e30).softmax() @ v


if __name__ == "__main__":
    from mimir.array import rand, tensor

    q, k, v = (rand((3, 4), seed=s).to("gpu") for s in (1, 2, 3))
    mask = tensor([[s <= t for s in range(3)] for t in range(3)], dtype=bool_).to("gpu")
    print(causal_attention(q, k, v, mask))
