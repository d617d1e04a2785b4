"""A Dim imported under another name means the same Dim (its constraints included)."""

from mimir.array import Tensor, float32, gpu

from .dims import N as Rows


@gpu
def first_rows(x: Tensor[float32, Rows, 8]) -> Tensor[float32, 2, 8]:
    return x[:2]


@gpu
def too_many_rows(x: Tensor[float32, Rows, 8]) -> Tensor[float32, 3, 8]:
    return x[:3]  # E: GPU018
