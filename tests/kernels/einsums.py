"""`einsum` with literal specs, lowered to `@`, transposes and sums."""

from mimir.array import Dim, Tensor, einsum, float32, gpu, int32

N = Dim("N")
K = Dim("K")
M = Dim("M")
B = Dim("B", max=4)
H = Dim("H", max=4)
Q = Dim("Q")
D = Dim("D")
# lavapipe sums a `@` over more than ~65,000 k wrong (MSL and SPIR-V do not): kept below
L = Dim("L", max=16384)


@gpu
def mm(a: Tensor[float32, N, K], b: Tensor[float32, K, M]) -> Tensor[float32, N, M]:
    return einsum("ij,jk->ik", a, b)


@gpu
def einsum_bmm(
    a: Tensor[float32, B, N, K], b: Tensor[float32, B, K, M]
) -> Tensor[float32, B, N, M]:
    return einsum("bij,bjk->bik", a, b)


@gpu
def tr(a: Tensor[float32, N, K]) -> Tensor[float32, K, N]:
    return einsum("ij->ji", a)


@gpu
def rows(a: Tensor[float32, N, K]) -> Tensor[float32, N]:
    return einsum("ij->i", a)


@gpu
def attn(
    q: Tensor[float32, B, H, Q, D], k: Tensor[float32, B, H, N, D]
) -> Tensor[float32, B, H, Q, N]:
    return einsum("bhqd,bhkd->bhqk", q, k)


@gpu
def einsum_outer(a: Tensor[float32, N], b: Tensor[float32, M]) -> Tensor[float32, N, M]:
    return einsum("i,j->ij", a, b)


@gpu
def dot(a: Tensor[float32, L], b: Tensor[float32, L]) -> Tensor[float32]:
    return einsum("i,i->", a, b)


@gpu
def matvec(a: Tensor[float32, N, K], x: Tensor[float32, K]) -> Tensor[float32, N]:
    # no kept letter on the right: a row sum of a * x, not a `@` filling one tile column
    return einsum("ij,j->i", a, x)


@gpu
def batched_dot(a: Tensor[float32, B, L], b: Tensor[float32, B, L]) -> Tensor[float32, B]:
    return einsum("bi,bi->b", a, b)


@gpu
def two_contracted(
    a: Tensor[float32, N, K, D], b: Tensor[float32, K, D, M]
) -> Tensor[float32, M, N]:
    return einsum("ikd,kdj->ji", a, b)


@gpu
def int_implicit(a: Tensor[int32, N, K], b: Tensor[int32, K, M]) -> Tensor[int32, N, M]:
    return einsum("ij,jk", a, b) + 1


@gpu
def einsum_transposed(a: Tensor[float32, N, K], b: Tensor[float32, K, M]) -> Tensor[float32, M, N]:
    return einsum("ij,jk->ki", a, b)


@gpu
def two_kept(
    a: Tensor[float32, N, Q, K], b: Tensor[float32, K, M, D]
) -> Tensor[float32, N, Q, M, D]:
    return einsum("nqk,kmd->nqmd", a, b)


@gpu
def batched_two_contracted(
    a: Tensor[float32, B, N, K, D], b: Tensor[float32, B, D, K, M]
) -> Tensor[float32, B, M, N]:
    return einsum("bnkd,bdkm->bmn", a, b)


@gpu
def vector_two_contracted(
    x: Tensor[float32, K, D], w: Tensor[float32, K, D, M]
) -> Tensor[float32, M]:
    return einsum("kd,kdm->m", x, w)
