"""The kernel language's functions: `where`, `einsum`, `full`, `atomic_add`, ..."""

from __future__ import annotations

import random as _random
import struct
from collections.abc import Iterable, Sequence
from typing import Any

from mimir import ops
from mimir.array.state import DEVICES, GRID, MimirError, in_kernel, resolve, rule, static_int
from mimir.array.tensors import (
    Tensor,
    element_only,
    elementwise,
    gather,
    matmul_operand,
    store_value,
)
from mimir.dims import SizeInt
from mimir.dtypes import DType, bool_, float16, float32, int32, scalar_kind, uint32
from mimir.ops import dtype_rules as dr
from mimir.ops import einsum as einsum_rules
from mimir.ops import evaluate as ev
from mimir.ops import numerics as nm
from mimir.ops import shapes as sh

_A = sh.INT_ALGEBRA


def where(cond: Any, a: Any, b: Any) -> Tensor:
    """Element-wise `a if cond else b`, broadcasting all three."""
    return elementwise(ops.BY_FUNCTION["where"], [cond, a, b])


def maximum(a: Any, b: Any) -> Tensor:
    """Element-wise maximum (nan-propagating, as NumPy)."""
    return elementwise(ops.BY_FUNCTION["maximum"], [a, b])


def minimum(a: Any, b: Any) -> Tensor:
    """Element-wise minimum (nan-propagating, as NumPy)."""
    return elementwise(ops.BY_FUNCTION["minimum"], [a, b])


def atan2(y: Any, x: Any) -> Tensor:
    """Element-wise `atan2(y, x)`: the angle of the point (x, y) in [-pi, pi] (as
    `math.atan2`, NumPy's `arctan2`)."""
    return elementwise(ops.BY_FUNCTION["atan2"], [y, x])


def einsum(spec: Any, *operands: Any) -> Tensor:
    """Einstein summation with a literal spec (`'ij,jk->ik'`, `'bhqd,bhkd->bhqk'`), one or
    two operands; each letter one size in every operand (see `mimir.ops.einsum`)."""
    if not isinstance(spec, str):
        raise MimirError("GPU022", "`einsum` takes a literal spec string first")
    parsed = rule(einsum_rules.parse, spec)
    for x in operands:
        if not isinstance(x, Tensor):
            raise MimirError("GPU036", "`einsum()` needs tensor operands")
    element_only(*operands)
    if len({x._device for x in operands}) > 1:
        raise MimirError("GPU061", "`einsum()` mixes tensors on cpu and gpu")
    out_shape = rule(einsum_rules.shape, _A, parsed, [x._shape for x in operands])
    # The dtypes of the ops the checker lowers the spec to: a sum over an operand's own
    # letters (`summation`), then `@` or `*` of the two (`arithmetic`).
    kinds = []
    for k, (term, x) in enumerate(zip(parsed.inputs, operands, strict=True)):
        others = "".join(t for j, t in enumerate(parsed.inputs) if j != k)
        own = set(term) - set(parsed.output) - set(others)
        kinds.append(rule(ops.dtype_rules.summation, "einsum()", [x._dtype]) if own else x._dtype)
    dtype = rule(ops.dtype_rules.arithmetic, "einsum()", kinds) if len(kinds) == 2 else kinds[0]
    lowered_to_matmul = len(operands) == 2 and einsum_rules.letter_roles(parsed).matmul
    args = [(matmul_operand(x) if lowered_to_matmul else x._values, x._shape) for x in operands]
    values = einsum_rules.evaluate(parsed, args, out_shape, dtype)
    return Tensor(values, out_shape, dtype, operands[0]._device)


def topk(x: Any, k: Any, axis: int = -1, largest: bool = True) -> tuple[Tensor, Tensor]:
    """The k largest (or, `largest=False`, smallest) elements along `axis` and their int32
    positions, as PyTorch's `topk` returns them: in sorted order, equal keys in their
    order (`x.sort(axis, descending=largest)` and `argsort`, each cut to its first k)."""
    if not isinstance(x, Tensor):
        raise MimirError("GPU036", "`topk()` takes a tensor first")
    element_only(x)
    size = static_int(resolve(k), "`k` of `topk()`")
    static_int(axis, "the axis of `topk()`")
    if not isinstance(largest, bool):
        raise MimirError("GPU036", "`largest` must be True or False")
    shape = rule(sh.topk, _A, x._shape, size, axis)
    rule(dr.sortable, "topk()", [x._dtype])
    a = axis % len(x._shape)
    values, positions = x.sort(axis, largest), x.argsort(axis, largest)
    cut = tuple(slice(None) if i != a else slice(0, size) for i in range(len(x._shape)))
    if shape == x._shape:
        return values, positions
    return values[cut], positions[cut]


def _shape_arg(shape: Any) -> tuple[int, ...]:
    items = shape if isinstance(shape, (tuple, list)) else (shape,)
    out = tuple(static_int(resolve(s), "a size in a shape") for s in items)
    rule(sh.creation, _A, out)
    return out


def _default_device(device: str | None) -> str:
    if device is None:
        return "gpu" if in_kernel() else "cpu"
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}; expected one of {DEVICES}")
    return device


def full(shape: Any, fill_value: Any, dtype: DType = float32, device: str | None = None) -> Tensor:
    """A tensor of `shape` filled with `fill_value`."""
    dims = _shape_arg(shape)
    fill_value = resolve(fill_value)  # `full((), D)`: a dim is the number it is bound to
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
    if GRID.get() is not None:
        raise MimirError("GPU031", "`arange` is a tensor-level op; compute on single elements")
    size = static_int(resolve(n), "the size of `arange()`")
    size = rule(sh.arange, _A, size)[0]
    if not isinstance(dtype, DType):
        raise MimirError("GPU036", f"`dtype` must be a dtype such as `int32`, got {dtype!r}")
    dtype = rule(dr.iota, "arange()", dtype)
    return Tensor(ev.arange(size, dtype), (size,), dtype, _default_device(device))


def _triangle(name: str, x: Any, k: Any) -> Tensor:
    if not isinstance(x, Tensor):
        raise MimirError("GPU036", f"`{name}()` needs a tensor operand")
    element_only(x)
    k = static_int(k, f"the diagonal `k` of `{name}()`")
    shape = rule(sh.triangle, _A, x._shape, name)
    return x._like(ev.triangle(x._values, shape, k, name == "triu", x._dtype), shape)


def tril(x: Tensor, k: int = 0) -> Tensor:
    """`x` with the elements above the k-th diagonal (j - i > k) of its last two axes zeroed."""
    return _triangle("tril", x, k)


def triu(x: Tensor, k: int = 0) -> Tensor:
    """`x` with the elements below the k-th diagonal (j - i < k) of its last two axes zeroed."""
    return _triangle("triu", x, k)


def _join(name: str, tensors: Any, axis: Any) -> Tensor:
    if not isinstance(tensors, (tuple, list)) or not all(isinstance(t, Tensor) for t in tensors):
        raise MimirError("GPU036", f"`{name}()` takes a tuple or list of tensors")
    element_only(*tensors)
    axis = static_int(axis, f"the axis of `{name}()`")
    stack = name == "stack"
    shape = rule(sh.join, _A, [t._shape for t in tensors], axis, stack)
    dtype = rule(ops.BY_FUNCTION[name].dtype_rule, f"{name}()", [t._dtype for t in tensors])
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
    if in_kernel():
        raise MimirError("GPU030", f"`{name}` cannot be called inside `@gpu`")


def tensor(data: Any, dtype: DType | None = None, device: str = "cpu") -> Tensor:
    """A tensor from (nested) Python lists of numbers, or from an array; host code only.

    An array is a NumPy array, a CPU torch tensor or any buffer-protocol object
    (read through its buffer, never through `.tolist()`); without `dtype` its
    dtype becomes the nearest Mimir dtype (float64 -> float32, int64 -> int32).
    Lists default to float32.
    """
    _host_function("tensor")
    array = from_array(data)
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
    dtype: Any = float32,
    seed: int = 0,
    low: float = -1.0,
    high: float = 1.0,
    device: str = "cpu",
) -> Tensor:
    """Two functions under one name, told apart by where they are called.

    Inside `@gpu`, `rand(seed, offsets)` is Triton's `tl.rand`: Philox4x32-10 of each offset
    under the seed, a float32 in [0, 1) per element (`mimir.ops.numerics.rand`).

    In host code, `rand(shape, dtype, seed, low, high, device)` makes a tensor of seeded
    uniform values in [low, high) (integers: [low, high]) from Python's `random`.
    """
    if in_kernel():
        return elementwise(ops.BY_FUNCTION["rand"], [shape, dtype])
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


def randn(seed: Any, offsets: Any) -> Tensor:
    """Triton's `tl.randn(seed, offsets)`: a standard normal float32 per offset, Box-Muller of
    the first two Philox4x32-10 words (`mimir.ops.numerics.randn`)."""
    return elementwise(ops.BY_FUNCTION["randn"], [seed, offsets])


# struct code of an array's elements -> the Mimir dtype an array of them becomes
_ARRAY_DTYPES = {"f": float32, "d": float32, "e": float16, "?": bool_}
_ARRAY_DTYPES.update({c: int32 for c in "bhiq"})
_ARRAY_DTYPES.update({c: uint32 for c in "BHIQ"})


def from_array(data: Any) -> tuple[list, tuple[int, ...], DType] | None:
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


def atomic_add(out: Tensor, index: Any, value: Any) -> None:
    """`out[index] += value` as one atomic step, in an index-level kernel.

    Several program ids may add to one element (a histogram, a scatter-add): the adds
    commute, so the result does not depend on their order (for float32 up to rounding,
    as on a GPU). A plain read or write of an element another program id adds to is a race
    (GPU028). The dtype must be int32, uint32 or float32; int sums wrap as the dtype does.
    """
    run = GRID.get()
    if run is None:
        raise MimirError(
            "GPU031",
            "`atomic_add` is only allowed in index-level kernels (`@gpu(grid=...)`); "
            "a tensor-level kernel sums with `.sum(axis=...)`",
        )
    if not isinstance(out, Tensor):
        raise MimirError("GPU036", "`atomic_add` adds into a tensor parameter")
    spec = ops.BY_FUNCTION["atomic_add"]
    kind = value._dtype if isinstance(value, Tensor) else scalar_kind(resolve(value))
    rule(spec.dtype_rule, spec.spelling, [out._dtype, kind])
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
    add = store_value(value, out._dtype)
    out._values[flat] = nm.cast([nm.add(out._values[flat], add)], out._dtype)[0]


def take_along_axis(arr: Tensor, indices: Tensor, axis: int) -> Tensor:
    """NumPy's `take_along_axis`: `out[..., j, ...] = arr[..., indices[..., j, ...], ...]`.

    `indices` has `arr`'s rank and its sizes on every other axis; each value must index
    `axis` (GPU018, as the checker proves from a `Range` on the index parameter).
    """
    if not isinstance(arr, Tensor) or not isinstance(indices, Tensor):
        raise MimirError("GPU036", "`take_along_axis()` takes two tensors and an axis")
    return gather(arr, indices, static_int(axis, "the axis of `take_along_axis()`"), along=True)


def program_id(axis: int) -> int:
    """The id of the running program along grid `axis`, in an index-level kernel."""
    run = GRID.get()
    if run is None:
        raise MimirError("GPU036", "`program_id` is only defined inside `@gpu(grid=...)` kernels")
    if not isinstance(axis, int) or not 0 <= axis < len(run.pids):
        raise MimirError(
            "GPU036", f"`program_id` takes an axis below the grid's rank {len(run.pids)}"
        )
    return run.pids[axis]
