"""The shim's answer computed with NumPy: the same semantics, vectorised, where NumPy is present.

`mimir.array` is the definition of the kernel language and imports nothing outside the
standard library, so it computes element by element in Python: a 131 x 17 x 23 convolution
or a batched attention takes minutes there. Inside `accelerated()`, the shim runs the same
kernels with its heaviest pieces computed by NumPy:

- the op evaluators of `mimir.ops.evaluate` that tensor-level kernels spend their time in
  (element-wise ops, matmul, reductions, softmax, var/std) take NumPy arrays in float64 (or
  int64) and round once into the result dtype, as the evaluators do; anything they do not
  cover (an op, a dtype, a Python scalar function) goes to the evaluator itself;
- an index-level kernel (`@gpu(grid=...)`) runs its body once for the whole grid, each
  `program_id(axis)` an array of every program's id, reads and writes gathering and
  scattering whole arrays. A body this cannot run as written (an `if` on a per-program
  value, a method on an element, a negative or out-of-bounds index, anything unexpected)
  is run by the shim itself, program by program, from the untouched inputs.

Floating-point results agree with the shim's within the tolerances `mimir verify` uses:
NumPy sums in float64 where the shim sums exactly (`math.fsum`), then both round to the
result dtype; integer results are exact. `tests/test_fast_reference.py` compares the two
on every kernel of the zoo and of `tests/kernels`. The shim's own run-time checks (races,
bounds) are the checker's proofs here: `verify` runs only kernels that checked clean.

`available()` says whether NumPy can be imported; `accelerated()` is a no-op without it.
"""

from __future__ import annotations

import contextlib
import math
import types
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from mimir.dtypes import DType, bfloat16, bool_, float16, float32, int32, uint32
from mimir.ops import evaluate as ev
from mimir.ops import numerics as nm
from mimir.runtime.tolerances import TOLERANCES

__all__ = ["accelerated", "available", "compare"]


def available() -> bool:
    try:
        import numpy  # noqa: F401
    except ImportError:
        return False
    return True


class _UnsupportedError(Exception):
    """The vectorised path does not cover this: compute it as the shim does."""


# ---------------------------------------------------------------- element functions


def _np() -> Any:
    import numpy as np

    return np


def _sigmoid(a: Any) -> Any:
    np = _np()
    e = np.exp(-np.abs(a))  # never exponentiates a large positive number
    return np.where(a >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


_GELU_C = math.sqrt(2.0 / math.pi)


def _gelu(a: Any) -> Any:
    np = _np()
    y = 0.5 * a * (1.0 + np.tanh(_GELU_C * (a + 0.044715 * a * a * a)))
    return np.where(np.isinf(a), np.where(a > 0, a, 0.0), y)


def _relu(a: Any) -> Any:
    np = _np()
    return np.where(a > 0, a, np.where(np.isnan(a), a, 0))


def _float_table() -> dict[Callable, Callable]:
    """Element function of the op table -> its NumPy form on float64 arrays (IEEE results
    where Python raises: the evaluators' own answers)."""
    np = _np()
    return {
        nm.add: np.add,
        nm.sub: np.subtract,
        nm.mul: np.multiply,
        nm.truediv: np.true_divide,
        nm.neg: np.negative,
        nm.absolute: np.abs,
        nm.relu: _relu,
        nm.exp: np.exp,
        nm.log: np.log,
        nm.sqrt: np.sqrt,
        nm.rsqrt: lambda a: 1.0 / np.sqrt(a),
        nm.sigmoid: _sigmoid,
        nm.tanh: np.tanh,
        nm.sin: np.sin,
        nm.cos: np.cos,
        nm.gelu: _gelu,
        nm.cosh: np.cosh,
        nm.sinh: np.sinh,
        nm.expm1: np.expm1,
        nm.log1p: np.log1p,
        nm.atan: np.arctan,
        nm.atan2: np.arctan2,  # erf, erfc and the exact GELU: NumPy has no erf (the shim's)
        nm.maximum: np.maximum,
        nm.minimum: np.minimum,
        nm.clip: lambda a, lo, hi: np.minimum(np.maximum(a, lo), hi),
        nm.lt: np.less,
        nm.le: np.less_equal,
        nm.gt: np.greater,
        nm.ge: np.greater_equal,
        nm.eq: np.equal,
        nm.ne: np.not_equal,
        nm.where: lambda c, a, b: np.where(c, a, b),
    }


def _int_table() -> dict[Callable, Callable]:
    """On int64 arrays of int32/uint32 values: no result leaves int64 before the wrap."""
    np = _np()
    return {
        nm.add: np.add,
        nm.sub: np.subtract,
        nm.mul: np.multiply,
        nm.neg: np.negative,
        nm.absolute: np.abs,
        nm.floordiv: np.floor_divide,  # floor division; by zero 0, as the shim
        nm.mod: np.mod,  # floor modulo; by zero 0
        nm.maximum: np.maximum,
        nm.minimum: np.minimum,
        nm.clip: lambda a, lo, hi: np.minimum(np.maximum(a, lo), hi),
        nm.relu: lambda a: np.maximum(a, 0),
        nm.bitand: np.bitwise_and,
        nm.bitor: np.bitwise_or,
        nm.bitxor: np.bitwise_xor,
        nm.lshift: np.left_shift,  # counts proven in 0..31: below 2^63 before the wrap
        nm.rshift: np.right_shift,  # arithmetic on int64, as Python's
        nm.lt: np.less,
        nm.le: np.less_equal,
        nm.gt: np.greater,
        nm.ge: np.greater_equal,
        nm.eq: np.equal,
        nm.ne: np.not_equal,
        nm.where: lambda c, a, b: np.where(c, a, b),
    }


def _bool_table() -> dict[Callable, Callable]:
    np = _np()
    return {
        nm.bitand: np.logical_and,
        nm.bitor: np.logical_or,
        nm.bitxor: np.logical_xor,
        nm.invert: np.logical_not,
        nm.eq: np.equal,
        nm.ne: np.not_equal,
        nm.where: lambda c, a, b: np.where(c, a, b),
    }


_NUMPY_DTYPES = {float32: "float32", float16: "float16", int32: "int32", uint32: "uint32"}


def _as_array(values: Sequence, dtype: DType) -> Any:
    """Values of `dtype` as the NumPy array an op computes on (float64, int64 or bool)."""
    np = _np()
    if dtype.is_float:
        return np.asarray(values, dtype=np.float64)
    if dtype.is_integer:
        return np.asarray(values, dtype=np.int64)
    return np.asarray(values, dtype=bool)


def _to_list(result: Any, dtype: DType) -> list:
    """Round, wrap or convert an array into `dtype`'s values, as `numerics.cast` does."""
    np = _np()
    result = np.asarray(result)
    if dtype == float32 or dtype == float16:
        if result.dtype.kind not in "fc":
            result = result.astype(np.float64)
        with np.errstate(over="ignore", invalid="ignore"):
            return result.astype(_NUMPY_DTYPES[dtype]).astype(np.float64).ravel().tolist()
    if dtype == bool_:
        return result.astype(bool).ravel().tolist()
    if dtype in (int32, uint32) and result.dtype.kind in "iub":
        wrapped = result.astype(np.int64) & 0xFFFFFFFF
        if dtype == int32:
            wrapped = np.where(wrapped > 0x7FFFFFFF, wrapped - (1 << 32), wrapped)
        return wrapped.ravel().tolist()
    return nm.cast(result.ravel().tolist(), dtype)  # bfloat16, float -> int: the shim's rules


# ---------------------------------------------------------------- evaluators


def _elementwise(original: Callable) -> Callable:
    tables = {"float": _float_table(), "int": _int_table(), "bool": _bool_table()}

    def elementwise(element, operands, out_shape, compute, out_dtype):
        np = _np()
        kinds = {"float" if d.is_float else "int" if d.is_integer else "bool" for d in compute}
        # `where` reads its condition as bool and its branches in the result dtype
        kind = next(iter(kinds - {"bool"}), "bool") if element is nm.where else None
        if kind is None:
            if len(kinds) != 1:
                return original(element, operands, out_shape, compute, out_dtype)
            kind = kinds.pop()
        fn = tables[kind].get(element)
        if fn is None or out_dtype == bfloat16 or any(d == bfloat16 for d in compute):
            return original(element, operands, out_shape, compute, out_dtype)
        args = []
        for operand, dtype in zip(operands, compute, strict=True):
            if isinstance(operand, tuple):
                values, shape = operand
                args.append(_as_array(values, dtype).reshape(shape))
            else:
                value = nm.as_operand(nm.python_value(operand, dtype), dtype)
                args.append(_as_array([value], dtype).reshape(()))
        with np.errstate(all="ignore"):
            result = fn(*args)
        return _to_list(np.broadcast_to(result, out_shape), out_dtype)

    return elementwise


def _matmul(original: Callable) -> Callable:
    def matmul(left, lshape, right, rshape, out_shape, dtype):
        np = _np()
        if dtype == bfloat16 or not (dtype.is_float or dtype.is_integer):
            return original(left, lshape, right, rshape, out_shape, dtype)
        a = _as_array(left, dtype).reshape(lshape)
        b = _as_array(right, dtype).reshape(rshape)
        with np.errstate(all="ignore"):
            result = np.matmul(a, b)
        return _to_list(result.reshape(out_shape), dtype)

    return matmul


def _reduce(original: Callable) -> Callable:
    def reduce(kind, values, shape, axes, in_dtype, out_dtype):
        np = _np()
        if in_dtype == bool_ or bfloat16 in (in_dtype, out_dtype) or not values:
            return original(kind, values, shape, axes, in_dtype, out_dtype)
        read = in_dtype if kind in ("max", "min") else out_dtype
        a = _as_array(values, read).reshape(shape)
        axes = tuple(axes)
        with np.errstate(all="ignore"):
            if kind == "sum":
                result = a.sum(axis=axes)
            elif kind == "mean":
                result = a.sum(axis=axes) / math.prod(shape[i] for i in axes)
            elif kind == "max":
                result = a.max(axis=axes)  # a NaN wins, as `numerics.maximum` folds it
            elif kind == "min":
                result = a.min(axis=axes)
            else:  # pragma: no cover - the table names only these
                return original(kind, values, shape, axes, in_dtype, out_dtype)
        return _to_list(result, out_dtype)

    return reduce


def _softmax(original: Callable) -> Callable:
    def softmax(values, shape, axis, log, out_dtype):
        np = _np()
        if out_dtype == bfloat16 or not values:
            return original(values, shape, axis, log, out_dtype)
        a = np.asarray(values, dtype=np.float64).reshape(shape)
        with np.errstate(all="ignore"):
            m = a.max(axis=axis, keepdims=True)
            m = np.where(np.isneginf(m), 0.0, m)
            shifted = a - m
            exps = np.exp(shifted)
            total = exps.sum(axis=axis, keepdims=True)
            result = shifted - np.log(total) if log else exps / total
        return _to_list(result, out_dtype)

    return softmax


def _moments(original: Callable) -> Callable:
    def moments(kind, values, shape, axes, ddof, out_dtype):
        np = _np()
        if out_dtype == bfloat16 or not values:
            return original(kind, values, shape, axes, ddof, out_dtype)
        a = np.asarray(values, dtype=np.float64).reshape(shape)
        axes = tuple(axes)
        count = math.prod(shape[i] for i in axes)
        with np.errstate(all="ignore"):
            mean = a.sum(axis=axes, keepdims=True) / count
            var = ((a - mean) ** 2).sum(axis=axes) / (count - ddof)
            result = np.sqrt(var) if kind == "std" else var
        return _to_list(result, out_dtype)

    return moments


def _transpose(original: Callable) -> Callable:
    def transpose(values, shape, perm):
        if len(values) < 4096:
            return original(values, shape, perm)
        np = _np()
        array = np.asarray(values)
        if array.dtype == object:
            return original(values, shape, perm)
        return array.reshape(shape).transpose(perm).ravel().tolist()

    return transpose


_EVALUATORS = {
    "elementwise": _elementwise,
    "matmul": _matmul,
    "reduce": _reduce,
    "softmax": _softmax,
    "moments": _moments,
    "transpose": _transpose,
}


# ---------------------------------------------------------------- index-level kernels


class _Vectorised:
    """Runs an index-level kernel once over its whole grid (see the module docstring)."""

    def __init__(self, np: Any) -> None:
        self.np = np
        lane_type = self._lane_type()
        self.Lane = lane_type

    def _lane_type(self) -> type:
        np = self.np

        def method(fn: Callable) -> Callable:
            def apply(self: Any) -> Any:
                if self.dtype.kind != "f":
                    raise _UnsupportedError("a method of a non-float element")
                with np.errstate(all="ignore"):
                    out = np.asarray(fn(self.astype(np.float64))).astype(self.dtype)
                return out.view(type(self))

            return apply

        def not_in_place(op: str) -> Callable:
            def apply(self: Any, other: Any) -> Any:
                return getattr(np.asarray(self), op)(other).view(type(self))

            return apply

        table = _float_table()
        namespace: dict[str, Any] = {
            name: method(table[fn])
            for name, fn in (
                ("exp", nm.exp),
                ("log", nm.log),
                ("sqrt", nm.sqrt),
                ("rsqrt", nm.rsqrt),
                ("tanh", nm.tanh),
                ("sigmoid", nm.sigmoid),
                ("relu", nm.relu),
                ("abs", nm.absolute),
                ("sin", nm.sin),
                ("cos", nm.cos),
                ("gelu", nm.gelu),
            )
        }
        # `acc += v`: a new array (a broadcast may grow it), never a write into `acc`
        for op, plain in (
            ("__iadd__", "__add__"),
            ("__isub__", "__sub__"),
            ("__imul__", "__mul__"),
            ("__itruediv__", "__truediv__"),
            ("__ifloordiv__", "__floordiv__"),
            ("__imod__", "__mod__"),
        ):
            namespace[op] = not_in_place(plain)

        def refuse_truth(self: Any) -> bool:
            if self.size != 1:
                raise _UnsupportedError("a condition on a per-program value")
            return bool(np.asarray(self).reshape(()))

        namespace["__bool__"] = refuse_truth
        return type("_Lanes", (np.ndarray,), namespace)

    def lanes(self, value: Any) -> Any:
        return self.np.asarray(value).view(self.Lane)

    def index(self, key: Any, shape: Sequence[int]) -> tuple:
        items = key if isinstance(key, tuple) else (key,)
        if len(items) != len(shape):
            raise _UnsupportedError("not an element access")
        out = []
        for item, size in zip(items, shape, strict=True):
            if isinstance(item, slice) or item is None or item is Ellipsis:
                raise _UnsupportedError("a slice in an index-level kernel")
            value = self.np.asarray(item)
            if value.dtype.kind not in "iu":
                try:
                    value = self.np.asarray(int(item))
                except (TypeError, ValueError):
                    raise _UnsupportedError("an index that is not an integer") from None
            if value.size and (value.min() < 0 or value.max() >= size):
                raise _UnsupportedError("an index out of bounds")  # the shim names it
            out.append(value)
        return tuple(out)


class _ArrayParam:
    """A tensor parameter of a vectorised index-level kernel: reads gather, writes scatter."""

    def __init__(self, run: _Vectorised, array: Any) -> None:
        self._run, self.array = run, array

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.array.shape)

    def __getitem__(self, key: Any) -> Any:
        return self._run.lanes(self.array[self._run.index(key, self.array.shape)])

    def __setitem__(self, key: Any, value: Any) -> None:
        np = self._run.np
        index = self._run.index(key, self.array.shape)
        value = np.asarray(value)
        if value.dtype.kind == "f" and self.array.dtype.kind != "f":
            raise _UnsupportedError("a float stored into an integer tensor")
        shape = np.broadcast_shapes(*(i.shape for i in index), value.shape)
        index = tuple(np.broadcast_to(i, shape) for i in index)
        self.array[index] = np.broadcast_to(value, shape)

    def __getattr__(self, name: str) -> Any:
        raise _UnsupportedError(f"`.{name}` of a tensor in an index-level kernel")


_GRID_NUMPY = {
    float32: "float32",
    float16: "float16",
    int32: "int32",
    uint32: "uint32",
    bool_: "bool",
}


def _run_grid(original: Callable) -> Callable:
    def run_grid(kernel: Any, bound: Any, bindings: dict[str, int]) -> None:
        try:
            _run_grid_vectorised(kernel, bound)
        except _UnsupportedError:
            return original(kernel, bound, bindings)
        except Exception:  # noqa: BLE001 - whatever it was, the shim says it properly
            return original(kernel, bound, bindings)
        return None

    return run_grid


def _run_grid_vectorised(kernel: Any, bound: Any) -> None:
    import mimir.array as ma
    from mimir.array.state import resolve

    np = _np()
    run = _Vectorised(np)
    if not isinstance(kernel.grid, tuple) or not kernel.grid:
        raise _UnsupportedError("a bad grid")
    sizes = [int(resolve(g)) for g in kernel.grid]
    rank = len(sizes)
    pids = [
        run.lanes(np.arange(n, dtype=np.int64).reshape([n if a == k else 1 for a in range(rank)]))
        for k, n in enumerate(sizes)
    ]
    params: dict[str, _ArrayParam] = {}
    arguments = dict(bound.arguments)
    for name, value in bound.arguments.items():
        if isinstance(value, ma.Tensor):
            dtype = _GRID_NUMPY.get(value._dtype)
            if dtype is None:
                raise _UnsupportedError(f"a {value._dtype} tensor")
            array = np.asarray(value._values, dtype=dtype).reshape(value._shape).copy()
            params[name] = arguments[name] = _ArrayParam(run, array)

    def program_id(axis: int) -> Any:
        if not isinstance(axis, int) or not 0 <= axis < rank:
            raise _UnsupportedError("a bad axis")
        return pids[axis]

    def atomic_add(out: Any, index: Any, value: Any) -> None:
        if not isinstance(out, _ArrayParam):
            raise _UnsupportedError("atomic_add into something else")
        items = run.index(index, out.array.shape)
        value = np.asarray(value)
        shape = np.broadcast_shapes(*(i.shape for i in items), value.shape)
        flat = tuple(np.broadcast_to(i, shape).ravel() for i in items)
        np.add.at(out.array, flat, np.broadcast_to(value, shape).ravel().astype(out.array.dtype))

    def pairwise(fn: Callable) -> Callable:
        def apply(*args: Any) -> Any:
            with np.errstate(all="ignore"):
                return run.lanes(fn(*args))

        return apply

    replaced = {
        ma.program_id: program_id,
        ma.atomic_add: atomic_add,
        ma.maximum: pairwise(np.maximum),
        ma.minimum: pairwise(np.minimum),
        ma.where: pairwise(np.where),
    }
    fn = kernel.fn
    module_globals = dict(fn.__globals__)
    for key, value in fn.__globals__.items():
        if isinstance(value, types.ModuleType) and value is ma:
            raise _UnsupportedError("mimir.array used through its module")
        try:
            if value in replaced:
                module_globals[key] = replaced[value]
        except TypeError:  # an unhashable global
            continue
    body = types.FunctionType(
        fn.__code__, module_globals, fn.__name__, fn.__defaults__, fn.__closure__
    )
    body.__kwdefaults__ = fn.__kwdefaults__
    with np.errstate(all="ignore"):
        returned = body(**arguments)
    if returned is not None:
        raise _UnsupportedError("a kernel that returns")
    # every write of the whole grid is in; the shim's tensors take the results
    for name, param in params.items():
        tensor = bound.arguments[name]
        tensor._values[:] = param.array.ravel().tolist()


# ---------------------------------------------------------------- comparison


def compare(
    actual: Sequence[Any],
    expected: Sequence[Any],
    dtype: str,
    rtol: float | None = None,
    atol: float | None = None,
) -> tuple[float, float, list[int]]:
    """`verify.error_summary` and `verify.mismatches` at once, over arrays: (max absolute
    error, max relative error, flat indices of the mismatches), the same numbers."""
    np = _np()
    if len(actual) != len(expected):
        raise ValueError(f"{len(actual)} values, expected {len(expected)}")
    a = np.asarray(actual, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    with np.errstate(all="ignore"):
        skip = (np.isnan(a) & np.isnan(e)) | (a == e)
        finite = np.isfinite(a) & np.isfinite(e)
        diff = np.where(finite, np.abs(a - e), np.inf)
        rel = np.where(e != 0, diff / np.abs(e), np.inf)
        counted = ~skip
        max_abs = float(diff[counted].max()) if counted.any() else 0.0
        rel = rel[counted & ~np.isnan(rel)]  # inf / inf: Python's max passes over a NaN
        max_rel = max(0.0, float(rel.max())) if rel.size else 0.0
        if dtype == "bool_":
            ok = (a != 0) == (e != 0)
        elif dtype in ("int32", "uint32"):
            ok = a == e
        else:
            default_rtol, default_atol = TOLERANCES[dtype]
            rtol = default_rtol if rtol is None else rtol
            atol = default_atol if atol is None else atol
            near = ~np.isnan(a) & (np.abs(a - e) <= atol + rtol * np.abs(e))
            ok = np.where(np.isfinite(e), near, (np.isnan(a) & np.isnan(e)) | (a == e))
    return max_abs, max_rel, np.flatnonzero(~ok).tolist()


# ---------------------------------------------------------------- the switch


@contextlib.contextmanager
def accelerated() -> Iterator[bool]:
    """Within the block, the shim computes through NumPy (see the module docstring); yields
    whether it does (False when NumPy cannot be imported). Not thread-safe: it swaps the
    evaluators for the whole process while it is open."""
    if not available():
        yield False
        return
    import mimir.array as ma

    saved = {name: getattr(ev, name) for name in _EVALUATORS}
    saved_grid = ma.Kernel._run_grid
    try:
        for name, wrap in _EVALUATORS.items():
            setattr(ev, name, wrap(saved[name]))
        ma.Kernel._run_grid = _run_grid(saved_grid)  # type: ignore[method-assign]
        yield True
    finally:
        for name, original in saved.items():
            setattr(ev, name, original)
        ma.Kernel._run_grid = saved_grid  # type: ignore[method-assign]
