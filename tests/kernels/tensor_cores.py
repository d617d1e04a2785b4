"""Matmuls with `@gpu(precision="tf32")`: their float32 operands may be read as TF32.

On PTX they multiply on tensor cores (`mma.sync.aligned.m16n8k8 ... tf32`, operands
rounded with `cvt.rna.tf32.f32`), which the shim reproduces by rounding each operand to
TF32 before its exact products: the two agree to float32 accumulation error. MSL, WGSL
and SPIR-V have no tensor-core path and compute in full float32, within the TF32
rounding of the shim (`tests/test_backends_exec.py`, `_tf32_atol`).
"""

from mimir.array import Dim, Tensor, einsum, float32, gpu

M = Dim("M")
N = Dim("N")
K = Dim("K")
B = Dim("B", max=4)


@gpu(precision="tf32")
def matmul_tf32(a: Tensor[float32, M, K], b: Tensor[float32, K, N]) -> Tensor[float32, M, N]:
    return a @ b


@gpu(precision="tf32")
def linear_tf32_tiles(
    x: Tensor[float32, 128, 32], w: Tensor[float32, 32, 128], bias: Tensor[float32, 128]
) -> Tensor[float32, 128, 128]:
    # sizes that are multiples of the tile: no guard in the staging or the stores
    return (x @ w + bias).relu()


@gpu(precision="tf32")
def bmm_tf32(a: Tensor[float32, B, M, K], b: Tensor[float32, B, K, N]) -> Tensor[float32, B, M, N]:
    return einsum("bij,bjk->bik", a, b)


@gpu(precision="tf32")
def attention_tf32(
    q: Tensor[float32, M, 32], k: Tensor[float32, N, 32], v: Tensor[float32, N, 32]
) -> Tensor[float32, M, 32]:
    return (q @ k.T * 0.2).softmax() @ v


@gpu(precision="tf32")
def probabilities_tf32(
    q: Tensor[float32, M, 32], k: Tensor[float32, N, 32]
) -> Tensor[float32, M, N]:
    return (q @ k.T * 0.2).softmax()


@gpu(precision="tf32")
def gated_tf32(
    x: Tensor[float32, M, K], w_gate: Tensor[float32, K, N], w_up: Tensor[float32, K, N]
) -> Tensor[float32, M, N]:
    # both products in one launch (`schedule._paired_products`), each on tensor cores
    gate = x @ w_gate
    return gate * gate.sigmoid() * (x @ w_up)
