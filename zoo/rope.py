"""Rotary position embedding (RoPE, the half-split form of GPT-NeoX and LLaMA).

As Hugging Face's LLaMA writes it: `x * cos + rotate_half(x) * sin`, where
`rotate_half(x)` is `concatenate((-x2, x1))` of the two halves of the last axis
and the `(T, H)` cosine and sine tables are repeated across both halves. The
tables are passed in: the language has no `sin`/`cos` yet to build them from
`arange(T)` and the inverse frequencies.
"""

from mimir.array import Dim, Tensor, concatenate, float32, gpu

T = Dim("T")
H = Dim("H")

WAITING_FOR = "sin, cos"


@gpu
def rope(
    x: Tensor[float32, T, 2 * H], cos: Tensor[float32, T, H], sin: Tensor[float32, T, H]
) -> Tensor[float32, T, 2 * H]:
    x1 = x[:, :H]
    x2 = x[:, H:]
    rotated = concatenate((-x2, x1), axis=1)
    return x * concatenate((cos, cos), axis=1) + rotated * concatenate((sin, sin), axis=1)


if __name__ == "__main__":
    from mimir.array import rand

    x, c, s = rand((2, 4), seed=1), rand((2, 2), seed=2), rand((2, 2), seed=3)
    print(rope(x.to("gpu"), c.to("gpu"), s.to("gpu")))
