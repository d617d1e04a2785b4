"""Scaled dot-product attention, `softmax(q @ k.T / sqrt(D)) @ v`, in one launch.

The head dim D is declared at most 128, as FlashAttention's and Triton's attention kernels
fix it at compile time: that makes the whole function one launch that never stores the
T x T scores (the online softmax of flash attention, `kernels._attention`).
"""

from mimir.array import Dim, Tensor, float32, gpu

T = Dim("T", min=1)
D = Dim("D", max=128)


@gpu
def attention(
    q: Tensor[float32, T, D], k: Tensor[float32, T, D], v: Tensor[float32, T, D]
) -> Tensor[float32, T, D]:
    return ((q @ k.T) / (D**0.5)).softmax() @ v


if __name__ == "__main__":
    from mimir.array import rand

    q, k, v = (rand((3, 4), seed=s).to("gpu") for s in (1, 2, 3))
    print(attention(q, k, v))
