"""The annotation types of the kernel language: `Range`, `Tensor[...]`'s value, `InOut`."""

from __future__ import annotations

from typing import Any

from mimir.dims import DimExpr, Size
from mimir.dtypes import DType


class Range:
    """`Range(lo, hi)`, last in `Tensor[int32, N, Range(0, C)]`: every value v has lo <= v < hi.

    The bounds are ints or dims (half-open, as Python's `range`). A call checks the
    argument's values (GPU043); the checker assumes them, so `table[i, idx[i]]` is
    proven in bounds for an axis of size C.
    """

    def __init__(self, lo: Size, hi: Size) -> None:
        for b in (lo, hi):
            if isinstance(b, bool) or not isinstance(b, (int, DimExpr)):
                raise TypeError(f"a Range bound must be an int or a Dim, got {b!r}")
        if isinstance(lo, int) and isinstance(hi, int) and lo >= hi:
            raise TypeError(f"Range({lo}, {hi}) holds no value; the upper bound is exclusive")
        self.lo = lo
        self.hi = hi

    def __repr__(self) -> str:
        return f"Range({self.lo}, {self.hi})"


class TensorType:
    """The run-time value of `Tensor[dtype, d0, d1, ...]` (and an optional `Range`)."""

    def __init__(
        self,
        dtype: DType,
        dims: tuple[Size, ...],
        value_range: Range | None = None,
        inout: bool = False,
    ) -> None:
        self.dtype = dtype
        self.dims = dims
        self.value_range = value_range
        self.inout = inout

    def __repr__(self) -> str:
        extra = [] if self.value_range is None else [repr(self.value_range)]
        inner = ", ".join([self.dtype.name, *(str(d) for d in self.dims), *extra])
        return f"InOut[Tensor[{inner}]]" if self.inout else f"Tensor[{inner}]"


class InOut:
    """`InOut[Tensor[...]]`: a parameter the kernel reads and updates in place.

    A tensor-level kernel updates it by assigning its name (`p -= lr * g`, `m = b * m + g`):
    the value the name holds when the kernel returns is written into the caller's tensor.
    An index-level kernel reads and writes its elements (`cache[pos, j] = k[j]`), each
    element by one program id only (proven by the race rule).
    """

    def __class_getitem__(cls, item: Any) -> TensorType:
        if not isinstance(item, TensorType) or item.inout:
            raise TypeError(f"InOut[...] takes one `Tensor[...]` type, got {item!r}")
        return TensorType(item.dtype, item.dims, item.value_range, inout=True)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TensorType) and repr(self) == repr(other)

    def __hash__(self) -> int:
        return hash(repr(self))
