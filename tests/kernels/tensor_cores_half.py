"""float16 and bfloat16 matmuls: on PTX they multiply on tensor cores by default
(`mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32` and `.bf16.bf16`, float32
accumulators), with no `precision=`: a product of two halves is exact in float32, so only
the order of the float32 additions differs from the shim's (within the dot-product
tolerance). MSL, WGSL and SPIR-V compute the same products with scalar float32 FMAs.
"""

from mimir.array import Dim, Tensor, bfloat16, einsum, float16, float32, gpu

M = Dim("M")
N = Dim("N")
K = Dim("K")
B = Dim("B", max=4)


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
