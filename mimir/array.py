"""`mimir.array`: the kernel language, executable as plain Python.

This module is the living definition of the kernel language's semantics. A file
written against it runs under plain `python` (so a breakpoint works), and the
same file is what `mimir check` proves and `mimir compile-gpu` compiles.

    from mimir.array import Tensor, gpu, Dim, float32

    N = Dim("N")

    @gpu
    def linear(x: Tensor[float32, N, 784], w: Tensor[float32, 784, 128]) -> Tensor[float32, N, 128]:
        return (x @ w).relu()

Calling a `@gpu` function binds each `Dim` to a size, checks every argument and
the result against the annotations, and raises `MimirError` carrying the same
diagnostic code the checker reports. Every op comes from the one op table
(`mimir.ops`), shared with the checker and the backends.

Stdlib-only: importing this module never imports z3, networkx or numpy.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import itertools
import random as _random
import struct
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from mimir import ops
from mimir.dims import (
    Dim,
    DimExpr,
    Size,
    SizeDivisionError,
    SizeInt,
    UnboundDimError,
    evaluate,
    set_binding_hook,
)
from mimir.dtypes import (
    DType,
    bfloat16,
    bool_,
    float16,
    float32,
    int32,
    promote_weak,
    scalar_kind,
    uint32,
)
from mimir.ops import dtype_rules as dr
from mimir.ops import einsum as einsum_rules
from mimir.ops import evaluate as ev
from mimir.ops import numerics as nm
from mimir.ops import shapes as sh

__all__ = [
    "Dim",
    "DType",
    "InOut",
    "MimirError",
    "Range",
    "Tensor",
    "TensorType",
    "arange",
    "concatenate",
    "bool_",
    "bfloat16",
    "float16",
    "float32",
    "gpu",
    "einsum",
    "full",
    "int32",
    "maximum",
    "minimum",
    "atomic_add",
    "program_id",
    "take_along_axis",
    "ones",
    "rand",
    "stack",
    "tensor",
    "tril",
    "triu",
    "uint32",
    "where",
    "zeros",
]

DEVICES = ("cpu", "gpu")

# The dim bindings of the @gpu call being executed (None outside kernels).
_BINDINGS: contextvars.ContextVar[dict[str, int] | None] = contextvars.ContextVar(
    "mimir_bindings", default=None
)


class _GridRun:
    """The state of one index-level launch: the current program id and who touched what."""

    def __init__(self) -> None:
        self.pids: tuple[int, ...] = ()
        self.writes: dict[tuple[int, int], tuple[int, ...]] = {}
        self.reads: dict[tuple[int, int], set[tuple[int, ...]]] = {}
        self.atomics: dict[tuple[int, int], set[tuple[int, ...]]] = {}
        # the buffers a program read an element of that it had not written itself before
        self.unwritten_reads: set[int] = set()

    def check_atomics(self, slot: tuple[int, int], what: str) -> None:
        """A plain read or write of an element another program id adds to atomically."""
        others = self.atomics.get(slot, set()) - {self.pids}
        if others:
            raise MimirError(
                "GPU028",
                f"write race: program ids {sorted(others)[0]} and {self.pids} "
                f"`atomic_add` and {what} the same element",
            )


# The matmul precision of the @gpu call being executed (`@gpu(precision=...)`): "float32"
# (exact products, one rounding) or "tf32" (float32 operands of `@` and of an einsum that
# lowers to `@` rounded to TF32 first, as a tensor core reads them).
PRECISIONS = ("float32", "tf32")
_PRECISION: contextvars.ContextVar[str] = contextvars.ContextVar(
    "mimir_precision", default="float32"
)


def _matmul_operand(x: Tensor) -> Any:
    """The values `@` multiplies: a float32 tensor's rounded to TF32 under `precision="tf32"`."""
    if _PRECISION.get() == "tf32" and x._dtype == float32:
        return [nm.tf32(float(v)) for v in x._values]
    return x._values


# The index-level launch being executed (None outside `@gpu(grid=...)` kernels).
_GRID: contextvars.ContextVar[_GridRun | None] = contextvars.ContextVar("mimir_grid", default=None)


class MimirError(Exception):
    """A kernel-language rule failed at run time; `code` is the checker's code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"[{code}] {message}")
        self.code = code
        self.message = message


def _in_kernel() -> bool:
    return _BINDINGS.get() is not None


def _resolve(size: Any) -> Any:
    """A Dim or dim expression as its value in the running kernel (a `SizeInt`)."""
    if isinstance(size, DimExpr):
        env = _BINDINGS.get()
        try:
            return SizeInt(evaluate(size, env or {}))
        except UnboundDimError as err:
            raise MimirError(
                "GPU035", f"dim `{err.name}` is not fixed by any parameter of the kernel"
            ) from None
        except ZeroDivisionError:
            raise MimirError("GPU036", f"the size `{size}` divides by zero") from None
    return size


def _static_int(value: Any, what: str) -> int:
    """An int that decides a shape (an axis, a size): the checker's GPU036 when it is not one."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise MimirError("GPU036", f"{what} must be an int, got {type(value).__name__}")
    return value


def _rule(fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return fn(*args)
    except sh.RuleError as err:
        raise MimirError(err.code, err.message) from None


_A = sh.INT_ALGEBRA


# ---------------------------------------------------------------- annotations


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


# ---------------------------------------------------------------- the tensor

# dtype name -> (struct code, NumPy dtype string) for `Tensor.__array__`
_NUMPY_CODES = {
    "float32": ("f", "<f4"),
    "float16": ("e", "<f2"),
    "int32": ("i", "<i4"),
    "uint32": ("I", "<u4"),
    "bool_": ("?", "?"),
}


class Tensor:
    """A dense row-major tensor held as a flat Python list."""

    __slots__ = ("_values", "_shape", "_dtype", "_device")

    def __init__(self, values: list, shape: Sequence[int], dtype: DType, device: str) -> None:
        self._values = values
        self._shape = tuple(int(s) for s in shape)  # plain ints, never a SizeInt
        self._dtype = dtype
        self._device = device

    def __class_getitem__(cls, item: Any) -> TensorType:
        items = item if isinstance(item, tuple) else (item,)
        dtype, *dims = items
        if not isinstance(dtype, DType):
            raise TypeError(f"Tensor[...] takes a dtype first, got {dtype!r}")
        value_range = dims.pop() if dims and isinstance(dims[-1], Range) else None
        if value_range is not None and not dtype.is_integer:
            raise TypeError(f"a Range describes an integer tensor's values, not {dtype}")
        for d in dims:
            if isinstance(d, bool) or not isinstance(d, (int, DimExpr)):
                raise TypeError(f"a Tensor dim must be an int or a Dim, got {d!r}")
        return TensorType(dtype, tuple(dims), value_range)

    # -- host-side inspection (not part of the kernel language)

    def _host_only(self, what: str) -> None:
        if _in_kernel():
            raise MimirError("GPU030", f"unknown attribute `.{what}` on a tensor inside `@gpu`")

    @property
    def shape(self) -> tuple[int, ...]:
        if _in_kernel():
            # Sizes, not literals: `x[x.shape[0] - 3:]` never counts from the end.
            return tuple(SizeInt(s) for s in self._shape)
        return self._shape

    @property
    def dtype(self) -> DType:
        self._host_only("dtype")
        return self._dtype

    @property
    def device(self) -> str:
        self._host_only("device")
        return self._device

    @property
    def ndim(self) -> int:
        self._host_only("ndim")
        return len(self._shape)

    def to(self, device: str) -> Tensor:
        """A copy of this tensor on `device` (`"cpu"` or `"gpu"`)."""
        self._host_only("to")
        if device not in DEVICES:
            raise ValueError(f"unknown device {device!r}; expected one of {DEVICES}")
        return Tensor(list(self._values), self._shape, self._dtype, device)

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        """NumPy's conversion (`np.asarray(t)`): the values packed as bytes, not a list."""
        import numpy  # only NumPy calls this, so it is loaded already

        self._host_only("__array__")
        del copy  # the result never shares memory with the tensor
        code, np_dtype = _NUMPY_CODES[self._dtype.name]
        values = self._values
        if self._dtype.is_bool:
            values = [bool(v) for v in values]
        data = struct.pack(f"<{len(values)}{code}", *values)
        out = numpy.frombuffer(data, dtype=np_dtype).reshape(self._shape).copy()
        return out if dtype is None else out.astype(dtype)

    def tolist(self) -> Any:
        self._host_only("tolist")
        return _nest(self._values, self._shape)

    def item(self) -> Any:
        self._host_only("item")
        if len(self._values) != 1:
            raise ValueError("only a tensor with one element can be converted to a scalar")
        return self._values[0]

    def flat(self) -> list:
        """The values in row-major order (a copy)."""
        self._host_only("flat")
        return list(self._values)

    def __repr__(self) -> str:
        return (
            f"Tensor({_nest(self._values, self._shape)!r}, dtype={self._dtype.name}, "
            f"device={self._device!r})"
        )

    def __bool__(self) -> bool:
        if _GRID.get() is not None and self._shape == ():
            return bool(self._values[0])  # an element condition in an index-level kernel
        raise MimirError(
            "GPU031", "the truth value of a tensor is ambiguous; use `where`, `&` or `|`"
        )

    def _to_float(self) -> float:
        # `math.exp(x[i])` of an element in an index-level kernel: a Python float, as
        # `math.sqrt(D)` of a size is (the checker's weak float)
        if _GRID.get() is not None and self._shape == () and self._dtype.is_float:
            return float(self._values[0])
        return self._to_number()

    def _to_number(self, *_: Any) -> Any:
        # `math.exp(x)`, `int(x)`: Python reads a number out of the tensor. Inside `@gpu`
        # that is an op the kernel language does not define (the checker's GPU030).
        if _in_kernel():
            raise MimirError(
                "GPU030", "a tensor cannot be converted to a Python number in a kernel"
            )
        raise TypeError("a tensor is not a Python number; use `.item()` in host code")

    __float__ = _to_float
    __int__ = __index__ = __complex__ = _to_number

    def __getattr__(self, name: str) -> Any:
        # Only reached when normal lookup fails: an unknown method or attribute.
        if name.startswith("__"):
            raise AttributeError(name)
        raise MimirError("GPU030", f"unknown attribute `.{name}` on a tensor")

    # -- layout

    @property
    def T(self) -> Tensor:  # noqa: N802 - NumPy's spelling
        return self.transpose()

    def transpose(self, *axes: int) -> Tensor:
        _element_only(self)
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        perm_arg = tuple(_static_int(a, "a transpose axis") for a in axes) if axes else None
        out_shape = _rule(sh.transpose, _A, self._shape, perm_arg)
        perm = sh.permutation(len(self._shape), perm_arg)
        return self._like(ev.transpose(self._values, self._shape, perm), out_shape)

    def reshape(self, *shape: Any) -> Tensor:
        _element_only(self)
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        new = tuple(_static_int(_resolve(s), "a size of `.reshape()`") for s in shape)
        out_shape = _rule(sh.reshape, _A, self._shape, new)
        return self._like(list(self._values), out_shape)

    def __getitem__(self, key: Any) -> Tensor:
        run = _GRID.get()
        if run is not None:
            flat = self._element_index(key)
            run.check_atomics((id(self._values), flat), "read")
            run.reads.setdefault((id(self._values), flat), set()).add(run.pids)
            other = run.writes.get((id(self._values), flat))
            if other != run.pids:
                run.unwritten_reads.add(id(self._values))
            if other is not None and other != run.pids:
                raise MimirError(
                    "GPU028",
                    f"write race: program ids {other} and {run.pids} "
                    "write and read the same element",
                )
            return Tensor([self._values[flat]], (), self._dtype, self._device)
        if isinstance(key, Tensor):  # `table[idx]`: NumPy's integer-array index, rows
            return _gather(self, key, 0, along=False)
        items = key if isinstance(key, tuple) else (key,)
        parsed = [_index_item(k) for k in items]
        out_shape, resolved = _rule(sh.index, _A, self._shape, parsed)
        return self._like(ev.index(self._values, self._shape, resolved), out_shape)

    def __setitem__(self, key: Any, value: Any) -> None:
        run = _GRID.get()
        if run is None:
            raise MimirError(
                "GPU031",
                "element assignment is only allowed in index-level kernels (`@gpu(grid=...)`)",
            )
        flat = self._element_index(key)
        slot = (id(self._values), flat)
        run.check_atomics(slot, "write")
        other = run.writes.get(slot)
        readers = run.reads.get(slot, set()) - {run.pids}
        if (other is not None and other != run.pids) or readers:
            who = other if other is not None and other != run.pids else sorted(readers)[0]
            raise MimirError(
                "GPU028", f"write race: program ids {who} and {run.pids} touch the same element"
            )
        run.writes[slot] = run.pids
        self._values[flat] = _store_value(value, self._dtype)

    def _element_index(self, key: Any) -> int:
        """The flat index of `self[key]` in an index-level kernel (every axis an int)."""
        items = key if isinstance(key, tuple) else (key,)
        if len(items) != len(self._shape) or any(isinstance(k, slice) for k in items):
            raise MimirError(
                "GPU036",
                f"an index-level kernel reads and writes single elements: index all "
                f"{len(self._shape)} axes with ints",
            )
        flat = 0
        for axis, (k, size) in enumerate(zip(items, self._shape, strict=True)):
            i = _index_int(k)
            if not 0 <= i < size:
                raise MimirError(
                    "GPU018",
                    f"index {i} is out of bounds for axis {axis} with size {size}",
                )
            flat = flat * size + i
        return flat

    def _like(self, values: list, shape: Sequence[int], dtype: DType | None = None) -> Tensor:
        return Tensor(values, tuple(shape), dtype or self._dtype, self._device)

    # -- reductions and friends

    def _reduce(self, name: str, axis: Any = None, keepdims: bool = False) -> Tensor:
        _element_only(self)
        if isinstance(axis, list):
            axis = tuple(axis)
        for a in () if axis is None else axis if isinstance(axis, tuple) else (axis,):
            _static_int(a, f"the axis of `.{name}()`")
        if not isinstance(keepdims, bool):
            raise MimirError("GPU036", "`keepdims` must be True or False")
        out_shape = _rule(sh.reduction, _A, self._shape, axis, keepdims, name)
        axes = sh.reduce_axes(_A, len(self._shape), axis, name)
        dtype = _rule(ops.BY_METHOD[name].dtype_rule, f".{name}()", [self._dtype])
        values = ev.reduce(name, self._values, self._shape, axes, self._dtype, dtype)
        return self._like(values, out_shape, dtype)

    def sum(self, axis: Any = None, keepdims: bool = False) -> Tensor:
        return self._reduce("sum", axis, keepdims)

    def mean(self, axis: Any = None, keepdims: bool = False) -> Tensor:
        return self._reduce("mean", axis, keepdims)

    def max(self, axis: Any = None, keepdims: bool = False) -> Tensor:
        return self._reduce("max", axis, keepdims)

    def min(self, axis: Any = None, keepdims: bool = False) -> Tensor:
        return self._reduce("min", axis, keepdims)

    def _scan(self, name: str, axis: Any) -> Tensor:
        _element_only(self)
        if axis is not None:
            _static_int(axis, f"the axis of `.{name}()`")
        out_shape = _rule(sh.scan, _A, self._shape, axis, name)
        dtype = _rule(ops.BY_METHOD[name].dtype_rule, f".{name}()", [self._dtype])
        norm = None if axis is None else axis % len(self._shape)
        values = ev.scan(name, self._values, self._shape, norm, dtype)
        return self._like(values, out_shape, dtype)

    def cumsum(self, axis: Any = None) -> Tensor:
        """Inclusive prefix sums along `axis` (NumPy's `cumsum`; `axis=None` flattens)."""
        return self._scan("cumsum", axis)

    def cumprod(self, axis: Any = None) -> Tensor:
        """Inclusive prefix products along `axis` (NumPy's `cumprod`; `axis=None` flattens)."""
        return self._scan("cumprod", axis)

    def _softmax(self, name: str, axis: int) -> Tensor:
        _element_only(self)
        _static_int(axis, f"the axis of `.{name}()`")
        _rule(sh.along_axis, _A, self._shape, axis, name)
        dtype = _rule(ops.BY_METHOD[name].dtype_rule, f".{name}()", [self._dtype])
        values = ev.softmax(
            self._values, self._shape, axis % len(self._shape), name == "log_softmax", dtype
        )
        return self._like(values, self._shape, dtype)

    def softmax(self, axis: int = -1) -> Tensor:
        return self._softmax("softmax", axis)

    def log_softmax(self, axis: int = -1) -> Tensor:
        return self._softmax("log_softmax", axis)

    def _argreduce(self, name: str, axis: Any, keepdims: bool) -> Tensor:
        _element_only(self)
        if axis is not None:
            _static_int(axis, f"the axis of `.{name}()`")
        if not isinstance(keepdims, bool):
            raise MimirError("GPU036", "`keepdims` must be True or False")
        out_shape = _rule(sh.argreduction, _A, self._shape, axis, keepdims, name)
        axes = sh.reduce_axes(_A, len(self._shape), axis, name)
        dtype = _rule(ops.BY_METHOD[name].dtype_rule, f".{name}()", [self._dtype])
        return self._like(ev.argreduce(name, self._values, self._shape, axes, self._dtype),
                          out_shape, dtype)  # fmt: skip

    def argmax(self, axis: int | None = None, keepdims: bool = False) -> Tensor:
        """The first index of the largest element (a NaN counts as the largest), int32."""
        return self._argreduce("argmax", axis, keepdims)

    def argmin(self, axis: int | None = None, keepdims: bool = False) -> Tensor:
        """The first index of the smallest element (a NaN counts as the smallest), int32."""
        return self._argreduce("argmin", axis, keepdims)

    def _moments(self, name: str, axis: Any, ddof: int, keepdims: bool) -> Tensor:
        _element_only(self)
        if isinstance(axis, list):
            axis = tuple(axis)
        for a in () if axis is None else axis if isinstance(axis, tuple) else (axis,):
            _static_int(a, f"the axis of `.{name}()`")
        _static_int(ddof, f"`ddof` of `.{name}()`")
        if not isinstance(keepdims, bool):
            raise MimirError("GPU036", "`keepdims` must be True or False")
        out_shape = _rule(sh.moments, _A, self._shape, axis, ddof, keepdims, name)
        axes = sh.reduce_axes(_A, len(self._shape), axis, name)
        dtype = _rule(ops.BY_METHOD[name].dtype_rule, f".{name}()", [self._dtype])
        values = ev.moments(name, self._values, self._shape, axes, ddof, dtype)
        return self._like(values, out_shape, dtype)

    def var(self, axis: Any = None, ddof: int = 0, keepdims: bool = False) -> Tensor:
        """The variance, sum((x - mean)**2) / (count - ddof), computed in two passes."""
        return self._moments("var", axis, ddof, keepdims)

    def std(self, axis: Any = None, ddof: int = 0, keepdims: bool = False) -> Tensor:
        """The square root of `var`."""
        return self._moments("std", axis, ddof, keepdims)

    def astype(self, dtype: DType) -> Tensor:
        _element_only(self)
        if not isinstance(dtype, DType):
            raise MimirError("GPU036", f"`astype` takes a dtype such as `float32`, got {dtype!r}")
        return self._like(nm.cast(self._values, dtype), self._shape, dtype)

    def clip(self, lo: Any, hi: Any) -> Tensor:
        return _elementwise(ops.BY_METHOD["clip"], [self, lo, hi])


# ---------------------------------------------------------------- element-wise dispatch


def _index_item(k: Any) -> tuple:
    if k is None:
        return ("newaxis",)
    if k is Ellipsis:
        return ("ellipsis",)
    if isinstance(k, slice):
        if k.step is not None and _resolve(k.step) != 1:
            raise MimirError("GPU031", "slice steps are not supported in the kernel language")
        return ("slice", _index_bound(k.start), _index_bound(k.stop))
    if isinstance(k, (int, DimExpr)) and not isinstance(k, bool):
        _refuse_runtime_bound(k)
        return ("int", _resolve(k))
    raise MimirError("GPU036", f"unsupported index {k!r}: use ints, dims, slices, None or ...")


def _element_only(*tensors: Tensor) -> None:
    """Index-level kernels compute on single elements; whole-tensor ops are GPU031 there."""
    if _GRID.get() is not None and any(t._shape != () for t in tensors):
        raise MimirError(
            "GPU031",
            "a tensor-level op inside an index-level kernel; compute on single elements",
        )


def _index_int(k: Any) -> int:
    """An index in an index-level kernel: an int, a dim, or a 0-d integer tensor."""
    if isinstance(k, Tensor) and k._shape == () and k._dtype.is_integer:
        return int(k._values[0])
    k = _resolve(k)
    if isinstance(k, bool) or not isinstance(k, int):
        raise MimirError("GPU036", f"an index must be an int expression, got {k!r}")
    return k


def _store_value(value: Any, dtype: DType) -> Any:
    """`value` as an element of `dtype`, refusing implicit conversions (GPU027)."""
    if isinstance(value, Tensor):
        if value._shape != ():
            raise MimirError("GPU036", "an element store needs a scalar value")
        kind: DType | str = value._dtype
        raw = value._values[0]
    else:
        value = _resolve(value)
        kind = scalar_kind(value)
        raw = value
    got = kind if isinstance(kind, DType) else promote_weak(dtype, kind)
    if got != dtype:
        shown = kind if isinstance(kind, DType) else f"a Python {kind}"
        raise MimirError(
            "GPU027", f"store dtype mismatch: the tensor holds {dtype}, the value is {shown}"
        )
    return nm.cast([raw], dtype)[0]


def atomic_add(out: Tensor, index: Any, value: Any) -> None:
    """`out[index] += value` as one atomic step, in an index-level kernel.

    Several program ids may add to one element (a histogram, a scatter-add): the adds
    commute, so the result does not depend on their order (for float32 up to rounding,
    as on a GPU). A plain read or write of an element another program id adds to is a race
    (GPU028). The dtype must be int32, uint32 or float32; int sums wrap as the dtype does.
    """
    run = _GRID.get()
    if run is None:
        raise MimirError(
            "GPU031",
            "`atomic_add` is only allowed in index-level kernels (`@gpu(grid=...)`); "
            "a tensor-level kernel sums with `.sum(axis=...)`",
        )
    if not isinstance(out, Tensor):
        raise MimirError("GPU036", "`atomic_add` adds into a tensor parameter")
    spec = ops.BY_FUNCTION["atomic_add"]
    kind = value._dtype if isinstance(value, Tensor) else scalar_kind(_resolve(value))
    _rule(spec.dtype_rule, spec.spelling, [out._dtype, kind])
    flat = out._element_index(index)
    slot = (id(out._values), flat)
    other = run.writes.get(slot)
    readers = run.reads.get(slot, set()) - {run.pids}
    if (other is not None and other != run.pids) or readers:
        who = other if other is not None and other != run.pids else sorted(readers)[0]
        raise MimirError(
            "GPU028",
            f"write race: program ids {who} and {run.pids} touch the same element "
            "(a plain access and an `atomic_add`)",
        )
    run.atomics.setdefault(slot, set()).add(run.pids)
    add = _store_value(value, out._dtype)
    out._values[flat] = nm.cast([nm.add(out._values[flat], add)], out._dtype)[0]


def take_along_axis(arr: Tensor, indices: Tensor, axis: int) -> Tensor:
    """NumPy's `take_along_axis`: `out[..., j, ...] = arr[..., indices[..., j, ...], ...]`.

    `indices` has `arr`'s rank and its sizes on every other axis; each value must index
    `axis` (GPU018, as the checker proves from a `Range` on the index parameter).
    """
    if not isinstance(arr, Tensor) or not isinstance(indices, Tensor):
        raise MimirError("GPU036", "`take_along_axis()` takes two tensors and an axis")
    return _gather(arr, indices, _static_int(axis, "the axis of `take_along_axis()`"), along=True)


def _gather(x: Tensor, idx: Tensor, axis: int, along: bool) -> Tensor:
    _element_only(x, idx)
    spelling = "take_along_axis()" if along else "[]"
    if not idx._dtype.is_integer:
        raise MimirError(
            "GPU020", f"the index of `{spelling}` must hold int32 or uint32, not {idx._dtype}"
        )
    rank = len(x._shape)
    if rank == 0:
        raise MimirError("GPU019", f"`{spelling}` gathers from a tensor of rank 0")
    if along:
        if not -rank <= axis < rank:
            raise MimirError("GPU014", f"axis {axis} is out of range for a tensor of rank {rank}")
        axis %= rank
        if len(idx._shape) != rank or any(
            idx._shape[k] != x._shape[k] for k in range(rank) if k != axis
        ):
            raise MimirError(
                "GPU010",
                f"`{spelling}` needs an index of shape {list(x._shape)} except on axis {axis}, "
                f"got {list(idx._shape)}",
            )
        out_shape = idx._shape
    else:
        out_shape = (*idx._shape, *x._shape[1:])
    size = x._shape[axis]
    for v in idx._values:
        if not 0 <= v < size:
            raise MimirError(
                "GPU018", f"index {v} is out of bounds for axis {axis} with size {size}"
            )
    strides = [1] * rank
    for k in range(rank - 2, -1, -1):
        strides[k] = strides[k + 1] * x._shape[k + 1]
    values = []
    if along:
        for flat, v in enumerate(idx._values):
            pos, rest = 0, flat
            for k in range(rank - 1, -1, -1):
                coord = rest % idx._shape[k]
                rest //= idx._shape[k]
                pos += (v if k == axis else coord) * strides[k]
            values.append(x._values[pos])
    else:
        row = strides[0]
        for v in idx._values:
            values.extend(x._values[v * row : (v + 1) * row])
    return Tensor(values, out_shape, x._dtype, x._device)


def program_id(axis: int) -> int:
    """The id of the running program along grid `axis`, in an index-level kernel."""
    run = _GRID.get()
    if run is None:
        raise MimirError("GPU036", "`program_id` is only defined inside `@gpu(grid=...)` kernels")
    if not isinstance(axis, int) or not 0 <= axis < len(run.pids):
        raise MimirError(
            "GPU036", f"`program_id` takes an axis below the grid's rank {len(run.pids)}"
        )
    return run.pids[axis]


class _RuntimeInt(int):
    """An `int` parameter's value in a running tensor-level kernel: a number known only at
    the call, so it can scale and shift tensors but never size one (the checker's GPU026)."""

    __slots__ = ()


def _refuse_runtime_bound(b: Any) -> None:
    if isinstance(b, _RuntimeInt):
        raise MimirError(
            "GPU026",
            f"a slice bound or index is the run-time int {int(b)}; a size must be a `Dim`",
        )


def _index_bound(b: Any) -> Any:
    _refuse_runtime_bound(b)
    if b is None:
        return None
    if isinstance(b, bool) or not isinstance(b, (int, DimExpr)):
        raise MimirError("GPU036", f"a slice bound must be an int or a dim, got {b!r}")
    return _resolve(b)


def _operand_dtype(x: Any) -> DType | str:
    if isinstance(x, Tensor):
        return x._dtype
    return scalar_kind(x)


def _elementwise(spec: ops.OpSpec, operands: list[Any]) -> Tensor:
    _element_only(*(x for x in operands if isinstance(x, Tensor)))
    operands = [_resolve(x) for x in operands]
    for x in operands:
        if not isinstance(x, (Tensor, int, float)):
            raise MimirError(
                "GPU036", f"`{spec.spelling}` got an operand of type {type(x).__name__}"
            )
    tensors = [x for x in operands if isinstance(x, Tensor)]
    devices = {t._device for t in tensors}
    if len(devices) > 1:
        raise MimirError("GPU061", f"`{spec.spelling}` mixes tensors on cpu and gpu")
    kinds = [_operand_dtype(x) for x in operands]
    dtype = _rule(spec.dtype_rule, spec.spelling, kinds)
    out_shape = _rule(sh.broadcast, _A, *(t._shape for t in tensors))
    if spec.compute_in_common:
        common = _rule(ops.dtype_rules.common, spec.spelling, kinds)
        compute = [common] * len(operands)
    elif spec.name == "where":
        compute = [bool_] + [dtype] * (len(operands) - 1)
    else:
        compute = [dtype] * len(operands)
    args = [(x._values, x._shape) if isinstance(x, Tensor) else x for x in operands]
    values = ev.elementwise(spec.element, args, out_shape, compute, dtype)
    device = devices.pop() if devices else ("gpu" if _in_kernel() else "cpu")
    return Tensor(values, out_shape, dtype, device)


def _matmul(left: Any, right: Any) -> Tensor:
    _element_only(*(x for x in (left, right) if isinstance(x, Tensor)))
    if not isinstance(left, Tensor) or not isinstance(right, Tensor):
        raise MimirError("GPU036", "`@` needs two tensors")
    if left._device != right._device:
        raise MimirError("GPU061", "`@` mixes tensors on cpu and gpu")
    dtype = _rule(ops.BY_OPERATOR["@"].dtype_rule, "@", [left._dtype, right._dtype])
    out_shape = _rule(sh.matmul, _A, left._shape, right._shape)
    lv, rv = _matmul_operand(left), _matmul_operand(right)
    values = ev.matmul(lv, left._shape, rv, right._shape, out_shape, dtype)
    return Tensor(values, out_shape, dtype, left._device)


def _install_operators() -> None:
    for spec in ops.TABLE:
        if spec.kind != "elementwise":
            continue
        if spec.dunder and spec.unary_operator:
            setattr(Tensor, spec.dunder, _make_unary(spec))
        elif spec.dunder:
            setattr(Tensor, spec.dunder, _make_binary(spec, reflected=False))
            if spec.rdunder:
                setattr(Tensor, spec.rdunder, _make_binary(spec, reflected=True))
        elif spec.method and spec.arity == 1:
            setattr(Tensor, spec.method, _make_unary(spec))
    Tensor.__matmul__ = lambda self, other: _matmul(self, other)  # type: ignore[method-assign]
    Tensor.__rmatmul__ = lambda self, other: _matmul(other, self)  # type: ignore[method-assign]
    Tensor.__hash__ = object.__hash__  # type: ignore[method-assign]


def _make_binary(spec: ops.OpSpec, reflected: bool) -> Callable[[Tensor, Any], Tensor]:
    def method(self: Tensor, other: Any) -> Tensor:
        return _elementwise(spec, [other, self] if reflected else [self, other])

    method.__name__ = spec.rdunder if reflected else spec.dunder  # type: ignore[assignment]
    method.__doc__ = f"Element-wise `{spec.spelling}` with broadcasting."
    return method


def _make_unary(spec: ops.OpSpec) -> Callable[[Tensor], Tensor]:
    def method(self: Tensor) -> Tensor:
        return _elementwise(spec, [self])

    method.__name__ = spec.dunder or spec.method or spec.name
    method.__doc__ = f"Element-wise `{spec.spelling}`."
    return method


# Python operators the kernel language does not define: the checker reports GPU030 for
# them, so the shim must too (not Python's TypeError).
_UNKNOWN_OPERATORS = {
    "__xor__": "^", "__rxor__": "^", "__lshift__": "<<", "__rlshift__": "<<",
    "__rshift__": ">>", "__rrshift__": ">>", "__pos__": "unary +",
}  # fmt: skip


def _refuse_operators() -> None:
    for dunder, symbol in _UNKNOWN_OPERATORS.items():

        def method(self: Tensor, *_: Any, _symbol: str = symbol) -> Tensor:
            raise MimirError("GPU030", f"unknown operator `{_symbol}` in a kernel")

        method.__name__ = dunder
        setattr(Tensor, dunder, method)


_install_operators()
_refuse_operators()


# ---------------------------------------------------------------- functions


def where(cond: Any, a: Any, b: Any) -> Tensor:
    """Element-wise `a if cond else b`, broadcasting all three."""
    return _elementwise(ops.BY_FUNCTION["where"], [cond, a, b])


def maximum(a: Any, b: Any) -> Tensor:
    """Element-wise maximum (nan-propagating, as NumPy)."""
    return _elementwise(ops.BY_FUNCTION["maximum"], [a, b])


def minimum(a: Any, b: Any) -> Tensor:
    """Element-wise minimum (nan-propagating, as NumPy)."""
    return _elementwise(ops.BY_FUNCTION["minimum"], [a, b])


def einsum(spec: Any, *operands: Any) -> Tensor:
    """Einstein summation with a literal spec (`'ij,jk->ik'`, `'bhqd,bhkd->bhqk'`), one or
    two operands; each letter one size in every operand (see `mimir.ops.einsum`)."""
    if not isinstance(spec, str):
        raise MimirError("GPU022", "`einsum` takes a literal spec string first")
    parsed = _rule(einsum_rules.parse, spec)
    for x in operands:
        if not isinstance(x, Tensor):
            raise MimirError("GPU036", "`einsum()` needs tensor operands")
    _element_only(*operands)
    if len({x._device for x in operands}) > 1:
        raise MimirError("GPU061", "`einsum()` mixes tensors on cpu and gpu")
    out_shape = _rule(einsum_rules.shape, _A, parsed, [x._shape for x in operands])
    # The dtypes of the ops the checker lowers the spec to: a sum over an operand's own
    # letters (`summation`), then `@` or `*` of the two (`arithmetic`).
    kinds = []
    for k, (term, x) in enumerate(zip(parsed.inputs, operands, strict=True)):
        others = "".join(t for j, t in enumerate(parsed.inputs) if j != k)
        own = set(term) - set(parsed.output) - set(others)
        kinds.append(_rule(ops.dtype_rules.summation, "einsum()", [x._dtype]) if own else x._dtype)
    dtype = _rule(ops.dtype_rules.arithmetic, "einsum()", kinds) if len(kinds) == 2 else kinds[0]
    lowered_to_matmul = len(operands) == 2 and einsum_rules.letter_roles(parsed).matmul
    args = [(_matmul_operand(x) if lowered_to_matmul else x._values, x._shape) for x in operands]
    values = einsum_rules.evaluate(parsed, args, out_shape, dtype)
    return Tensor(values, out_shape, dtype, operands[0]._device)


def _shape_arg(shape: Any) -> tuple[int, ...]:
    items = shape if isinstance(shape, (tuple, list)) else (shape,)
    out = tuple(_static_int(_resolve(s), "a size in a shape") for s in items)
    _rule(sh.creation, _A, out)
    return out


def _default_device(device: str | None) -> str:
    if device is None:
        return "gpu" if _in_kernel() else "cpu"
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}; expected one of {DEVICES}")
    return device


def full(shape: Any, fill_value: Any, dtype: DType = float32, device: str | None = None) -> Tensor:
    """A tensor of `shape` filled with `fill_value`."""
    dims = _shape_arg(shape)
    fill_value = _resolve(fill_value)  # `full((), D)`: a dim is the number it is bound to
    if isinstance(fill_value, SizeInt):
        fill_value = int(fill_value)
    if not isinstance(fill_value, (int, float)):
        raise MimirError(
            "GPU036", f"`full` needs a scalar fill value, got {type(fill_value).__name__}"
        )
    if not isinstance(dtype, DType):
        raise MimirError("GPU036", f"`dtype` must be a dtype such as `float32`, got {dtype!r}")
    return Tensor(ev.create(dims, fill_value, dtype), dims, dtype, _default_device(device))


def zeros(shape: Any, dtype: DType = float32, device: str | None = None) -> Tensor:
    return full(shape, 0, dtype, device)


def ones(shape: Any, dtype: DType = float32, device: str | None = None) -> Tensor:
    return full(shape, 1, dtype, device)


def arange(n: Any, dtype: DType = int32, device: str | None = None) -> Tensor:
    """The numbers 0, 1, ..., n - 1 (int32 unless `dtype` says otherwise)."""
    if _GRID.get() is not None:
        raise MimirError("GPU031", "`arange` is a tensor-level op; compute on single elements")
    size = _static_int(_resolve(n), "the size of `arange()`")
    size = _rule(sh.arange, _A, size)[0]
    if not isinstance(dtype, DType):
        raise MimirError("GPU036", f"`dtype` must be a dtype such as `int32`, got {dtype!r}")
    dtype = _rule(dr.iota, "arange()", dtype)
    return Tensor(ev.arange(size, dtype), (size,), dtype, _default_device(device))


def _triangle(name: str, x: Any, k: Any) -> Tensor:
    if not isinstance(x, Tensor):
        raise MimirError("GPU036", f"`{name}()` needs a tensor operand")
    _element_only(x)
    k = _static_int(k, f"the diagonal `k` of `{name}()`")
    shape = _rule(sh.triangle, _A, x._shape, name)
    return x._like(ev.triangle(x._values, shape, k, name == "triu", x._dtype), shape)


def tril(x: Tensor, k: int = 0) -> Tensor:
    """`x` with the elements above the k-th diagonal (j - i > k) of its last two axes zeroed."""
    return _triangle("tril", x, k)


def triu(x: Tensor, k: int = 0) -> Tensor:
    """`x` with the elements below the k-th diagonal (j - i < k) of its last two axes zeroed."""
    return _triangle("triu", x, k)


def _join(name: str, tensors: Any, axis: Any) -> Tensor:
    if not isinstance(tensors, (tuple, list)) or not all(isinstance(t, Tensor) for t in tensors):
        raise MimirError("GPU036", f"`{name}()` takes a tuple of tensors")
    _element_only(*tensors)
    axis = _static_int(axis, f"the axis of `{name}()`")
    stack = name == "stack"
    shape = _rule(sh.join, _A, [t._shape for t in tensors], axis, stack)
    dtype = _rule(ops.BY_FUNCTION[name].dtype_rule, f"{name}()", [t._dtype for t in tensors])
    if len({t._device for t in tensors}) > 1:
        raise MimirError("GPU061", f"`{name}()` mixes tensors on cpu and gpu")
    a = axis % (len(tensors[0]._shape) + 1 if stack else len(tensors[0]._shape))
    parts = [(nm.cast(t._values, dtype), t._shape) for t in tensors]
    return Tensor(ev.join(parts, a, stack), shape, dtype, tensors[0]._device)


def concatenate(tensors: Any, axis: int = 0) -> Tensor:
    """The tensors joined along an existing axis (equal sizes on every other axis)."""
    return _join("concatenate", tensors, axis)


def stack(tensors: Any, axis: int = 0) -> Tensor:
    """The tensors (all of one shape) joined along a new axis."""
    return _join("stack", tensors, axis)


def _host_function(name: str) -> None:
    # The checker refuses these inside `@gpu` (GPU030); the shim must agree.
    if _in_kernel():
        raise MimirError("GPU030", f"`{name}` cannot be called inside `@gpu`")


def tensor(data: Any, dtype: DType | None = None, device: str = "cpu") -> Tensor:
    """A tensor from (nested) Python lists of numbers, or from an array; host code only.

    An array is a NumPy array, a CPU torch tensor or any buffer-protocol object
    (read through its buffer, never through `.tolist()`); without `dtype` its
    dtype becomes the nearest Mimir dtype (float64 -> float32, int64 -> int32).
    Lists default to float32.
    """
    _host_function("tensor")
    array = _from_array(data)
    if array is not None:
        values, dims, inferred = array
        dtype = dtype or inferred
        return Tensor(nm.cast(values, dtype), dims, dtype, _default_device(device))
    dtype = dtype or float32
    shape: list[int] = []
    probe = data
    while isinstance(probe, (list, tuple)):
        shape.append(len(probe))
        probe = probe[0] if probe else None
    flat = list(_flatten(data, shape, 0))
    return Tensor(nm.cast(flat, dtype), tuple(shape), dtype, _default_device(device))


def rand(
    shape: Any,
    dtype: DType = float32,
    seed: int = 0,
    low: float = -1.0,
    high: float = 1.0,
    device: str = "cpu",
) -> Tensor:
    """Seeded uniform random values in [low, high) (integers: [low, high]); host code only."""
    _host_function("rand")
    dims = _shape_arg(shape)
    rng = _random.Random(seed)
    n = ev.numel(dims)
    if dtype.is_float:
        flat: list = [rng.uniform(low, high) for _ in range(n)]
    elif dtype.is_bool:
        flat = [rng.random() < 0.5 for _ in range(n)]
    else:
        flat = [rng.randint(int(low), int(high)) for _ in range(n)]
    return Tensor(nm.cast(flat, dtype), dims, dtype, _default_device(device))


# struct code of an array's elements -> the Mimir dtype an array of them becomes
_ARRAY_DTYPES = {"f": float32, "d": float32, "e": float16, "?": bool_}
_ARRAY_DTYPES.update({c: int32 for c in "bhiq"})
_ARRAY_DTYPES.update({c: uint32 for c in "BHIQ"})


def _from_array(data: Any) -> tuple[list, tuple[int, ...], DType] | None:
    """(flat values, shape, nearest dtype) of an array argument; None when `data` is not one.

    Reads NumPy arrays, CPU torch tensors and buffer objects through their memory
    (`mimir.runtime.arrays`, stdlib-only); NumPy itself is never imported here.
    """
    if isinstance(data, (list, tuple, int, float, bool, str, Tensor)) or data is None:
        return None
    from mimir.runtime.arrays import ArrayError, read_array

    try:
        arg = read_array(data)
    except ArrayError:
        return None
    if arg.data is None:
        raise ValueError("a CUDA tensor cannot be read by the shim; move it with `.cpu()` first")
    size = struct.calcsize("<" + arg.fmt)
    count = len(arg.data) // size
    values = list(struct.unpack(f"<{count}{arg.fmt}", arg.data))
    dtype = _ARRAY_DTYPES.get("?" if arg.dtype == "bool_" else arg.fmt)
    if dtype is None:
        raise ValueError(f"an array of {arg.dtype_name} has no Mimir dtype")
    if arg.dtype == "bool_":
        values = [v != 0 for v in values]
    return values, arg.shape, dtype


def _flatten(data: Any, shape: Sequence[int], depth: int) -> Iterable[Any]:
    if depth == len(shape):
        yield data
        return
    if not isinstance(data, (list, tuple)) or len(data) != shape[depth]:
        raise ValueError("ragged nested data: every row must have the same length")
    for item in data:
        yield from _flatten(item, shape, depth + 1)


def _nest(values: list, shape: Sequence[int]) -> Any:
    if not shape:
        return values[0]
    if len(shape) == 1:
        return list(values)
    step = len(values) // shape[0] if shape[0] else 0
    return [_nest(values[i * step : (i + 1) * step], shape[1:]) for i in range(shape[0])]


# ---------------------------------------------------------------- @gpu


class Kernel:
    """A `@gpu` function: checks its arguments, runs its body, checks its result."""

    def __init__(
        self, fn: Callable[..., Any], grid: tuple | None = None, precision: str = "float32"
    ) -> None:
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.grid = grid
        self.precision = precision
        self.signature = inspect.signature(fn)
        self._validated = False

    def __repr__(self) -> str:
        return f"<mimir kernel {self.fn.__qualname__}>"

    def annotations(self) -> dict[str, Any]:
        """Parameter and return annotations, evaluated (`return` for the result).

        Postponed annotations (PEP 563) are evaluated here, against the module's globals
        as they are now: one Python cannot evaluate raises the checker's code.
        """
        # Outside any running kernel's bindings, so that `N - 1` is a dim expression.
        token = _BINDINGS.set(None)
        try:
            return inspect.get_annotations(self.fn, eval_str=True)
        except NameError as err:
            raise MimirError("GPU032", f"undefined name `{err.name}` in an annotation") from None
        except TypeError as err:  # `Tensor[N, 4]`, or a dtype name bound to a `Dim`
            raise MimirError("GPU033", f"cannot evaluate the annotations: {err}") from None
        finally:
            _BINDINGS.reset(token)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.precision not in PRECISIONS:  # the checker's GPU036 on the decorator
            raise MimirError(
                "GPU036", f"`precision=` is one of {list(PRECISIONS)}, got {self.precision!r}"
            )
        self._validate_language()
        annotations = self.annotations()
        _check_annotations(self.signature, annotations, index_level=self.grid is not None)
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        if self.grid is not None:
            for name, value in bound.arguments.items():
                if isinstance(annotations.get(name), TensorType) and not isinstance(value, Tensor):
                    # The body writes into its tensors; a converted array would not see it.
                    raise MimirError(
                        "GPU040",
                        f"argument `{name}` of an index-level kernel must be a tensor, got "
                        f"{type(value).__name__} (its writes would be lost); wrap it with "
                        '`tensor(a).to("gpu")`',
                    )
        bindings = _bind_arguments(bound.arguments, annotations)
        if self.grid is None:
            for name, value in bound.arguments.items():
                if annotations.get(name) is int and type(value) is int:
                    bound.arguments[name] = _RuntimeInt(value)
        token = _BINDINGS.set(bindings)
        precision_token = _PRECISION.set(self.precision)
        inout = [
            n
            for n, a in annotations.items()
            if n != "return" and isinstance(a, TensorType) and a.inout
        ]
        final: dict[str, Any] = {}
        try:
            if self.grid is not None:
                result = self._run_grid(bound, bindings)
            elif inout:
                result = _run_capturing(self.fn, bound, inout, final)
            else:
                result = self.fn(*bound.args, **bound.kwargs)
        except UnboundDimError as err:
            raise MimirError(
                "GPU035", f"dim `{err.name}` is not fixed by any parameter of the kernel"
            ) from None
        except NameError as err:
            # UnboundLocalError (a local read before assignment) carries no `.name`.
            name = err.name or (str(err).split("'")[1] if "'" in str(err) else "?")
            raise MimirError("GPU032", f"undefined name `{name}`") from None
        except TypeError as err:
            # Python's own argument binding (`x.sum(1, False, 3)`, `x.clip(0.0)`): the op
            # cannot take these arguments, which the checker reports as GPU036.
            raise MimirError("GPU036", f"invalid argument: {err}") from err
        except IndexError as err:
            # `x.shape[5]` on a rank-1 tensor: the checker's GPU018 (tensor indexing raises
            # MimirError itself, so only the shape tuple gets here).
            raise MimirError("GPU018", f"index out of range: {err}") from err
        except (SizeDivisionError, ZeroDivisionError) as err:
            # Size `//` or `%` by a divisor that is not positive: the checker's GPU036.
            raise MimirError("GPU036", f"division of sizes: {err}") from None
        except ValueError as err:
            # `a, b, c = x.shape` on a rank-2 tensor: the checker's GPU036 (cannot unpack).
            raise MimirError("GPU036", f"invalid argument: {err}") from None
        finally:
            _PRECISION.reset(precision_token)
            _BINDINGS.reset(token)
        if "return" in annotations:
            _check_result(result, annotations["return"], bindings)
            if result_names(annotations["return"]) is not None and type(result) is tuple:
                result = annotations["return"](*result)  # `return a, b` as the named tuple
        # Tensor-level `InOut` parameters: the value each name holds at the return goes
        # back into the caller's tensor (after every check, so a failed call changes nothing).
        updates = []
        for name in inout if self.grid is None else ():
            value, ann = final.get(name), annotations[name]
            target = bound.arguments[name]
            if value is None or value is target:
                continue
            _check_result(value, ann, bindings, f"the value written back into `{name}`")
            updates.append((target, list(value._values)))  # a copy: `p, q = q, p` swaps
        for target, values in updates:
            target._values[:] = values
        return result

    def _run_grid(self, bound: inspect.BoundArguments, bindings: dict[str, int]) -> None:
        """Run the body once per program id, in row-major order of the grid."""
        if not isinstance(self.grid, tuple) or not 1 <= len(self.grid) <= 3:
            raise MimirError("GPU036", "`grid=` takes a tuple of one to three sizes")
        sizes = [_resolve(g) for g in self.grid]
        run = _GridRun()
        token = _GRID.set(run)
        try:
            for pids in itertools.product(*(range(n) for n in sizes)):
                run.pids = pids
                try:
                    returned = self.fn(*bound.args, **bound.kwargs)
                except AttributeError as err:
                    # `program_id(0).exp()`: ids, their arithmetic and comparisons are plain
                    # ints and bools here, as the checker's GPU030 says
                    raise MimirError(
                        "GPU030",
                        f"{err}: a program id, arithmetic on it and comparisons are plain "
                        "Python values in a kernel, with no methods",
                    ) from None
                if returned is not None:
                    raise MimirError(
                        "GPU015", "an index-level kernel writes its outputs and returns nothing"
                    )
        finally:
            _GRID.reset(token)
        annotations = self.annotations()
        # a program may read back what it wrote itself (zero, then accumulate)
        read = run.unwritten_reads
        written = {slot[0] for slot in run.writes}
        for name, value in bound.arguments.items():
            ann = annotations.get(name)
            if not isinstance(ann, TensorType) or ann.inout or not isinstance(value, Tensor):
                continue
            if id(value._values) in read and id(value._values) in written:
                raise MimirError(
                    "GPU029",
                    f"`{name}` is read where this program has not written it yet, and "
                    "written, but not annotated `InOut[...]`",
                )
        return None

    def _validate_language(self) -> None:
        """Refuse what the checker refuses: constructs outside the kernel language."""
        if self._validated:
            return
        try:
            source = inspect.getsource(self.fn)
        except (OSError, TypeError):
            self._validated = True  # no source (a REPL): nothing to read
            return
        from mimir.parse.subset import first_violation

        # Names the kernel's module binds itself shadow the builtins (`range = Dim(...)`).
        shadowed = frozenset(getattr(self.fn, "__globals__", {}))
        violation = first_violation(source, self.fn.__name__, self.grid is not None, shadowed)
        if violation is not None:
            raise MimirError(violation.code, violation.message)
        if self.grid is None:
            self._refuse_plain_writes(source)
        self._validated = True

    def _refuse_plain_writes(self, source: str) -> None:
        """The checker's GPU029 at tensor level: `p -= g` or `p[...] = v` on a parameter
        not annotated `InOut` (NumPy would update the caller's tensor; Python rebinds)."""
        import ast
        import textwrap

        annotations = self.annotations()
        plain = {
            n
            for n, a in annotations.items()
            if n != "return" and isinstance(a, TensorType) and not a.inout
        }
        tree = ast.parse(textwrap.dedent(source))
        fn = next(
            (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
             and n.name == self.fn.__name__),
            None,
        )  # fmt: skip
        for stmt in fn.body if fn is not None else []:
            if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
                if stmt.target.id in plain:
                    raise MimirError(
                        "GPU029",
                        f"`{stmt.target.id}` is a parameter not annotated `InOut[...]`: "
                        "an augmented assignment cannot update the caller's tensor",
                    )
            targets = stmt.targets if isinstance(stmt, ast.Assign) else []
            for t in targets:
                if (
                    isinstance(t, ast.Subscript)
                    and isinstance(t.value, ast.Name)
                    and t.value.id in plain
                ):
                    raise MimirError(
                        "GPU029",
                        f"`{t.value.id}` is a parameter not annotated `InOut[...]`: "
                        "a kernel cannot write into it",
                    )
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                        plain.discard(n.id)  # rebound: a local from here on


def _run_capturing(
    fn: Callable[..., Any], bound: inspect.BoundArguments, names: list[str], final: dict
) -> Any:
    """Call `fn`, recording the values `names` hold in its frame when it returns."""
    code = fn.__code__
    previous = sys.getprofile()

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "return" and frame.f_code is code:
            local = frame.f_locals
            final.update({n: local[n] for n in names if n in local})
        if previous is not None:
            previous(frame, event, arg)

    sys.setprofile(profile)
    try:
        return fn(*bound.args, **bound.kwargs)
    finally:
        sys.setprofile(previous)


def gpu(
    fn: Callable[..., Any] | None = None, *, grid: tuple | None = None, precision: str = "float32"
) -> Any:
    """Mark a kernel: `@gpu`, or `@gpu(grid=(N,))` for an index-level kernel.

    `precision="tf32"` lets every `@` (and einsum lowered to `@`) of the kernel read its
    float32 operands as TF32 (tensor cores on PTX, sm_80+); the shim then rounds them so
    (`numerics.tf32`) before its exact products. The default, "float32", is exact float32."""
    if fn is None:
        return lambda f: Kernel(f, grid, precision)
    return Kernel(fn, grid, precision)


def _check_annotations(
    signature: inspect.Signature, annotations: dict[str, Any], index_level: bool = False
) -> None:
    """Refuse what the checker refuses as GPU033: parameters and results it cannot type."""
    plain = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    for name, param in signature.parameters.items():
        if param.kind not in plain:
            raise MimirError("GPU033", "kernels take plain named parameters only")
        ann = annotations.get(name)
        if not (isinstance(ann, TensorType) or ann in (int, float)):
            raise MimirError(
                "GPU033",
                f"parameter `{name}` has no usable annotation; annotate it as "
                "`Tensor[dtype, sizes...]`, `int` or `float`",
            )
    if index_level:
        if annotations.get("return") is not None:
            raise MimirError(
                "GPU033",
                "an index-level kernel writes its outputs and returns nothing; "
                "remove the return annotation",
            )
        return
    if annotations.get("return", None) is None:
        return  # no annotation, or `-> None`: a kernel that only updates `InOut` tensors
    ret = annotations["return"]
    if isinstance(ret, TensorType) and not ret.inout:
        return
    items = _tuple_items(ret)
    if (
        items is not None
        and items
        and all(isinstance(t, TensorType) and not t.inout for t in items)
    ):
        clash = [n for n in result_names(ret) or () if n in signature.parameters]
        if clash:
            raise MimirError(
                "GPU033", f"result `{clash[0]}` has the name of a parameter; rename the field"
            )
        return
    raise MimirError(
        "GPU033",
        f"the result annotation `{getattr(ret, '__name__', ret)!r}` is not a kernel type; use "
        "`Tensor[dtype, sizes...]` "
        "or `tuple[Tensor[...], ...]`",
    )


def _tuple_items(ann: Any) -> tuple | None:
    """The items of `tuple[A, B]`, or the field types of a `NamedTuple` class, else None."""
    import typing

    if typing.get_origin(ann) is tuple:
        return typing.get_args(ann)
    if result_names(ann) is not None:
        hints = typing.get_type_hints(ann)
        return tuple(hints[f] for f in ann._fields)
    return None


def result_names(ann: Any) -> tuple[str, ...] | None:
    """The field names of a `NamedTuple` result annotation (the manifest's output names)."""
    if isinstance(ann, type) and issubclass(ann, tuple) and hasattr(ann, "_fields"):
        return tuple(ann._fields)
    return None


def _bind_arguments(arguments: dict[str, Any], annotations: dict[str, Any]) -> dict[str, int]:
    env: dict[str, int] = {}
    dims: dict[str, Dim] = {}
    deferred: list[tuple[str, int, Size, int]] = []
    for name, value in arguments.items():
        ann = annotations.get(name)
        if not isinstance(ann, TensorType):
            continue
        if not isinstance(value, Tensor):
            value = _array_argument(name, value, ann.dtype)
            arguments[name] = value
        if value._device != "gpu":
            raise MimirError(
                "GPU060",
                f'argument `{name}` is on cpu; move it with `.to("gpu")` before the call',
            )
        if value._dtype != ann.dtype:
            raise MimirError(
                "GPU041", f"argument `{name}` has dtype {value._dtype}, expected {ann.dtype}"
            )
        if len(value._shape) != len(ann.dims):
            raise MimirError(
                "GPU040",
                f"argument `{name}` has shape {list(value._shape)}, expected {_show(ann.dims)}",
            )
        for axis, (actual, expected) in enumerate(zip(value._shape, ann.dims, strict=True)):
            if isinstance(expected, Dim) and expected.name not in env:
                if not expected.admits(actual):
                    raise MimirError(
                        "GPU042",
                        f"argument `{name}` binds {expected.name}={actual}, outside its "
                        f"constraints ({expected.describe_constraints()})",
                    )
                env[expected.name] = actual
                dims[expected.name] = expected
            else:
                deferred.append((name, axis, expected, actual))
    for name, axis, expected, actual in deferred:
        try:
            want = evaluate(expected, env)
        except UnboundDimError as err:
            raise MimirError(
                "GPU035", f"dim `{err.name}` is not fixed by any parameter of the kernel"
            ) from None
        except ZeroDivisionError:
            raise MimirError("GPU033", f"division by zero in the size `{expected}`") from None
        if want != actual:
            raise MimirError(
                "GPU040",
                f"argument `{name}` has size {actual} on axis {axis}, expected {expected}={want}",
            )
    for name, value in arguments.items():
        ann = annotations.get(name)
        if isinstance(ann, TensorType) and ann.value_range is not None:
            _check_range(name, value, ann.value_range, env)
    return env


def _array_argument(name: str, value: Any, dtype: DType) -> Tensor:
    """An array passed for a tensor parameter, as a gpu tensor (the call uploads it).

    Its dtype must be the parameter's exactly (a float64 array for a float32
    parameter is GPU041): converting silently would hide a precision change.
    """
    try:
        array = _from_array(value)
    except ValueError as err:
        raise MimirError("GPU040", f"argument `{name}`: {err}") from None
    if array is None:
        raise MimirError(
            "GPU040", f"argument `{name}` must be a tensor or an array, got {type(value).__name__}"
        )
    from mimir.runtime.arrays import read_array

    exact = read_array(value).dtype
    if exact != dtype.name:
        raise MimirError(
            "GPU041",
            f"argument `{name}` has dtype {getattr(value, 'dtype', exact)}, expected {dtype}",
        )
    values, shape, _ = array
    return Tensor(nm.cast(values, dtype), shape, dtype, "gpu")


def _check_range(name: str, value: Tensor, bounds: Range, env: dict[str, int]) -> None:
    """Every value of a `Range`-annotated argument lies in [lo, hi) (the checker assumes it)."""
    try:
        lo, hi = evaluate(bounds.lo, env), evaluate(bounds.hi, env)
    except UnboundDimError as err:
        raise MimirError(
            "GPU035", f"dim `{err.name}` is not fixed by any parameter of the kernel"
        ) from None
    for flat, v in enumerate(value._values):
        if not lo <= v < hi:
            from mimir.runtime.arrays import range_violation  # stdlib-only, as the shim

            where = (bounds.lo, bounds.hi)
            message = range_violation(name, v, flat, value._shape, where, (lo, hi), env)
            raise MimirError("GPU043", message)


def _show(dims: Sequence[Any]) -> str:
    return "[" + ", ".join(str(d) for d in dims) + "]"


def _check_result(result: Any, ann: Any, env: dict[str, int], what: str = "") -> None:
    items = _tuple_items(ann)
    if items is not None:
        if not isinstance(result, tuple) or len(result) != len(items):
            got = f"{len(result)} values" if isinstance(result, tuple) else "one value"
            raise MimirError(
                "GPU015", f"the kernel returns {got}, the annotation says {len(items)} tensors"
            )
        for k, (r, a) in enumerate(zip(result, items, strict=True)):
            _check_result(r, a, env, f"result {k}")
        return
    if not isinstance(ann, TensorType):
        return
    if not isinstance(result, Tensor):
        raise MimirError(
            "GPU015", f"{what or 'the kernel'} returns {type(result).__name__}, not a tensor"
        )
    try:
        expected = [evaluate(d, env) for d in ann.dims]
    except UnboundDimError as err:
        raise MimirError(
            "GPU035", f"dim `{err.name}` is not fixed by any parameter of the kernel"
        ) from None
    if list(result._shape) != expected:
        raise MimirError(
            "GPU015",
            f"return shape mismatch: the kernel returns {list(result._shape)}, "
            f"the annotation says {_show(ann.dims)}",
        )
    if result._dtype != ann.dtype:
        raise MimirError(
            "GPU016",
            f"return dtype mismatch: the kernel returns {result._dtype}, "
            f"the annotation says {ann.dtype}",
        )


# `range(N)` and `i < N` inside a running kernel read the dims bound by its call.
set_binding_hook(_BINDINGS.get)
