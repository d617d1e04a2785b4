"""float16 and bfloat16 matmuls: on PTX they multiply on tensor cores by default
(`mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32` and `.bf16.bf16`, float32
accumulators), with no `precision=`: a product of two halves is exact in float32, so only
the order of the float32 additions differs from the shim's (within the dot-product
tolerance). MSL, WGSL and SPIR-V compute the same products with scalar float32 FMAs.

Attention over halves is one launch whose two products run on the same tensor cores on
PTX (`kernels.attention_mma`): the scores and the output accumulate in float32, the
softmax's probabilities are rounded to the inputs' type for the second product (within
the half tolerance).
"""

from mimir.array import Dim, Tensor, arange, bfloat16, einsum, float16, float32, gpu, where

M = Dim("M")
N = Dim("N")
K = Dim("K")
B = Dim("B", max=4)
T = Dim("T")


@gpu
def linear_gelu_f16_tiles(
    x: Tensor[float16, 128, 32], w: Tensor[float16, 32, 128], bias: Tensor[float32, 128]
) -> Tensor[float16, 128, 128]:
    # sizes that are multiples of the tile (and of the 16-deep k-slice): no guards
    return (x @ w + bias).gelu().astype(float16)


@gpu
def bmm_bf16(
    a: Tensor[bfloat16, B, M, K], b: Tensor[bfloat16, B, K, N]
) -> Tensor[bfloat16, B, M, N]:
    return einsum("bij,bjk->bik", a, b)


@gpu
def gated_f16(
    x: Tensor[float16, M, K], w_gate: Tensor[float16, K, N], w_up: Tensor[float16, K, N]
) -> Tensor[float16, M, N]:
    # both products in one launch (`schedule._paired_products`), each on tensor cores
    gate = x @ w_gate
    return gate * gate.sigmoid() * (x @ w_up)


@gpu
def attention_f16(
    q: Tensor[float16, T, 64], k: Tensor[float16, T, 64], v: Tensor[float16, T, 64]
) -> Tensor[float16, T, 64]:
    return ((q @ k.T) * 0.125).softmax() @ v


@gpu
def attention_bf16(
    q: Tensor[bfloat16, B, T, 32], k: Tensor[bfloat16, B, T, 32], v: Tensor[bfloat16, B, T, 16]
) -> Tensor[bfloat16, B, T, 16]:
    scores = (q @ k.transpose(0, 2, 1)) * 0.2
    return scores.softmax(axis=-1) @ v


@gpu
def causal_attention_f16(
    q: Tensor[float16, T, 64], k: Tensor[float16, T, 64], v: Tensor[float16, T, 64]
) -> Tensor[float16, T, 64]:
    scores = (q @ k.T) * 0.125
    keep = arange(T)[:, None] >= arange(T)[None, :]
    return where(keep, scores, -1e30).softmax() @ v
