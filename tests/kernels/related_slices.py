"""Slices sized by dims that relations bound, as ported kernels take a window of a buffer
allocated at its largest: the first T of MAXT columns, the last T, one past P (at most
MAXT - 1), a T x T block of a MAXT x MAXT table, and the first S of a constant CTX."""

from mimir.array import Dim, Tensor, float32, gpu

CTX = 16
B = Dim("B")
MAXT = Dim("MAXT")
T = Dim("T", max=MAXT)
P = Dim("P", max=MAXT - 1)
S = Dim("S", max=CTX)


@gpu
def first_t(x: Tensor[float32, B, MAXT], y: Tensor[float32, B, T]) -> Tensor[float32, B, T]:
    return x[:, :T] + y


@gpu
def last_t_summed(x: Tensor[float32, B, MAXT], y: Tensor[float32, B, T]) -> Tensor[float32, B]:
    return (x[:, MAXT - T :] * y).sum(axis=1)


@gpu
def one_past_p(x: Tensor[float32, B, MAXT], y: Tensor[float32, B, P]) -> Tensor[float32, B, P + 1]:
    return x[:, : P + 1] * 2.0


@gpu
def square_block(table: Tensor[float32, MAXT, MAXT], y: Tensor[float32, T]) -> Tensor[float32, T, T]:
    return table[:T, :T] + y


@gpu
def context_prefix(x: Tensor[float32, B, CTX], y: Tensor[float32, B, S]) -> Tensor[float32, B, S]:
    return x[:, :S] * y
