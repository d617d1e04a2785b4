"""Rotary position embedding (RoPE, the half-split form of GPT-NeoX and LLaMA).

As Hugging Face's LLaMA writes it: `x * cos + rotate_half(x) * sin`, where
`rotate_half(x)` is `concatenate((-x2, x1))` of the two halves of the last axis.
The angle of token `t` at frequency `i` is `positions[t] * inv_freq[i]`
(`inv_freq = base**(-arange(H) / H)`, the model's registered buffer, `H` the
half width); the cosine and sine tables are built from the angles in the kernel
and repeated across both halves, as the model's rotary module does.
"""

from mimir.array import Dim, Tensor, concatenate, float32, gpu, int32

T = Dim("T")
H = Dim("H")


@gpu
def rope(
    x: Tensor[float32, T, 2 * H], positions: Tensor[int32, T], inv_freq: Tensor[float32, H]
) -> Tensor[float32, T, 2 * H]:
    angles = positions.astype(float32).reshape(T, 1) * inv_freq.reshape(1, H)
    cos = concatenate((angles.cos(), angles.cos()), axis=1)
    sin = concatenate((angles.sin(), angles.sin()), axis=1)
    x1 = x[:, :H]
    x2 = x[:, H:]
    return x * cos + concatenate((-x2, x1), axis=1) * sin


if __name__ == "__main__":
    from mimir.array import arange, rand

    inv_freq = (arange(2).astype(float32) * (-9.210340371976184 / 2)).exp()  # base 10000
    print(rope(rand((3, 4), seed=1).to("gpu"), arange(3).to("gpu"), inv_freq.to("gpu")))
