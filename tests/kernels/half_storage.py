"""float16 and bfloat16 results: computed in float32, rounded to nearest even where stored.

A bfloat16 linear layer with a GELU epilogue (`x @ w` accumulates in float32 and rounds
once to bfloat16; the matmul stores float32 scratch, a packing launch writes two elements a
word), the same with every value bfloat16, an RMS norm stored as bfloat16, a float16 matmul with
a float16 result, an `InOut` bfloat16 update (packed over the old words), bfloat16 read
back by a later launch (scratch held as float32), and a bfloat16 parameter returned as
it is.
"""

from mimir.array import Dim, InOut, Tensor, bfloat16, float16, float32, gpu

N = Dim("N")
M = Dim("M")
K = Dim("K", max=256)
D = Dim("D")


@gpu
def bf16_linear_gelu(
    x: Tensor[bfloat16, N, K], w: Tensor[bfloat16, K, M], b: Tensor[float32, M]
) -> Tensor[bfloat16, N, M]:
    return (x @ w + b).gelu().astype(bfloat16)


@gpu
def bf16_linear_all_bf16(
    x: Tensor[bfloat16, N, K], w: Tensor[bfloat16, K, M], b: Tensor[bfloat16, M]
) -> Tensor[bfloat16, N, M]:
    """Every op's result rounded to bfloat16 (the product, the sum, the GELU)."""
    return (x @ w + b).gelu()


@gpu
def bf16_rms_norm(x: Tensor[bfloat16, N, D], g: Tensor[bfloat16, D]) -> Tensor[bfloat16, N, D]:
    h = x.astype(float32)
    scale = ((h * h).mean(axis=1, keepdims=True) + 1e-6).rsqrt()
    return (h * scale * g.astype(float32)).astype(bfloat16)


@gpu
def f16_matmul(x: Tensor[float16, N, K], w: Tensor[float16, K, M]) -> Tensor[float16, N, M]:
    return x @ w


@gpu
def bf16_update(p: InOut[Tensor[bfloat16, N, D]], grad: Tensor[float32, N, D], lr: float):
    p = (p.astype(float32) - lr * grad).astype(bfloat16)


@gpu
def bf16_twice(x: Tensor[float32, N, M]) -> tuple[Tensor[bfloat16, N, M], Tensor[float32, N]]:
    y = (x * 3.0).astype(bfloat16)
    return y, y.astype(float32).sum(axis=1)


@gpu
def bf16_identity(x: Tensor[bfloat16, N]) -> Tensor[bfloat16, N]:
    return x


@gpu
def round_to_half(x: Tensor[float32, N]) -> tuple[Tensor[float16, N], Tensor[bfloat16, N]]:
    """float32 rounded to float16 and to bfloat16 (`tests/test_half_rounding.py` feeds it
    ties, overflow, subnormals and nan, and compares the bits)."""
    return x.astype(float16), x.astype(bfloat16)
