"""Sizes as ported llm.c and Triton kernels write them: a KV cache of `T + P` rows, llm.c's
`qkv` of `3 * NH * HS` columns, and a dim that only an equation fixes (`3 * C` alone: C is
the size / 3)."""

from mimir.array import Dim, Tensor, float32, gpu

B = Dim("B")
T = Dim("T")
P = Dim("P")
C = Dim("C")
NH = Dim("NH")
HS = Dim("HS")


@gpu
def cache_tail(
    cache: Tensor[float32, T + P, C], new: Tensor[float32, T, C], past: Tensor[float32, P, C]
) -> Tensor[float32, T, C]:
    return cache[P:, :] + new


@gpu
def qkv_values(
    qkv: Tensor[float32, B, T, 3 * NH * HS], q: Tensor[float32, B, T, NH, HS]
) -> Tensor[float32, B, T, NH * HS]:
    return qkv[:, :, 2 * NH * HS :] * q.reshape(B, T, NH * HS)


@gpu
def thirds_summed(x: Tensor[float32, 3 * C]) -> Tensor[float32, C]:
    return x[:C] + x[C : 2 * C] * 2.0 + x[2 * C :] * 3.0


@gpu
def shifted_rows(x: Tensor[float32, B, T + 1]) -> Tensor[float32, B, T]:
    return x[:, 1:] - x[:, :T]
