"""Reference evaluators: each op family on flat row-major Python lists.

A tensor value here is `(values, shape)`: a flat list in row-major order and a
tuple of ints. These functions assume the op's shape and dtype rules already
passed; they compute, they do not check. Floating results are computed in
double precision and rounded once into the result dtype (`numerics.cast`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import product as cartesian

from mimir.dtypes import DType
from mimir.ops import numerics as nm

Values = list
Shape = tuple[int, ...]


def numel(shape: Sequence[int]) -> int:
    return math.prod(shape)


def strides(shape: Sequence[int]) -> list[int]:
    out = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        out[i] = out[i + 1] * shape[i + 1]
    return out


def broadcast_index(in_shape: Shape, out_shape: Shape) -> list[int] | None:
    """For each output element, the flat index of the input element it reads.

    None means the identity (same shape), the common fast path.
    """
    if tuple(in_shape) == tuple(out_shape):
        return None
    pad = len(out_shape) - len(in_shape)
    full = (1,) * pad + tuple(in_shape)
    st = strides(full)
    eff = [0 if full[i] == 1 else st[i] for i in range(len(full))]
    index = [0]
    for axis in range(len(out_shape)):
        step = eff[axis]
        index = [base + k * step for base in index for k in range(out_shape[axis])]
    return index


def elementwise(
    element,
    operands: Sequence[tuple[Values, Shape] | object],
    out_shape: Shape,
    compute: Sequence[DType],
    out_dtype: DType,
) -> Values:
    """Apply `element` over broadcast operands.

    `operands` holds `(values, shape)` for tensors and a Python number for
    scalars; `compute[i]` is the dtype operand i is read as.
    """
    n = numel(out_shape)
    columns = []
    for operand, dtype in zip(operands, compute, strict=True):
        if isinstance(operand, tuple):
            values, shape = operand
            values = [nm.as_operand(v, dtype) for v in values]
            idx = broadcast_index(shape, out_shape)
            columns.append(values if idx is None else [values[i] for i in idx])
        else:
            value = nm.as_operand(nm.python_value(operand, dtype), dtype)
            columns.append([value] * n)
    return nm.cast([element(*args) for args in zip(*columns, strict=True)], out_dtype)


def _axis_groups(shape: Shape, axes: Sequence[int]) -> tuple[list[list[int]], Shape]:
    """Group flat indices by the kept axes: one list of input indices per output element."""
    kept = [i for i in range(len(shape)) if i not in axes]
    st = strides(shape)
    kept_ranges = [range(shape[i]) for i in kept]
    red_ranges = [range(shape[i]) for i in axes]
    red_offsets = [
        sum(c * st[a] for c, a in zip(combo, axes, strict=True)) for combo in cartesian(*red_ranges)
    ]
    groups = []
    for combo in cartesian(*kept_ranges):
        base = sum(c * st[a] for c, a in zip(combo, kept, strict=True))
        groups.append([base + off for off in red_offsets])
    return groups, tuple(shape[i] for i in kept)


def reduce(
    kind: str, values: Values, shape: Shape, axes: Sequence[int], in_dtype: DType, out_dtype: DType
) -> Values:
    groups, _ = _axis_groups(shape, axes)
    vals = [
        nm.as_operand(v, out_dtype if kind != "max" and kind != "min" else in_dtype) for v in values
    ]
    out = []
    for group in groups:
        items = [vals[i] for i in group]
        if kind == "sum":
            out.append(nm.fsum(items) if out_dtype.is_float else sum(items))
        elif kind == "mean":
            out.append(nm.fsum(items) / len(items))
        elif kind == "max":
            out.append(_fold(nm.maximum, items))
        elif kind == "min":
            out.append(_fold(nm.minimum, items))
        else:  # pragma: no cover - the table names only these
            raise ValueError(kind)
    return nm.cast(out, out_dtype)


def _fold(fn, items):
    acc = items[0]
    for v in items[1:]:
        acc = fn(acc, v)
    return acc


def scan(kind: str, values: Values, shape: Shape, axis: int | None, out_dtype: DType) -> Values:
    """Inclusive prefix sums (`cumsum`) or products (`cumprod`) along `axis`, or over
    the flattened values when `axis` is None. Floats accumulate in double and each
    prefix is rounded once; integers wrap at every step, as int32 arithmetic does."""
    if axis is None:
        shape, axis = (len(values),), 0
    groups, _ = _axis_groups(shape, (axis,))
    vals = [nm.as_operand(v, out_dtype) for v in values]
    out: list = [0] * len(values)
    for group in groups:
        acc = 0 if kind == "cumsum" else 1
        for i in group:
            acc = acc + vals[i] if kind == "cumsum" else acc * vals[i]
            if not out_dtype.is_float:
                acc = nm.cast([acc], out_dtype)[0]
            out[i] = acc
    return nm.cast(out, out_dtype)


def softmax(values: Values, shape: Shape, axis: int, log: bool, out_dtype: DType) -> Values:
    """Numerically stable (log-)softmax along `axis`."""
    groups, _ = _axis_groups(shape, (axis,))
    out = [0.0] * len(values)
    for group in groups:
        row = [float(values[i]) for i in group]
        m = max(row)
        if math.isinf(m) or m != m:
            m = 0.0 if math.isinf(m) and m < 0 else m
        shifted = [v - m for v in row]
        exps = [nm.exp(v) for v in shifted]
        total = nm.fsum(exps)
        for i, s, e in zip(group, shifted, exps, strict=True):
            out[i] = s - nm.log(total) if log else nm.truediv(e, total)
    return nm.cast(out, out_dtype)


def matmul(
    left: Values, lshape: Shape, right: Values, rshape: Shape, out_shape: Shape, dtype: DType
) -> Values:
    m, k = lshape[-2], lshape[-1]
    n = rshape[-1]
    batch = out_shape[:-2]
    lidx = broadcast_index(tuple(lshape[:-2]), batch)
    ridx = broadcast_index(tuple(rshape[:-2]), batch)
    lv = [nm.as_operand(v, dtype) for v in left]
    rv = [nm.as_operand(v, dtype) for v in right]
    out: list = []
    for b in range(numel(batch)):
        lb = (b if lidx is None else lidx[b]) * m * k
        rb = (b if ridx is None else ridx[b]) * k * n
        cols = [rv[rb + j : rb + k * n : n] for j in range(n)]
        for i in range(m):
            row = lv[lb + i * k : lb + (i + 1) * k]
            for col in cols:
                products = map(nm.mul, row, col)
                out.append(nm.fsum(products) if dtype.is_float else sum(products))
    return nm.cast(out, dtype)


def transpose(values: Values, shape: Shape, perm: Sequence[int]) -> Values:
    st = strides(shape)
    out_shape = [shape[p] for p in perm]
    index = [0]
    for axis in range(len(out_shape)):
        step = st[perm[axis]]
        index = [base + k * step for base in index for k in range(out_shape[axis])]
    return [values[i] for i in index]


def index(values: Values, shape: Shape, items: Sequence[tuple]) -> Values:
    """`x[items]` for resolved items: ("slice", start, stop), ("int", i), ("newaxis",)."""
    st = strides(shape)
    offsets = [0]
    axis = 0
    for it in items:
        if it[0] == "newaxis":
            continue
        if it[0] == "int":
            offsets = [o + it[1] * st[axis] for o in offsets]
        else:
            start, stop = it[1], it[2]
            offsets = [o + k * st[axis] for o in offsets for k in range(start, stop)]
        axis += 1
    return [values[o] for o in offsets]


def create(shape: Shape, fill: object, dtype: DType) -> Values:
    return nm.cast([fill], dtype) * numel(shape)


def arange(n: int, dtype: DType) -> Values:
    return nm.cast(list(range(n)), dtype)


def triangle(values: Values, shape: Shape, k: int, upper: bool, dtype: DType) -> Values:
    """`tril` keeps j - i <= k, `triu` keeps j - i >= k on the last two axes (NumPy)."""
    rows, cols = shape[-2], shape[-1]
    zero = nm.cast([0], dtype)[0]
    out = []
    for flat, v in enumerate(values):
        i, j = (flat // cols) % rows, flat % cols
        keep = j - i >= k if upper else j - i <= k
        out.append(v if keep else zero)
    return out


def join(parts: Sequence[tuple[Values, Shape]], axis: int, stack: bool) -> Values:
    """`concatenate` / `stack` of row-major tensors (same shape except on `axis`)."""
    if stack:
        parts = [(v, (*s[:axis], 1, *s[axis:])) for v, s in parts]
    outer = numel(parts[0][1][:axis])
    out: list = []
    for o in range(outer):
        for values, shape in parts:
            block = numel(shape[axis:])
            out.extend(values[o * block : (o + 1) * block])
    return out


def argreduce(kind: str, values: Values, shape: Shape, axes: Sequence[int], dtype: DType) -> Values:
    """The first index of the max (min) along the axes, a NaN counting as the extreme
    (NumPy: the first NaN wins). Bools order False < True."""
    groups, _ = _axis_groups(shape, axes)
    out = []
    for group in groups:
        best, where = None, 0
        for pos, i in enumerate(group):
            v = values[i]
            if best is None:
                best, where = v, pos
            elif best != best:
                break
            elif v != v or (v > best if kind == "argmax" else v < best):
                best, where = v, pos
        out.append(where)
    return out


def sort_key(value: object, descending: bool) -> tuple:
    """The order `sort` and `argsort` sort by, ties left to the position (a stable sort):
    ascending, every number before a NaN (NumPy); descending, a NaN first, then the
    numbers from the largest (PyTorch's `descending=True`). -0.0 equals 0.0."""
    nan = value != value
    if descending:
        return (not nan, 0 if nan else -value)  # type: ignore[operator]
    return (nan, 0 if nan else value)


def sort(
    kind: str, values: Values, shape: Shape, axis: int, descending: bool, dtype: DType
) -> Values:
    """`sort` (the values) or `argsort` (their int32 positions along `axis`), stable."""
    groups, _ = _axis_groups(shape, (axis,))
    out: list = [0] * len(values)
    for group in groups:
        order = sorted(range(len(group)), key=lambda p: sort_key(values[group[p]], descending))
        for i, p in zip(group, order, strict=True):
            out[i] = values[group[p]] if kind == "sort" else p
    return out


def moments(
    kind: str, values: Values, shape: Shape, axes: Sequence[int], ddof: int, out_dtype: DType
) -> Values:
    """`var` / `std`: the mean first, then the mean squared deviation over count - ddof."""
    groups, _ = _axis_groups(shape, axes)
    out = []
    for group in groups:
        items = [float(values[i]) for i in group]
        mean = nm.fsum(items) / len(items)
        square = nm.fsum((v - mean) * (v - mean) for v in items)
        var = square / (len(items) - ddof)
        out.append(math.sqrt(var) if kind == "std" and var == var else var)
    return nm.cast(out, out_dtype)
