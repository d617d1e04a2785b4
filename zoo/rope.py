"""Rotary position embedding (RoPE, the half-split form of GPT-NeoX and LLaMA).

For each position t and pair h: `(x1, x2) = (x[t, h], x[t, h + H])` turns by
the angle whose cosine and sine are `cos[t, h]`, `sin[t, h]` (tables passed in).
Index-level: one program per (position, pair) writes both halves. Rewrite as
tensor code with `arange` and `concatenate` when they land.
"""

from mimir.array import Dim, Tensor, float32, gpu, program_id

T = Dim("T")
H = Dim("H")

WAITING_FOR = "arange, concatenate"


@gpu(grid=(T, H))
def rope(
    x: Tensor[float32, T, 2 * H],
    cos: Tensor[float32, T, H],
    sin: Tensor[float32, T, H],
    out: Tensor[float32, T, 2 * H],
):
    t = program_id(0)
    h = program_id(1)
    x1 = x[t, h]
    x2 = x[t, h + H]
    out[t, h] = x1 * cos[t, h] - x2 * sin[t, h]
    out[t, h + H] = x2 * cos[t, h] + x1 * sin[t, h]


if __name__ == "__main__":
    from mimir.array import rand, zeros

    x, c, s = rand((2, 4), seed=1), rand((2, 2), seed=2), rand((2, 2), seed=3)
    out = zeros((2, 4)).to("gpu")
    rope(x.to("gpu"), c.to("gpu"), s.to("gpu"), out)
    print(out)
