"""Dims bounded by other sizes, as llm.c's encoder writes them: a position table of MAXT rows
sliced to the T in use (`Dim("T", max=MAXT)`), a bound from a module-level constant, and a
window at least T long."""

from mimir.array import Dim, Tensor, float32, gpu

BLOCK = 64
B = Dim("B")
C = Dim("C")
MAXT = Dim("MAXT")
T = Dim("T", max=MAXT)
SMALL = Dim("SMALL", max=BLOCK)
W = Dim("W", min=T)


@gpu
def encoder(
    wte_rows: Tensor[float32, B, T, C], wpe: Tensor[float32, MAXT, C]
) -> Tensor[float32, B, T, C]:
    return wte_rows + wpe[:T]


@gpu
def table_prefix(x: Tensor[float32, SMALL], table: Tensor[float32, BLOCK]) -> Tensor[float32, SMALL]:
    return x * table[:SMALL]


@gpu
def window_head(w: Tensor[float32, W, C], x: Tensor[float32, T, C]) -> Tensor[float32, T, C]:
    return w[:T] - x
