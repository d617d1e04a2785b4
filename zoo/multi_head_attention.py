"""Multi-head attention over a batch: `softmax(q @ k^T / sqrt(D)) @ v` per (batch, head).

The heads are a batch axis of the matmuls; `k.transpose(0, 1, 3, 2)` is index
arithmetic inside the first matmul, not a copy.

The head dim D is declared at most 128, as FlashAttention's and Triton's attention kernels
fix it at compile time: that makes the whole function one launch that never stores the
T x T scores (the online softmax of flash attention, `kernels._attention`).
"""

from mimir.array import Dim, Tensor, float32, gpu

B = Dim("B")
HEADS = Dim("HEADS")
T = Dim("T", min=1)
D = Dim("D", max=128)


@gpu
def multi_head_attention(
    q: Tensor[float32, B, HEADS, T, D],
    k: Tensor[float32, B, HEADS, T, D],
    v: Tensor[float32, B, HEADS, T, D],
) -> Tensor[float32, B, HEADS, T, D]:
    scores = (q @ k.transpose(0, 1, 3, 2)) / (D**0.5)
    return scores.softmax(axis=-1) @ v


if __name__ == "__main__":
    from mimir.array import rand

    q, k, v = (rand((1, 2, 3, 4), seed=s).to("gpu") for s in (1, 2, 3))
    print(multi_head_attention(q, k, v))
