"""`Tensor`: a dense row-major tensor, with its operators built from the op table."""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any

from mimir import ops
from mimir.array.state import (
    DEVICES,
    GRID,
    PRECISION,
    MimirError,
    RuntimeInt,
    in_kernel,
    resolve,
    rule,
    static_int,
)
from mimir.array.types import Range, TensorType
from mimir.dims import DimExpr, SizeInt
from mimir.dtypes import DType, bool_, float32, promote_weak, scalar_kind
from mimir.ops import evaluate as ev
from mimir.ops import numerics as nm
from mimir.ops import shapes as sh

_A = sh.INT_ALGEBRA

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
        if in_kernel():
            raise MimirError("GPU030", f"unknown attribute `.{what}` on a tensor inside `@gpu`")

    @property
    def shape(self) -> tuple[int, ...]:
        if in_kernel():
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
        return nest(self._values, self._shape)

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
            f"Tensor({nest(self._values, self._shape)!r}, dtype={self._dtype.name}, "
            f"device={self._device!r})"
        )

    def __bool__(self) -> bool:
        if GRID.get() is not None and self._shape == ():
            return bool(self._values[0])  # an element condition in an index-level kernel
        raise MimirError(
            "GPU031", "the truth value of a tensor is ambiguous; use `where`, `&` or `|`"
        )

    def _to_float(self) -> float:
        # `math.exp(x[i])` of an element in an index-level kernel: a Python float, as
        # `math.sqrt(D)` of a size is (the checker's weak float)
        if GRID.get() is not None and self._shape == () and self._dtype.is_float:
            return float(self._values[0])
        return self._to_number()

    def _to_number(self, *_: Any) -> Any:
        # `math.exp(x)`, `int(x)`: Python reads a number out of the tensor. Inside `@gpu`
        # that is an op the kernel language does not define (the checker's GPU030).
        if in_kernel():
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
        element_only(self)
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        perm_arg = tuple(static_int(a, "a transpose axis") for a in axes) if axes else None
        out_shape = rule(sh.transpose, _A, self._shape, perm_arg)
        perm = sh.permutation(len(self._shape), perm_arg)
        return self._like(ev.transpose(self._values, self._shape, perm), out_shape)

    def reshape(self, *shape: Any) -> Tensor:
        element_only(self)
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        new = tuple(static_int(resolve(s), "a size of `.reshape()`") for s in shape)
        out_shape = rule(sh.reshape, _A, self._shape, new)
        return self._like(list(self._values), out_shape)

    def __getitem__(self, key: Any) -> Tensor:
        run = GRID.get()
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
            return gather(self, key, 0, along=False)
        items = key if isinstance(key, tuple) else (key,)
        parsed = [_index_item(k) for k in items]
        out_shape, resolved = rule(sh.index, _A, self._shape, parsed)
        return self._like(ev.index(self._values, self._shape, resolved), out_shape)

    def __setitem__(self, key: Any, value: Any) -> None:
        run = GRID.get()
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
        self._values[flat] = store_value(value, self._dtype)

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
        element_only(self)
        if isinstance(axis, list):
            axis = tuple(axis)
        for a in () if axis is None else axis if isinstance(axis, tuple) else (axis,):
            static_int(a, f"the axis of `.{name}()`")
        if not isinstance(keepdims, bool):
            raise MimirError("GPU036", "`keepdims` must be True or False")
        out_shape = rule(sh.reduction, _A, self._shape, axis, keepdims, name)
        axes = sh.reduce_axes(_A, len(self._shape), axis, name)
        dtype = rule(ops.BY_METHOD[name].dtype_rule, f".{name}()", [self._dtype])
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
        element_only(self)
        if axis is not None:
            static_int(axis, f"the axis of `.{name}()`")
        out_shape = rule(sh.scan, _A, self._shape, axis, name)
        dtype = rule(ops.BY_METHOD[name].dtype_rule, f".{name}()", [self._dtype])
        norm = None if axis is None else axis % len(self._shape)
        values = ev.scan(name, self._values, self._shape, norm, dtype)
        return self._like(values, out_shape, dtype)

    def cumsum(self, axis: Any = None) -> Tensor:
        """Inclusive prefix sums along `axis` (NumPy's `cumsum`; `axis=None` flattens)."""
        return self._scan("cumsum", axis)

    def cumprod(self, axis: Any = None) -> Tensor:
        """Inclusive prefix products along `axis` (NumPy's `cumprod`; `axis=None` flattens)."""
        return self._scan("cumprod", axis)

    def _sort(self, name: str, axis: Any, descending: Any) -> Tensor:
        element_only(self)
        static_int(axis, f"the axis of `.{name}()`")
        if not isinstance(descending, bool):
            raise MimirError("GPU036", "`descending` must be True or False")
        rule(sh.along_axis, _A, self._shape, axis, name)
        dtype = rule(ops.BY_METHOD[name].dtype_rule, f".{name}()", [self._dtype])
        values = ev.sort(
            name, self._values, self._shape, axis % len(self._shape), descending, self._dtype
        )
        return self._like(values, self._shape, dtype)

    def sort(self, axis: int = -1, descending: bool = False) -> Tensor:
        """The values sorted along `axis`, stably: a NaN last (first when `descending`),
        -0.0 and 0.0 equal (NumPy's `sort`, PyTorch's `sort(stable=True)`)."""
        return self._sort("sort", axis, descending)

    def argsort(self, axis: int = -1, descending: bool = False) -> Tensor:
        """The int32 positions that sort `axis` (`sort`'s order, equal keys in their
        order: NumPy's `argsort(kind="stable")`)."""
        return self._sort("argsort", axis, descending)

    def _softmax(self, name: str, axis: int) -> Tensor:
        element_only(self)
        static_int(axis, f"the axis of `.{name}()`")
        rule(sh.along_axis, _A, self._shape, axis, name)
        dtype = rule(ops.BY_METHOD[name].dtype_rule, f".{name}()", [self._dtype])
        values = ev.softmax(
            self._values, self._shape, axis % len(self._shape), name == "log_softmax", dtype
        )
        return self._like(values, self._shape, dtype)

    def softmax(self, axis: int = -1) -> Tensor:
        return self._softmax("softmax", axis)

    def log_softmax(self, axis: int = -1) -> Tensor:
        return self._softmax("log_softmax", axis)

    def _argreduce(self, name: str, axis: Any, keepdims: bool) -> Tensor:
        element_only(self)
        if axis is not None:
            static_int(axis, f"the axis of `.{name}()`")
        if not isinstance(keepdims, bool):
            raise MimirError("GPU036", "`keepdims` must be True or False")
        out_shape = rule(sh.argreduction, _A, self._shape, axis, keepdims, name)
        axes = sh.reduce_axes(_A, len(self._shape), axis, name)
        dtype = rule(ops.BY_METHOD[name].dtype_rule, f".{name}()", [self._dtype])
        return self._like(ev.argreduce(name, self._values, self._shape, axes, self._dtype),
                          out_shape, dtype)  # fmt: skip

    def argmax(self, axis: int | None = None, keepdims: bool = False) -> Tensor:
        """The first index of the largest element (a NaN counts as the largest), int32."""
        return self._argreduce("argmax", axis, keepdims)

    def argmin(self, axis: int | None = None, keepdims: bool = False) -> Tensor:
        """The first index of the smallest element (a NaN counts as the smallest), int32."""
        return self._argreduce("argmin", axis, keepdims)

    def _moments(self, name: str, axis: Any, ddof: int, keepdims: bool) -> Tensor:
        element_only(self)
        if isinstance(axis, list):
            axis = tuple(axis)
        for a in () if axis is None else axis if isinstance(axis, tuple) else (axis,):
            static_int(a, f"the axis of `.{name}()`")
        static_int(ddof, f"`ddof` of `.{name}()`")
        if not isinstance(keepdims, bool):
            raise MimirError("GPU036", "`keepdims` must be True or False")
        out_shape = rule(sh.moments, _A, self._shape, axis, ddof, keepdims, name)
        axes = sh.reduce_axes(_A, len(self._shape), axis, name)
        dtype = rule(ops.BY_METHOD[name].dtype_rule, f".{name}()", [self._dtype])
        values = ev.moments(name, self._values, self._shape, axes, ddof, dtype)
        return self._like(values, out_shape, dtype)

    def var(self, axis: Any = None, ddof: int = 0, keepdims: bool = False) -> Tensor:
        """The variance, sum((x - mean)**2) / (count - ddof), computed in two passes."""
        return self._moments("var", axis, ddof, keepdims)

    def std(self, axis: Any = None, ddof: int = 0, keepdims: bool = False) -> Tensor:
        """The square root of `var`."""
        return self._moments("std", axis, ddof, keepdims)

    def astype(self, dtype: DType) -> Tensor:
        element_only(self)
        if not isinstance(dtype, DType):
            raise MimirError("GPU036", f"`astype` takes a dtype such as `float32`, got {dtype!r}")
        return self._like(nm.cast(self._values, dtype), self._shape, dtype)

    def clip(self, lo: Any, hi: Any) -> Tensor:
        return elementwise(ops.BY_METHOD["clip"], [self, lo, hi])


def matmul_operand(x: Tensor) -> Any:
    """The values `@` multiplies: a float32 tensor's rounded to TF32 under `precision="tf32"`."""
    if PRECISION.get() == "tf32" and x._dtype == float32:
        return [nm.tf32(float(v)) for v in x._values]
    return x._values


# ---------------------------------------------------------------- element-wise dispatch


def _index_item(k: Any) -> tuple:
    if k is None:
        return ("newaxis",)
    if k is Ellipsis:
        return ("ellipsis",)
    if isinstance(k, slice):
        if k.step is not None and resolve(k.step) != 1:
            raise MimirError("GPU031", "slice steps are not supported in the kernel language")
        return ("slice", _index_bound(k.start), _index_bound(k.stop))
    if isinstance(k, (int, DimExpr)) and not isinstance(k, bool):
        _refuse_runtime_bound(k)
        return ("int", resolve(k))
    raise MimirError("GPU036", f"unsupported index {k!r}: use ints, dims, slices, None or ...")


def element_only(*tensors: Tensor) -> None:
    """Index-level kernels compute on single elements; whole-tensor ops are GPU031 there."""
    if GRID.get() is not None and any(t._shape != () for t in tensors):
        raise MimirError(
            "GPU031",
            "a tensor-level op inside an index-level kernel; compute on single elements",
        )


def _index_int(k: Any) -> int:
    """An index in an index-level kernel: an int, a dim, or a 0-d integer tensor."""
    if isinstance(k, Tensor) and k._shape == () and k._dtype.is_integer:
        return int(k._values[0])
    k = resolve(k)
    if isinstance(k, bool) or not isinstance(k, int):
        raise MimirError("GPU036", f"an index must be an int expression, got {k!r}")
    return k


def store_value(value: Any, dtype: DType) -> Any:
    """`value` as an element of `dtype`, refusing implicit conversions (GPU027)."""
    if isinstance(value, Tensor):
        if value._shape != ():
            raise MimirError("GPU036", "an element store needs a scalar value")
        kind: DType | str = value._dtype
        raw = value._values[0]
    else:
        value = resolve(value)
        kind = scalar_kind(value)
        raw = value
    got = kind if isinstance(kind, DType) else promote_weak(dtype, kind)
    if got != dtype:
        shown = kind if isinstance(kind, DType) else f"a Python {kind}"
        raise MimirError(
            "GPU027", f"store dtype mismatch: the tensor holds {dtype}, the value is {shown}"
        )
    return nm.cast([raw], dtype)[0]


def gather(x: Tensor, idx: Tensor, axis: int, along: bool) -> Tensor:
    element_only(x, idx)
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


def _refuse_runtime_bound(b: Any) -> None:
    if isinstance(b, RuntimeInt):
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
    return resolve(b)


def _operand_dtype(x: Any) -> DType | str:
    if isinstance(x, Tensor):
        return x._dtype
    return scalar_kind(x)


def elementwise(spec: ops.OpSpec, operands: list[Any]) -> Tensor:
    element_only(*(x for x in operands if isinstance(x, Tensor)))
    operands = [resolve(x) for x in operands]
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
    dtype = rule(spec.dtype_rule, spec.spelling, kinds)
    out_shape = rule(sh.broadcast, _A, *(t._shape for t in tensors))
    if spec.compute_in_common:
        common = rule(ops.dtype_rules.common, spec.spelling, kinds)
        compute = [common] * len(operands)
    elif spec.name == "where":
        compute = [bool_] + [dtype] * (len(operands) - 1)
    else:
        compute = [dtype] * len(operands)
    if spec.name in ("lshift", "rshift"):
        _check_shift_count(spec, operands[1])
    args = [(x._values, x._shape) if isinstance(x, Tensor) else x for x in operands]
    values = ev.elementwise(spec.element, args, out_shape, compute, dtype)
    device = devices.pop() if devices else ("gpu" if in_kernel() else "cpu")
    return Tensor(values, out_shape, dtype, device)


def _check_shift_count(spec: ops.OpSpec, count: Any) -> None:
    """Every count of `<<`/`>>` in 0..31, as the checker proves (GPU037)."""
    counts = count._values if isinstance(count, Tensor) else [count]
    bad = next((c for c in counts if not 0 <= c < 32), None)
    if bad is not None:
        raise MimirError(
            "GPU037",
            f"the count of `{spec.spelling}` is {bad}; it must be in 0..31",
        )


def _matmul(left: Any, right: Any) -> Tensor:
    element_only(*(x for x in (left, right) if isinstance(x, Tensor)))
    if not isinstance(left, Tensor) or not isinstance(right, Tensor):
        raise MimirError("GPU036", "`@` needs two tensors")
    if left._device != right._device:
        raise MimirError("GPU061", "`@` mixes tensors on cpu and gpu")
    dtype = rule(ops.BY_OPERATOR["@"].dtype_rule, "@", [left._dtype, right._dtype])
    out_shape = rule(sh.matmul, _A, left._shape, right._shape)
    lv, rv = matmul_operand(left), matmul_operand(right)
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
    Tensor.gelu = _gelu  # type: ignore[method-assign]
    Tensor.__matmul__ = lambda self, other: _matmul(self, other)  # type: ignore[method-assign]
    Tensor.__rmatmul__ = lambda self, other: _matmul(other, self)  # type: ignore[method-assign]
    Tensor.__hash__ = object.__hash__  # type: ignore[method-assign]


def _make_binary(spec: ops.OpSpec, reflected: bool) -> Callable[[Tensor, Any], Tensor]:
    def method(self: Tensor, other: Any) -> Tensor:
        return elementwise(spec, [other, self] if reflected else [self, other])

    method.__name__ = spec.rdunder if reflected else spec.dunder  # type: ignore[assignment]
    method.__doc__ = f"Element-wise `{spec.spelling}` with broadcasting."
    return method


def _gelu(self: Tensor, approximate: Any = "tanh") -> Tensor:
    """Element-wise GELU: `approximate="tanh"` (the default) the tanh approximation,
    `"none"` the exact `x Phi(x)` through erf (torch's two spellings)."""
    spec = ops.gelu_variant(approximate)
    if spec is None:
        raise MimirError(
            "GPU036",
            f'`approximate` of `.gelu()` must be the literal "none" or "tanh", got {approximate!r}',
        )
    return elementwise(spec, [self])


def _make_unary(spec: ops.OpSpec) -> Callable[[Tensor], Tensor]:
    def method(self: Tensor) -> Tensor:
        return elementwise(spec, [self])

    method.__name__ = spec.dunder or spec.method or spec.name
    method.__doc__ = f"Element-wise `{spec.spelling}`."
    return method


# Python operators the kernel language does not define: the checker reports GPU030 for
# them, so the shim must too (not Python's TypeError).
_UNKNOWN_OPERATORS = {"__pos__": "unary +"}


def _refuse_operators() -> None:
    for dunder, symbol in _UNKNOWN_OPERATORS.items():

        def method(self: Tensor, *_: Any, _symbol: str = symbol) -> Tensor:
            raise MimirError("GPU030", f"unknown operator `{_symbol}` in a kernel")

        method.__name__ = dunder
        setattr(Tensor, dunder, method)


_install_operators()
_refuse_operators()


def nest(values: list, shape: Sequence[int]) -> Any:
    if not shape:
        return values[0]
    if len(shape) == 1:
        return list(values)
    step = len(values) // shape[0] if shape[0] else 0
    return [nest(values[i * step : (i + 1) * step], shape[1:]) for i in range(shape[0])]
