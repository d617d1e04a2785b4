"""Scaled dot-product attention with symbolic sequence length and head size."""

from mimir.array import Dim, Tensor, float32, gpu, rand

T = Dim("T", min=1, max=2048)
D = Dim("D", min=4, max=128, multiple_of=4)


@gpu
def attention(
    q: Tensor[float32, T, D], k: Tensor[float32, T, D], v: Tensor[float32, T, D]
) -> Tensor[float32, T, D]:
    scores = q @ k.T * 0.5
    return scores.softmax(axis=-1) @ v


if __name__ == "__main__":
    q, k, v = (rand((7, 8), seed=s).to("gpu") for s in range(3))
    out = attention(q, k, v)
    print("attention ->", list(out.shape), out.dtype)
