"""Causal (masked) attention: position t attends to positions 0..t only.

The mask is made inside the kernel, as `torch.tril(torch.ones(T, T))` would:
`tril(ones((T, T)))` keeps the scores on and below the diagonal, and the others
become `-1e30` before the softmax (no mask input, no mask buffer).

The head dim D is declared at most 128, as FlashAttention's and Triton's attention kernels
fix it at compile time: that makes the whole function one launch that never stores the
T x T scores (the online softmax of flash attention, `kernels._attention`). The fill of
-1e30 lets each workgroup of 64 rows stop at the last key its rows keep, as FlashAttention's
causal kernels do: at T = 256, 10 of the 16 blocks of keys (the manifest's `work_skipped`).
"""

from mimir.array import Dim, Tensor, float32, gpu, ones, tril, where

T = Dim("T", min=1)
D = Dim("D", max=128)


@gpu
def causal_attention(
    q: Tensor[float32, T, D], k: Tensor[float32, T, D], v: Tensor[float32, T, D]
) -> Tensor[float32, T, D]:
    scores = (q @ k.T) / (D**0.5)
    causal = tril(ones((T, T))) > 0.0
    return where(causal, scores, -1e30).softmax() @ v


if __name__ == "__main__":
    from mimir.array import rand

    q, k, v = (rand((3, 4), seed=s).to("gpu") for s in (1, 2, 3))
    print(causal_attention(q, k, v))
