"""The PyTorch and NumPy shape table: one rule per API function or tensor method.

Each rule takes the checker's context `cx` (see `mimir.host.rules`), the call's
positional and keyword arguments as host values, and returns the result's host
value. Sizes are `Sym`s of the Z3 size algebra (`mimir.constraints.algebra`),
the same terms the kernel checker proves; a size that is None is unknown and is
never compared. A function or method missing from the table gives `UNKNOWN`:
an unknown call is never an error. Errors use the codes the kernel language
uses for the same failure (GPU010 broadcast, GPU011 matmul, GPU013 reshape,
GPU014 axis, GPU018 index) and host codes (GPU100-GPU105) for the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mimir.host.rules import Ctx
from mimir.host.symbolic import DEEP, term_size
from mimir.host.values import (
    UNKNOWN,
    BoolV,
    DeviceV,
    DTypeV,
    FloatV,
    IntV,
    NoneV,
    Shape,
    Size,
    StrV,
    Sym,
    TensorV,
    TupleV,
    any_,
    arith,
    const,
    eq,
    le,
    literal,
    product,
    show,
    show_shape,
)
from mimir.solve.z3lib import z3

Rule = Callable[[Ctx, list[Any], dict[str, Any]], Any]

FLOATS = ("float16", "bfloat16", "float32", "float64")
INTS = ("uint8", "int8", "int16", "int32", "int64", "uint32")
DTYPE_ALIASES = {
    "float": "float32",
    "float32": "float32",
    "float64": "float64",
    "double": "float64",
    "half": "float16",
    "float16": "float16",
    "bfloat16": "bfloat16",
    "long": "int64",
    "int64": "int64",
    "int": "int32",
    "int32": "int32",
    "int16": "int16",
    "int8": "int8",
    "uint8": "uint8",
    "uint32": "uint32",
    "bool": "bool",
    "bool_": "bool",
}


def default_float(lib: str) -> str:
    return "float64" if lib == "numpy" else "float32"


def is_float(dtype: str | None) -> bool | None:
    return None if dtype is None else dtype in FLOATS


def is_int(dtype: str | None) -> bool | None:
    return None if dtype is None else dtype in INTS


# ---------------------------------------------------------------- arguments


def arg(args: list, kwargs: dict, i: int | None, name: str, default: Any = None) -> Any:
    if name in kwargs:
        return kwargs[name]
    if i is not None and i < len(args):
        return args[i]
    return default


def size_of(v: Any) -> Size:
    """A value used as a size: an int (or a literal bool), else unknown."""
    if isinstance(v, IntV):
        return v.sym
    return None


def int_lit(v: Any) -> int | None:
    if isinstance(v, IntV):
        return literal(v.sym)
    if isinstance(v, BoolV) and v.value is not None:
        return int(v.value)
    return None


def ints(v: Any) -> list[int | None] | None:
    """An int or a tuple of ints as a list of literal ints (None items unknown)."""
    if isinstance(v, TupleV):
        return [int_lit(x) for x in v.items]
    if isinstance(v, IntV):
        return [int_lit(v)]
    return None


def sizes_arg(args: list) -> list[Size] | None:
    """`f(2, 3)`, `f((2, 3))`, `f([2, 3])`, `f(x.shape)`: the sizes, or None if unreadable."""
    if len(args) == 1 and isinstance(args[0], TupleV):
        items = args[0].items
    else:
        items = tuple(args)
    if not all(isinstance(x, IntV) for x in items):
        return None
    return [x.sym for x in items]


def dtype_arg(v: Any) -> str | None:
    if isinstance(v, DTypeV):
        return v.name
    return None


def axis(cx: Ctx, v: Any, rank: int, what: str) -> int | None:
    """A literal dim argument normalised against `rank`; None when not literal."""
    k = int_lit(v)
    if k is None:
        return None
    r = max(rank, 1)
    if not -r <= k < r:
        cx.fail("GPU014", f"dim {k} is out of range for `{what}` on a tensor of rank {rank}")
    return None if rank == 0 else k % r  # a 0-d tensor accepts dim 0 and -1 but has no axis


def tensor(v: Any) -> TensorV | None:
    return v if isinstance(v, TensorV) else None


def operand_shape(v: Any) -> Shape | None:
    """The shape an operand contributes to broadcasting (a Python scalar is `()`)."""
    if isinstance(v, TensorV):
        return v.shape
    if isinstance(v, (IntV, FloatV, BoolV)):
        return ()
    return None


# ---------------------------------------------------------------- broadcasting


def broadcast(cx: Ctx, *shapes: Shape | None) -> Shape | None:
    """NumPy/PyTorch broadcasting; unknown sizes stay unknown and are never compared."""
    if any(s is None for s in shapes):
        return None
    rank = max((len(s) for s in shapes), default=0)  # type: ignore[arg-type]
    out: list[Size] = []
    for i in range(rank, 0, -1):
        size: Size = const(1)
        for shape in shapes:
            assert shape is not None
            if len(shape) < i:
                continue
            size = _pair(cx, size, shape[-i], shapes)
        out.append(size)
    return tuple(out)


def _pair(cx: Ctx, a: Size, b: Size, shapes: tuple) -> Size:
    if literal(a) == 1:
        return b
    if literal(b) == 1:
        return a
    if a is None or b is None:
        return None
    cond = any_(eq(a, b), eq(a, const(1)), eq(b, const(1)))
    message = (
        "shapes "
        + " and ".join(show_shape(s) for s in shapes)
        + f" cannot broadcast: {show(a)} vs {show(b)}"
    )
    if cond is not True:
        cx.refuse_coincidence(a, b, "GPU010", message)
    cx.need(cond, "GPU010", message, shapes)
    if eq(a, b) is True:
        return a
    if a.value is None or b.value is None:
        # the size that is not 1: `b` unless it is 1 (both are when they are equal)
        out = Sym(z3.If(b.term == 1, a.term, b.term), a.text if b.value == 1 else b.text)
        if term_size(out.term, DEEP + 1) > DEEP:
            # a residual sum after a sum, fifty blocks deep: a size of its own, at least 1
            return cx.free_size(b.text or "size")
        return out
    return a


def promote(a: Any, b: Any) -> str | None:
    """The result dtype of an element-wise op on two operands (PyTorch's rules, simplified)."""
    da = a.dtype if isinstance(a, TensorV) else _scalar_kind(a)
    db = b.dtype if isinstance(b, TensorV) else _scalar_kind(b)
    if da is None or db is None:
        return None
    lib = a.lib if isinstance(a, TensorV) else b.lib if isinstance(b, TensorV) else "torch"
    a_scalar, b_scalar = not isinstance(a, TensorV), not isinstance(b, TensorV)
    if a_scalar and b_scalar:
        return None
    if a_scalar or b_scalar:
        t, s = (db, da) if a_scalar else (da, db)
        if s == "pyfloat":
            return t if t in FLOATS else default_float(lib)
        return t if t != "bool" or s == "pybool" else "int64"
    if da == db:
        return da
    order = ["bool", *INTS, *FLOATS]
    if da in order and db in order:
        return max(da, db, key=order.index)
    return None


def _scalar_kind(v: Any) -> str | None:
    if isinstance(v, FloatV):
        return "pyfloat"
    if isinstance(v, IntV):
        return "pyint"
    if isinstance(v, BoolV):
        return "pybool"
    return None


def elementwise(cx: Ctx, *operands: Any, dtype: str | None = "promote") -> Any:
    tensors = [o for o in operands if isinstance(o, TensorV)]
    if not tensors:
        return UNKNOWN
    if dtype == "promote":
        dt: str | None = tensors[0].dtype
        for o in operands[1:]:
            dt = promote(TensorV(None, dt, tensors[0].lib), o) if dt is not None else None
        dtype = dt
    lib = tensors[0].lib
    shapes = [operand_shape(o) for o in operands]
    if all(s is not None for s in shapes):
        return TensorV(broadcast(cx, *shapes), dtype, lib)
    # an operand nothing is known of (a mask a helper not read returns) broadcasts like a
    # tensor of unknown rank: the result keeps the other operands' axes, whatever it holds
    operands = tuple(
        TensorV(None, None, lib) if s is None and not isinstance(o, TensorV) else o
        for o, s in zip(operands, shapes, strict=True)
    )
    tensors = [o for o in operands if isinstance(o, TensorV)]
    # some rank unknown: the trailing sizes every operand has broadcast; the rest is unknown
    unknown = [t for t in tensors if t.shape is None]
    depth = min(len(t.tail) for t in unknown)
    tails: list[Shape] = []
    for o in operands:
        last = o.last if isinstance(o, TensorV) else ()
        tails.append(tuple(last[len(last) - depth :]) if depth and len(last) > depth else last)
    tail = broadcast(cx, *tails) if depth else ()
    if tail is not None:
        tail = (*_sure_sizes(operands, len(tail)), *tail)
    origins = {t.origin for t in unknown}
    others = [o for o in operands if not (isinstance(o, TensorV) and o.shape is None)]
    keep = len(origins) == 1 and None not in origins and all(operand_shape(o) == () for o in others)
    ranks = [t.rank if t.shape is not None else t.max_rank for t in tensors]
    most = None if None in ranks else max(r for r in ranks if r is not None)
    origin = unknown[0].origin if keep else None
    return TensorV(None, dtype, lib, tuple(tail or ()), origin, most)


def _batch_tail(left: Shape, right: Shape) -> Shape:
    """The batch axes of `[..., *left, M, K] @ [*right, K, N]`, the left's rank unknown
    (at least its tail's): as many as the longer has; where both have an axis, the size
    they agree on or the one that is not 1; where only the right has it, its size unless 1
    (the left may have it, of any size that broadcasts); where only the left has it, its own."""
    out: list[Size] = []
    for k in range(max(len(left), len(right)), 0, -1):
        a = left[-k] if k <= len(left) else None
        b = right[-k] if k <= len(right) else None
        la, lb = literal(a), literal(b)
        if k > len(right):
            out.append(a)
        elif k > len(left):
            out.append(None if lb in (1, None) else b)
        elif la is not None and la == lb or lb == 1:
            out.append(a)
        elif la == 1 and lb is not None:
            out.append(b)
        else:
            out.append(None)
    return tuple(out)


def _sure_sizes(operands: tuple, depth: int) -> list[Size]:
    """Sizes past the `depth` last axes every operand has, that any broadcast which
    succeeds must give: where the operands that have that axis all give one literal size
    (other than 1), so does the result, whatever an operand of unknown rank holds there
    (its size there is that one or 1, or the broadcast fails); elsewhere a size not known,
    as the result has every axis an operand has."""
    lasts = [o.last for o in operands if isinstance(o, TensorV)]
    out: list[Size] = []
    for k in range(depth + 1, max((len(last) for last in lasts), default=0) + 1):
        known = [literal(last[-k]) for last in lasts if len(last) >= k]
        big = {n for n in known if n != 1}
        out.append(None if None in known or len(big) != 1 else const(big.pop()))
    return out[::-1]


# ---------------------------------------------------------------- linear algebra


def matmul(cx: Ctx, a: Any, b: Any) -> Any:
    x, y = tensor(a), tensor(b)
    if x is not None and y is not None and x.shape is None and y.shape is not None:
        if len(y.shape) >= 2:  # [..., K] @ [..., K, N]: K must agree, the result ends in N
            k1, k2 = cx.axis_size(x, -1), y.shape[-2]
            cx.need(
                eq(k1, k2),
                "GPU011",
                f"matmul shape mismatch: {show_shape(x.last, True)} @ {show_shape(y.shape)}, "
                f"left has K={show(k1)}, right has K={show(k2)}",
            )
            dtype = x.dtype if x.dtype == y.dtype else None
            if len(x.tail) < 2:
                return TensorV(None, dtype, x.lib, (y.shape[-1],))
            batch = _batch_tail(x.tail[:-2], y.shape[:-2])
            return TensorV(None, dtype, x.lib, (*batch, x.tail[-2], y.shape[-1]))
    if x is not None and y is not None and x.shape is not None and y.shape is None:
        if len(x.shape) >= 2 and len(y.tail) >= 2:
            k1, k2 = x.shape[-1], y.tail[-2]
            cx.need(
                eq(k1, k2),
                "GPU011",
                f"matmul shape mismatch: {show_shape(x.shape)} @ {show_shape(y.tail, True)}, "
                f"left has K={show(k1)}, right has K={show(k2)}",
            )
            dtype = x.dtype if x.dtype == y.dtype else None
            return TensorV(None, dtype, x.lib, (x.shape[-2], y.tail[-1]))
    if x is None or y is None or x.shape is None or y.shape is None:
        return TensorV(None, None, x.lib if x else "torch") if x or y else UNKNOWN
    if x.dtype and y.dtype and x.dtype != y.dtype and x.lib == "torch":
        cx.fail("GPU105", f"matmul mixes {x.dtype} and {y.dtype}: both operands need one dtype")
    xs, ys = x.shape, y.shape
    if not xs or not ys:
        cx.fail("GPU012", "matmul needs operands of rank 1 or more, got a scalar")
    left = (const(1), *xs) if len(xs) == 1 else xs
    right = (*ys, const(1)) if len(ys) == 1 else ys
    k1, k2 = left[-1], right[-2]
    cx.need(
        eq(k1, k2),
        "GPU011",
        f"matmul shape mismatch: {show_shape(xs)} @ {show_shape(ys)}, "
        f"left has K={show(k1)}, right has K={show(k2)}",
        (xs, ys),
    )
    batch = broadcast(cx, left[:-2], right[:-2])
    out: list[Size] = [*(batch or ())]
    if len(xs) > 1:
        out.append(left[-2])
    if len(ys) > 1:
        out.append(right[-1])
    dtype = x.dtype if x.dtype == y.dtype else promote(x, y)
    return TensorV(tuple(out) if batch is not None else None, dtype, x.lib)


def mm(cx: Ctx, args: list, kwargs: dict) -> Any:
    for side, v in (
        ("left", arg(args, kwargs, 0, "input")),
        ("right", arg(args, kwargs, 1, "mat2")),
    ):
        t = tensor(v)
        if t is not None and t.rank is not None and t.rank != 2:
            cx.fail("GPU012", f"`mm` needs 2-d operands: {side} has rank {t.rank}")
    return matmul(cx, args[0] if args else UNKNOWN, args[1] if len(args) > 1 else UNKNOWN)


def bmm(cx: Ctx, args: list, kwargs: dict) -> Any:
    a, b = tensor(arg(args, kwargs, 0, "input")), tensor(arg(args, kwargs, 1, "mat2"))
    for side, t in (("left", a), ("right", b)):
        if t is not None and t.rank is not None and t.rank != 3:
            cx.fail("GPU012", f"`bmm` needs 3-d operands: {side} has rank {t.rank}")
    if a and b and a.shape and b.shape:
        cx.need(
            eq(a.shape[0], b.shape[0]),
            "GPU011",
            f"bmm batch sizes differ: {show(a.shape[0])} vs {show(b.shape[0])}",
        )
    return matmul(cx, a or UNKNOWN, b or UNKNOWN)


def einsum(cx: Ctx, args: list, kwargs: dict) -> Any:
    if not args or not isinstance(args[0], StrV):
        return UNKNOWN
    spec = args[0].value.replace(" ", "")
    operands = args[1:]
    if len(operands) == 1 and isinstance(operands[0], TupleV):
        operands = list(operands[0].items)
    if "->" not in spec or "." in spec:
        return UNKNOWN
    lhs, out = spec.split("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        cx.fail("GPU036", f"einsum spec `{spec}` names {len(terms)} operands, got {len(operands)}")
    bound: dict[str, Size] = {}
    lib = "torch"
    for term, op in zip(terms, operands, strict=True):
        t = tensor(op)
        if t is None or t.shape is None:
            continue
        lib = t.lib
        if len(term) != len(t.shape):
            cx.fail(
                "GPU036",
                f"einsum term `{term}` has {len(term)} letters for a tensor of rank {len(t.shape)}",
            )
        for letter, size in zip(term, t.shape, strict=True):
            if letter in bound:
                cx.need(
                    eq(bound[letter], size),
                    "GPU011",
                    f"einsum `{spec}`: `{letter}` is {show(bound[letter])} in one operand "
                    f"and {show(size)} in another",
                )
            else:
                bound[letter] = size
    return TensorV(tuple(bound.get(letter) for letter in out), None, lib)


# ---------------------------------------------------------------- reductions


def reduction(cx: Ctx, t: TensorV, dim: Any, keepdim: Any, what: str, indices: bool) -> Any:
    if t.shape is None:
        return _tail_reduction(cx, t, dim, keepdim, what, indices)
    dtype = "int64" if what in ("argmax", "argmin") else t.dtype
    if what in ("all", "any"):
        dtype = "bool"
    keep = isinstance(keepdim, BoolV) and keepdim.value is True
    if dim is None or isinstance(dim, NoneV):
        return TensorV((), dtype, t.lib)
    dims = ints(dim)
    if dims is None or None in dims:
        return TensorV(None, dtype, t.lib)
    axes = {axis(cx, IntV(const(d)), len(t.shape), what) for d in dims if d is not None}
    shape = tuple(
        const(1) if i in axes else s for i, s in enumerate(t.shape) if keep or i not in axes
    )
    out = TensorV(shape, dtype, t.lib)
    if indices and t.lib == "torch":  # `x.max(dim=1)` is (values, indices)
        return TupleV((out, out.with_dtype("int64")))
    return out


def _tail_reduction(cx: Ctx, t: TensorV, dim: Any, keepdim: Any, what: str, indices: bool) -> Any:
    """A reduction over the last axes of a tensor of unknown rank (`x.mean(-1)`)."""
    dtype = (
        "int64" if what in ("argmax", "argmin") else "bool" if what in ("all", "any") else t.dtype
    )
    if dim is None or isinstance(dim, NoneV):
        return TensorV((), dtype, t.lib)
    dims = ints(dim)
    keep = isinstance(keepdim, BoolV) and keepdim.value is True
    if dims is None or None in dims or any(d >= 0 for d in dims if d is not None):
        out = TensorV(None, dtype, t.lib)
    else:
        n = max(-d for d in dims if d is not None)
        last = cx.tail_of(t, n)
        axes = {n + d for d in dims if d is not None}
        kept = tuple(
            const(1) if i in axes else s for i, s in enumerate(last) if keep or i not in axes
        )
        out = TensorV(None, dtype, t.lib, kept)
    if indices and t.lib == "torch" and what in ("max", "min", "median"):
        return TupleV((out, out.with_dtype("int64")))
    return out


# ---------------------------------------------------------------- layout


def reshape(cx: Ctx, t: TensorV, new: list[Size] | None, what: str = "view") -> Any:
    if new is None:
        return TensorV(None, t.dtype, t.lib)
    inferred = [i for i, s in enumerate(new) if literal(s) == -1]
    if len(inferred) > 1:
        cx.fail("GPU013", f"`{what}` can infer only one dimension, got several -1")
    total = product(t.shape) if t.shape is not None else None
    if inferred:
        known = product(tuple(s for i, s in enumerate(new) if i not in inferred))
        shown = ", ".join(show(s) for s in new)
        if literal(known) == 0:
            cx.fail("GPU013", f"`{what}({shown})` cannot infer -1 next to a size 0")
        cx.need(
            eq(arith("%", total, known), const(0)),
            "GPU013",
            f"cannot {what} {show_shape(t.shape)} ({show(total)} elements) as ({shown}): "
            f"{show(total)} is not a multiple of {show(known)}",
            (t.shape,),
        )
        size = cx.quotient(total, known)
        return TensorV(
            tuple(size if i in inferred else s for i, s in enumerate(new)), t.dtype, t.lib
        )
    new_total = product(tuple(new))
    cx.need(
        eq(total, new_total),
        "GPU013",
        f"cannot {what} {show_shape(t.shape)} ({show(total)} elements) as "
        f"{show_shape(tuple(new))} ({show(new_total)} elements)",
        (t.shape, tuple(new)),
    )
    return TensorV(tuple(new), t.dtype, t.lib)


def flatten(cx: Ctx, t: TensorV, start: Any, end: Any) -> Any:
    if t.shape is None:
        s, e = int_lit(start), int_lit(end)
        if s is not None and s >= 0 and e == -1:  # `flatten(1)`: rank start + 1
            head = tuple(cx.axis_size(t, k) for k in range(s))
            return TensorV((*head, None), t.dtype, t.lib)
        if s is not None and e == -1 and s < 0:  # `flatten(-2)`: the last -s axes merge
            last = cx.tail_of(t, -s)
            return TensorV(None, t.dtype, t.lib, (product(last),))
        return TensorV(None, t.dtype, t.lib)
    if not t.shape:
        return TensorV((const(1),), t.dtype, t.lib)
    s = axis(cx, start, len(t.shape), "flatten")
    e = axis(cx, end, len(t.shape), "flatten")
    if s is None or e is None:
        return TensorV(None, t.dtype, t.lib)
    if s > e:
        cx.fail("GPU014", "flatten's start_dim comes after its end_dim")
    merged = product(t.shape[s : e + 1])
    return TensorV((*t.shape[:s], merged, *t.shape[e + 1 :]), t.dtype, t.lib)


def permute(cx: Ctx, t: TensorV, dims: list[int | None] | None) -> Any:
    if t.shape is None and dims is not None and None not in dims:
        if t.max_rank is not None and len(dims) > t.max_rank:
            cx.fail(
                "GPU017",
                f"permute got {len(dims)} dims for a tensor of rank at most {t.max_rank} "
                f"({show_shape(t.tail, True)})",
            )
        if len(dims) < len(t.tail):  # the tail's axes are there whatever the rank is
            cx.fail(
                "GPU017",
                f"permute got {len(dims)} dims for a tensor of rank at least {len(t.tail)} "
                f"({show_shape(t.tail, True)})",
            )
        t = cx.refine(t, len(dims))  # permute names every axis: its length is the rank
    if t.shape is None or dims is None or None in dims:
        return TensorV(None, t.dtype, t.lib)
    r = len(t.shape)
    if len(dims) != r:
        cx.fail("GPU017", f"permute got {len(dims)} dims for a tensor of rank {r}")
    norm = [axis(cx, IntV(const(d)), r, "permute") for d in dims if d is not None]
    if sorted(n for n in norm if n is not None) != list(range(r)):
        cx.fail("GPU017", f"permute dims {tuple(dims)} are not a permutation")
    return TensorV(tuple(t.shape[n] for n in norm if n is not None), t.dtype, t.lib)


def transpose(cx: Ctx, t: TensorV, a: Any, b: Any) -> Any:
    if t.shape is None:
        i, j = int_lit(a), int_lit(b)
        if i is not None and j is not None and i >= 0 and j >= 0:
            # `transpose(1, 2)`: the rank is at least the tail's, so the tail's axes past
            # the first max(i, j) + 1 stay where they are whatever the rank is
            kept = t.tail[max(i, j) + 1 :]
            tail = (*[None] * (len(t.tail) - len(kept)), *kept) if kept else ()
            return TensorV(None, t.dtype, t.lib, tail, None, t.max_rank)
        if i is None or j is None or i >= 0 or j >= 0:
            return TensorV(None, t.dtype, t.lib)
        last = list(cx.tail_of(t, max(-i, -j)))  # `transpose(-2, -1)`: the last axes swap
        last[i], last[j] = last[j], last[i]
        return TensorV(None, t.dtype, t.lib, tuple(last))
    i, j = axis(cx, a, len(t.shape), "transpose"), axis(cx, b, len(t.shape), "transpose")
    if i is None or j is None:
        return TensorV(None, t.dtype, t.lib)
    shape = list(t.shape)
    shape[i], shape[j] = shape[j], shape[i]
    return TensorV(tuple(shape), t.dtype, t.lib)


def squeeze(cx: Ctx, t: TensorV, dim: Any) -> Any:
    if t.shape is None:
        return t
    if dim is None or isinstance(dim, NoneV):
        if any(literal(s) is None for s in t.shape):
            return TensorV(None, t.dtype, t.lib)
        return TensorV(tuple(s for s in t.shape if literal(s) != 1), t.dtype, t.lib)
    k = axis(cx, dim, len(t.shape), "squeeze")
    if k is None:
        return TensorV(None, t.dtype, t.lib)
    size = literal(t.shape[k])
    if size is None:
        return TensorV(None, t.dtype, t.lib)  # squeezes only when the size is 1
    if size != 1:
        if t.lib == "numpy":
            cx.fail("GPU014", f"cannot squeeze axis {k} of size {size}")
        return t
    return TensorV(t.shape[:k] + t.shape[k + 1 :], t.dtype, t.lib)


def unsqueeze(cx: Ctx, t: TensorV, dim: Any) -> Any:
    if t.shape is None:
        k = int_lit(dim)
        if k is not None and k < 0:  # `unsqueeze(-1)`: a size 1 among the last axes
            last = list(cx.tail_of(t, -k - 1))
            last.insert(len(last) + k + 1, const(1))
            return TensorV(None, t.dtype, t.lib, tuple(last))
        return TensorV(None, t.dtype, t.lib)
    k = axis(cx, dim, len(t.shape) + 1, "unsqueeze")
    if k is None:
        return TensorV(None, t.dtype, t.lib)
    return TensorV(t.shape[:k] + (const(1),) + t.shape[k:], t.dtype, t.lib)


def expand(cx: Ctx, t: TensorV, new: list[Size] | None) -> Any:
    if t.shape is None or new is None:
        return TensorV(None, t.dtype, t.lib)
    if len(new) < len(t.shape):
        cx.fail("GPU010", f"expand to {len(new)} sizes from a tensor of rank {len(t.shape)}")
    out: list[Size] = []
    lead = len(new) - len(t.shape)
    for i, s in enumerate(new):
        if i < lead:
            out.append(s)
            continue
        old = t.shape[i - lead]
        if literal(s) == -1:
            out.append(old)
            continue
        cond = any_(eq(old, s), eq(old, const(1)))
        message = (
            f"cannot expand {show_shape(t.shape)} to ({', '.join(show(x) for x in new)}): "
            f"size {show(old)} is neither {show(s)} nor 1"
        )
        if cond is not True and old is not None and s is not None:
            cx.refuse_coincidence(old, s, "GPU010", message, one_side=True)
        cx.need(cond, "GPU010", message)
        out.append(s)
    return TensorV(tuple(out), t.dtype, t.lib)


def repeat(cx: Ctx, t: TensorV, reps: list[Size] | None) -> Any:
    if t.shape is None or reps is None:
        return TensorV(None, t.dtype, t.lib)
    if len(reps) < len(t.shape):
        cx.fail("GPU036", "repeat needs at least one count per dimension")
    lead = len(reps) - len(t.shape)
    shape = tuple(r if i < lead else arith("*", t.shape[i - lead], r) for i, r in enumerate(reps))
    return TensorV(shape, t.dtype, t.lib)


def cat(cx: Ctx, tensors: Any, dim: Any, stack: bool, what: str) -> Any:
    if not isinstance(tensors, TupleV) or not tensors.items:
        return UNKNOWN
    items = [tensor(x) for x in tensors.items]
    if any(x is None for x in items):
        return UNKNOWN
    ranks = {len(x.shape) for x in items if x is not None and x.shape is not None}
    if len(ranks) == 1:  # every tensor joined has one rank: those of unknown rank too
        rank = next(iter(ranks)) + (0 if not stack else 0)
        items = [
            cx.refine(x, rank) if x is not None and x.shape is None and len(x.tail) <= rank else x
            for x in items
        ]
    known = [x for x in items if x is not None and x.shape is not None]
    lib = items[0].lib if items[0] else "torch"
    dtype = items[0].dtype if all(x and x.dtype == items[0].dtype for x in items) else None
    if len(known) != len(items):
        return TensorV(None, dtype, lib)
    first = known[0]
    assert first.shape is not None
    rank = len(first.shape)
    d = axis(cx, dim if dim is not None else IntV(const(0)), rank + (1 if stack else 0), what)
    for k, x in enumerate(known[1:], start=1):
        assert x.shape is not None
        if len(x.shape) != rank:
            cx.fail(
                "GPU103",
                f"`{what}` got tensors of rank {rank} and {len(x.shape)} "
                f"(tensor 0 is {show_shape(first.shape)}, tensor {k} is {show_shape(x.shape)})",
            )
        for i, (a, b) in enumerate(zip(first.shape, x.shape, strict=True)):
            if d is None or (i == d and not stack):
                continue
            cx.need(
                eq(a, b),
                "GPU103",
                f"`{what}` on dim {d}: tensor 0 is {show_shape(first.shape)}, tensor {k} is "
                f"{show_shape(x.shape)}; they differ in dim {i} ({show(a)} vs {show(b)})",
            )
    if d is None:
        return TensorV(None, dtype, lib)
    if stack:
        shape = (*first.shape[:d], const(len(known)), *first.shape[d:])
    else:
        total: Size = const(0)
        for x in known:
            assert x.shape is not None
            total = arith("+", total, x.shape[d])
        shape = (*first.shape[:d], total, *first.shape[d + 1 :])
    return TensorV(tuple(shape), dtype, lib)


def split(cx: Ctx, t: TensorV, size: Any, dim: Any, chunks: bool) -> Any:
    """`split(size, dim)`, `split([a, b], dim)`, `chunk(n, dim)`: a tuple of the pieces."""
    d_lit = int_lit(dim if dim is not None else IntV(const(0)))
    if d_lit is None:
        return UNKNOWN
    if t.shape is None:
        if d_lit >= 0:
            return UNKNOWN
        last = list(cx.tail_of(t, -d_lit))
        n_sym = last[d_lit]

        def piece(p: Size) -> TensorV:
            return TensorV(None, t.dtype, t.lib, (*last[:d_lit], p, *last[len(last) + d_lit + 1 :]))

    else:
        d = axis(cx, IntV(const(d_lit)), len(t.shape), "split")
        if d is None:
            return UNKNOWN
        n_sym = t.shape[d]
        shape = t.shape

        def piece(p: Size) -> TensorV:
            return t.with_shape((*shape[:d], p, *shape[d + 1 :]))

    if isinstance(size, TupleV):  # explicit sizes must add up to the dim
        parts = [size_of(x) for x in size.items]
        total: Size = const(0)
        for p in parts:
            total = arith("+", total, p)
        cx.need(
            eq(total, n_sym),
            "GPU013",
            f"split sizes ({', '.join(show(p) for p in parts)}) add up to {show(total)}, "
            f"but dim {d_lit} has size {show(n_sym)}",
        )
        return TupleV(tuple(piece(p) for p in parts))
    k_sym = size_of(size)
    k = int_lit(size)
    n = literal(n_sym)
    if n is not None and k is not None and k > 0:
        if chunks:
            step = -(-n // k)
            parts_n = [min(step, n - i) for i in range(0, n, step)] if step else []
        else:
            parts_n = [min(k, n - i) for i in range(0, n, k)]
        return TupleV(tuple(piece(const(p)) for p in parts_n))
    if n_sym is None or k_sym is None:
        return UNKNOWN
    # symbolic: exact when the size is a literal multiple of the piece (`3 * d` by `d`)
    if chunks and k is not None and k > 0:
        q = _quotient(n_sym, k)
        if q is None and cx.holds_always(eq(arith("%", n_sym, const(k)), const(0))):
            q = arith("//", n_sym, const(k))  # `assert hidden % 2 == 0`, then `chunk(2)`
        if q is not None:
            return TupleV(tuple(piece(q) for _ in range(k)))
        # chunks of ceil(n / k): k of them unless n is small (`chunk(3)` of 2 makes 2)
        step = arith("//", arith("+", n_sym, const(k - 1)), const(k))
        if k > 1 and cx.holds_always(
            le(arith("*", const(k - 1), step), arith("-", n_sym, const(1)))
        ):
            last = arith("-", n_sym, arith("*", const(k - 1), step))
            return TupleV((*(piece(step) for _ in range(k - 1)), piece(last)))
        return UNKNOWN
    count = _multiple(n_sym, k_sym)
    return UNKNOWN if count is None else TupleV(tuple(piece(k_sym) for _ in range(count)))


def _multiple(n: Sym, k: Sym, most: int = 16) -> int | None:
    """The literal c with n == c * k for every size, if there is one."""
    for c in range(1, most + 1):
        if z3.is_true(z3.simplify(n.term - c * k.term == 0)):
            return c
    return None


def _quotient(n: Sym, c: int) -> Size:
    """n // c when n is a literal multiple of c for every size (`3 * d` in 3 chunks: `d`)."""
    q = arith("//", n, const(c))
    if q is not None and z3.is_true(z3.simplify(q.term * c - n.term == 0)):
        return q
    return None


def narrow(cx: Ctx, t: TensorV, dim: Any, start: Any, length: Any) -> Any:
    """`t.narrow(dim, start, length)`: `length` items from `start`, which must fit."""
    if t.shape is None:
        return TensorV(None, t.dtype, t.lib)
    d = axis(cx, dim, len(t.shape), "narrow")
    a, n = size_of(start), size_of(length)
    if d is None:
        return TensorV(None, t.dtype, t.lib)
    size = t.shape[d]
    if a is not None and a.value is not None and a.value < 0:
        a = arith("+", size, a)  # a negative start counts from the end
    cx.need(
        le(arith("+", a, n), size),
        "GPU018",
        f"`narrow({d}, {show(a)}, {show(n)})` reaches past dim {d} of size {show(size)}",
        (t.shape,),
    )
    shape = list(t.shape)
    shape[d] = n
    return TensorV(tuple(shape), t.dtype, t.lib)


def topk(cx: Ctx, t: TensorV, k: Any, dim: Any) -> Any:
    """`torch.topk(t, k, dim)`: the `k` largest (or smallest) along `dim`, and their
    positions; `k` must be at most the size of `dim` ("selected index k out of range")."""
    n = size_of(k)
    if t.shape is None:
        return TupleV((TensorV(None, t.dtype, t.lib), TensorV(None, "int64", t.lib)))
    d = axis(cx, dim, len(t.shape), "topk")
    if d is None or not t.shape:
        return TupleV((TensorV(None, t.dtype, t.lib), TensorV(None, "int64", t.lib)))
    cx.need(
        le(n, t.shape[d]),
        "GPU018",
        f"`topk` takes k={show(n)} along dim {d} of size {show(t.shape[d])}",
        (t.shape,),
    )
    shape = list(t.shape)
    shape[d] = n
    values = TensorV(tuple(shape), t.dtype, t.lib)
    return TupleV((values, values.with_dtype("int64")))


def gather(cx: Ctx, t: TensorV, dim: Any, index: Any) -> Any:
    """`torch.gather(t, dim, index)`: shaped as `index`, of `t`'s rank, and no larger
    than `t` on every other axis."""
    idx = tensor(index)
    if idx is None or idx.shape is None:
        return TensorV(None, t.dtype, t.lib)
    if t.shape is None:
        return TensorV(idx.shape, t.dtype, t.lib)
    d = axis(cx, dim, len(t.shape), "gather")
    if len(idx.shape) != len(t.shape):
        cx.fail(
            "GPU013",
            f"`gather` needs an index of the input's rank {len(t.shape)}, got rank "
            f"{len(idx.shape)}",
        )
        return TensorV(idx.shape, t.dtype, t.lib)
    for a, (n, m) in enumerate(zip(idx.shape, t.shape, strict=True)):
        if a != d:
            cx.need(
                le(n, m),
                "GPU018",
                f"`gather` index has size {show(n)} on dim {a}, where the input has {show(m)}",
                (t.shape, idx.shape),
            )
    return TensorV(idx.shape, t.dtype, t.lib)


def unbind(cx: Ctx, t: TensorV, dim: Any) -> Any:
    """`t.unbind(dim)`: a tuple of one tensor per index along `dim`."""
    d_lit = int_lit(dim if dim is not None else IntV(const(0)))
    if d_lit is None:
        return UNKNOWN
    if t.shape is None:
        if d_lit >= 0:
            return UNKNOWN
        last = list(cx.tail_of(t, -d_lit))
        count = literal(last[d_lit])
        rest = (*last[:d_lit], *last[len(last) + d_lit + 1 :])
        item = TensorV(None, t.dtype, t.lib, rest)
    else:
        d = axis(cx, IntV(const(d_lit)), len(t.shape), "unbind")
        if d is None:
            return UNKNOWN
        count = literal(t.shape[d])
        item = t.with_shape((*t.shape[:d], *t.shape[d + 1 :]))
    if count is None or count > 64:
        return UNKNOWN
    return TupleV((item,) * count)


# ---------------------------------------------------------------- indexing


def subscript(cx: Ctx, t: TensorV, index: Any) -> Any:
    """`t[index]` with PyTorch/NumPy semantics: slices clamp, an int out of range raises."""
    if t.shape is None:
        return TensorV(None, t.dtype, t.lib)
    items = list(index.items) if isinstance(index, TupleV) and not index.is_list else [index]
    if any(isinstance(i, TensorV) or isinstance(i, TupleV) for i in items):
        if len(items) == 1 and isinstance(items[0], TensorV):  # gather by an index tensor
            idx = items[0]
            if idx.dtype == "bool" or idx.shape is None:
                return TensorV(None, t.dtype, t.lib)
            if is_int(idx.dtype) and t.shape:
                return TensorV((*idx.shape, *t.shape[1:]), t.dtype, t.lib)
        return TensorV(None, t.dtype, t.lib)
    if not all(isinstance(i, (IntV, SliceV, NoneV, EllipsisV)) for i in items):
        return TensorV(None, t.dtype, t.lib)  # a field name, a bool, something unknown
    consumed = sum(1 for i in items if not isinstance(i, (NoneV, EllipsisV)))
    if consumed > len(t.shape):
        cx.fail(
            "GPU019",
            f"too many indices: {consumed} for a tensor of rank {len(t.shape)}",
        )
    out: list[Size] = []
    ax = 0
    expanded: list[Any] = []
    for i in items:
        if isinstance(i, EllipsisV):
            expanded.extend([SliceV(None, None, None)] * (len(t.shape) - consumed))
        else:
            expanded.append(i)
    for i in expanded:
        if isinstance(i, NoneV):
            out.append(const(1))
            continue
        size = t.shape[ax]
        if isinstance(i, IntV):
            k = literal(i.sym)
            if k is not None:
                cond = le(const(-k), size) if k < 0 else le(const(k + 1), size)
                cx.need(
                    cond,
                    "GPU018",
                    f"index {k} is out of bounds for dim {ax} with size {show(size)}",
                )
            elif i.sym is not None:
                cx.need(
                    le(arith("+", i.sym, const(1)), size),
                    "GPU018",
                    f"index {show(i.sym)} is out of bounds for dim {ax} with size {show(size)}",
                )
        elif isinstance(i, SliceV):
            out.append(_slice_len(i, size, cx))
        else:
            return TensorV(None, t.dtype, t.lib)
        ax += 1
    out.extend(t.shape[ax:])
    return TensorV(tuple(out), t.dtype, t.lib)


def _slice_len(s: Any, size: Size, cx: Ctx | None = None) -> Size:
    if UNREADABLE in (s.start, s.stop, s.step):
        return None
    if cx is not None and size is not None and (s.step is None or literal(s.step) == 1):
        clamped = _clamped_len(cx, s.start, s.stop, size)
        if clamped is not None:
            return clamped
    if s.step is not None and literal(s.step) != 1:
        return None
    start, stop = s.start, s.stop
    lo, hi = literal(start), literal(stop)
    if start is None and stop is None:
        return size
    n = literal(size)
    if n is not None:  # clamp as Python does
        a = 0 if start is None else lo
        b = n if stop is None else hi
        if a is None or b is None:
            return None
        a = max(0, a + n if a < 0 else a)
        b = min(n, b + n if b < 0 else b)
        return const(max(0, min(b, n) - min(a, n)))
    if start is None and hi is not None and hi < 0:
        return arith("-", size, const(-hi))  # `x[:-1]`: valid when size >= 1 - hi
    if stop is None and lo is not None and lo >= 0:
        return arith("-", size, const(lo)) if lo else size
    return None


def _clamped_len(cx: Ctx, start: Size, stop: Size, size: Sym) -> Size:
    """`x[a:b]` with sizes that are symbolic but not negative: Python clamps to the size."""
    if literal(size) is not None and literal(start) is not None and literal(stop) is not None:
        return None  # the literal rule above handles it
    if (start is not None and start.value is None and not cx.nonnegative(start)) or (
        stop is not None and stop.value is None and not cx.nonnegative(stop)
    ):
        return None
    if (start is not None and start.value is not None and start.value < 0) or (
        stop is not None and stop.value is not None and stop.value < 0
    ):
        return None
    hi = size if stop is None else _min(stop, size)
    if start is None or start.value == 0:
        return hi
    lo = _min(start, size)
    diff = z3.simplify(hi.term - lo.term)
    return Sym(z3.If(diff >= 0, diff, 0), f"{hi.text} - {lo.text}", prec=1)


def _min(a: Sym, b: Sym) -> Sym:
    if a.value is not None and b.value is not None:
        return const(min(a.value, b.value))
    if z3.is_true(z3.simplify(a.term <= b.term)):
        return a
    if z3.is_true(z3.simplify(b.term <= a.term)):
        return b
    return Sym(z3.If(a.term <= b.term, a.term, b.term), f"min({a.text}, {b.text})")


class EllipsisV:
    """`...` in an index."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EllipsisV)

    def __hash__(self) -> int:
        return 0


UNREADABLE = "?"  # a slice bound that is written but cannot be known


class SliceV:
    def __init__(self, start: Size, stop: Size, step: Size) -> None:
        self.start, self.stop, self.step = start, stop, step


# ---------------------------------------------------------------- creation


def creation(cx: Ctx, args: list, kwargs: dict, lib: str, fill: int = 0) -> Any:
    """`zeros(2, 3)`, `zeros((2, 3))`, `full((2, 3), v)`, `randint(lo, hi, (2, 3))`."""
    sizes = sizes_arg(args[: len(args) - fill] if fill else args)
    if "size" in kwargs and isinstance(kwargs["size"], TupleV):
        sizes = sizes_arg([kwargs["size"]])
    if "shape" in kwargs:
        sizes = sizes_arg([kwargs["shape"]])
    dtype = dtype_arg(kwargs.get("dtype")) or default_float(lib)
    if sizes is None:
        return TensorV(None, dtype, lib)
    for s in sizes:
        k = literal(s)
        if k is not None and k < 0:
            cx.fail("GPU025", f"negative size {k} in a tensor shape")
    return TensorV(tuple(sizes), dtype, lib)


def from_data(data: Any, lib: str, dtype: str | None) -> Any:
    """`torch.tensor([[1, 2], [3, 4]])`: the shape of a nested literal list."""
    shape: list[Size] = []
    kinds: set[str] = set()
    v = data
    while isinstance(v, TupleV):
        shape.append(const(len(v.items)))
        if not v.items:
            break
        v = v.items[0]
    for x in _leaves(data):
        kinds.add("f" if isinstance(x, FloatV) else "i" if isinstance(x, IntV) else "?")
    if isinstance(data, TensorV):
        return TensorV(data.shape, dtype or data.dtype, lib)
    if not isinstance(data, (TupleV, IntV, FloatV)) or "?" in kinds:
        return TensorV(None, dtype, lib)
    if dtype is None and lib == "mimir":
        dtype = "float32"  # mimir.array.tensor(data, dtype=float32), int literals or not
    if dtype is None:
        dtype = default_float(lib) if "f" in kinds else "int64"
    return TensorV(tuple(shape), dtype, lib)


def _leaves(v: Any) -> list[Any]:
    if isinstance(v, TupleV):
        return [leaf for x in v.items for leaf in _leaves(x)]
    return [v]


def arange(args: list, kwargs: dict, lib: str) -> Any:
    nums = [size_of(a) if isinstance(a, IntV) else None for a in args]
    floats = any(isinstance(a, FloatV) for a in args)
    dtype = dtype_arg(kwargs.get("dtype")) or (default_float(lib) if floats else "int64")
    if floats or None in nums or not nums:
        return TensorV((None,), dtype, lib)
    if len(nums) == 1:
        return TensorV((nums[0],), dtype, lib)
    if len(nums) == 2:
        return TensorV((arith("-", nums[1], nums[0]),), dtype, lib)
    step = literal(nums[2])
    if step is not None and step > 0:  # ceil((end - start) / step)
        span = arith("-", nums[1], nums[0])
        return TensorV((arith("//", arith("+", span, const(step - 1)), const(step)),), dtype, lib)
    return TensorV((None,), dtype, lib)


def device_of(v: Any) -> DeviceV | None:
    if isinstance(v, DeviceV):
        return v
    if isinstance(v, StrV):
        return DeviceV("cuda" if v.value.startswith("cuda") else v.value)
    return None
