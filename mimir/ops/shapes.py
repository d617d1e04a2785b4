"""Shape rules, written once over an abstract size algebra.

Every rule takes an `Algebra` and the operands' shapes and returns the output
shape. It states each requirement as `alg.require(condition, code, message, *sizes)`
and each impossibility (a rank or a literal that is wrong on its own) as
`alg.fail(code, message, ...)`. Two algebras run the same rules:

- `IntAlgebra` (here): sizes are ints; a false requirement raises `RuleError`
  at once. The shim uses it at run time.
- the checker's Z3 algebra (`mimir.constraints.algebra`): sizes are Z3 terms
  paired with their source text; a requirement becomes a tracked obligation that
  must hold for every admissible size.

Ranks, axes, permutations and literal indices are always concrete Python ints.

A size a user wrote as an int literal (`x[:, -1]`, `reshape(-1, 4)`) and a size
expression (`N - 3`, `x.shape[0] - 1`) can have the same value and still mean
different things: a negative literal counts from the end (or infers a reshape
size), an expression never does and must be `>= 0`. `alg.is_literal` tells them
apart: the checker from the source, the shim from `mimir.dims.SizeInt`.
Message templates use `{}` for sizes (shown by `alg.show`) and `{!s}` style
placeholders are never used: plain values are formatted with `str`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NoReturn, Protocol

from mimir.dims import SizeInt

Shape = tuple[Any, ...]


class RuleError(Exception):
    """alg shape or dtype rule failed; carries the diagnostic code and message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class Algebra(Protocol):
    """What a shape rule needs from a size domain (ints or Z3 terms)."""

    def eq(self, a: Any, b: Any) -> Any: ...

    def le(self, a: Any, b: Any) -> Any: ...

    def any_(self, *conds: Any) -> Any: ...

    def select(self, cond: Any, a: Any, b: Any) -> Any: ...

    def literal(self, a: Any) -> int | None:
        """The int a size is known to be without solving, or None."""
        ...

    def is_literal(self, a: Any) -> bool:
        """Whether a size was written as an int literal (not computed from dims or shapes)."""
        ...

    def require(self, cond: Any, code: str, message: str, *args: Any) -> None: ...

    def fail(self, code: str, message: str, *args: Any) -> NoReturn: ...

    def show(self, a: Any) -> str: ...


class IntAlgebra:
    """Concrete sizes: requirements are checked immediately."""

    def eq(self, a: int, b: int) -> bool:
        return a == b

    def le(self, a: int, b: int) -> bool:
        return a <= b

    def any_(self, *conds: bool) -> bool:
        return any(conds)

    def select(self, cond: bool, a: int, b: int) -> int:
        return a if cond else b

    def literal(self, a: int) -> int:
        return a

    def is_literal(self, a: int) -> bool:
        return not isinstance(a, SizeInt)

    def require(self, cond: bool, code: str, message: str, *args: Any) -> None:
        if not cond:
            self.fail(code, message, *args)

    def fail(self, code: str, message: str, *args: Any) -> NoReturn:
        raise RuleError(code, message.format(*(self.show(a) for a in args)))

    def show(self, a: Any) -> str:
        if isinstance(a, (tuple, list)):
            return "[" + ", ".join(self.show(x) for x in a) + "]"
        return str(a)


INT_ALGEBRA = IntAlgebra()


def product(alg: Algebra, sizes: Sequence[Any]) -> Any:
    total: Any = 1
    for s in sizes:
        total = total * s if alg.literal(total) != 1 else s
    return total


def normalize_axis(alg: Algebra, axis: int, rank: int, what: str) -> int:
    if not -rank <= axis < rank:
        alg.fail(
            "GPU014",
            f"axis {axis} is out of range for `{what}` on a tensor of rank {rank}",
        )
    return axis % rank


# ---------------------------------------------------------------- broadcasting


def broadcast(alg: Algebra, *shapes: Shape) -> Shape:
    """NumPy broadcasting of any number of shapes."""
    shapes = tuple(s for s in shapes if s is not None)
    if not shapes:
        return ()
    rank = max(len(s) for s in shapes)
    out: list[Any] = []
    for i in range(rank, 0, -1):
        size: Any = None
        for shape in shapes:
            if len(shape) < i:
                continue
            other = shape[-i]
            size = other if size is None else _broadcast_pair(alg, size, other, shapes)
        out.append(size)
    return tuple(out)


def _broadcast_pair(alg: Algebra, a: Any, b: Any, shapes: Sequence[Shape]) -> Any:
    la, lb = alg.literal(a), alg.literal(b)
    if la == 1:
        return b
    if lb == 1:
        return a
    if la is not None and la == lb:
        return a
    alg.require(
        alg.any_(alg.eq(a, b), alg.eq(a, 1), alg.eq(b, 1)),
        "GPU010",
        "shapes " + " and ".join("{}" for _ in shapes) + " cannot broadcast: {} vs {}",
        *shapes,
        a,
        b,
    )
    return alg.select(alg.eq(a, 1), b, a)


# ---------------------------------------------------------------- linear algebra


def matmul(alg: Algebra, left: Shape, right: Shape) -> Shape:
    if len(left) < 2 or len(right) < 2:
        side, shape = ("left", left) if len(left) < 2 else ("right", right)
        alg.fail(
            "GPU012",
            f"matmul needs operands of rank 2 or more: {side} has rank {len(shape)}",
        )
    alg.require(
        alg.eq(left[-1], right[-2]),
        "GPU011",
        "matmul shape mismatch: left has K={}, right has K={}",
        left[-1],
        right[-2],
    )
    batch = broadcast(alg, left[:-2], right[:-2])
    return (*batch, left[-2], right[-1])


# ---------------------------------------------------------------- reductions


# Ops with no value over an empty axis (GPU024): the max of nothing, the mean 0 / 0, a
# softmax normalised by a zero sum. `sum` is 0 there, like NumPy's.
EMPTY_AXIS_UNDEFINED = ("max", "min", "mean", "softmax", "log_softmax")


def _require_nonempty(alg: Algebra, size: Any, axis: int, what: str) -> None:
    alg.require(
        alg.le(1, size),
        "GPU024",
        f"`{what}` over an empty axis: axis {axis} has size {{}}",
        size,
    )


def reduce_axes(alg: Algebra, rank: int, axis: Any, what: str) -> tuple[int, ...]:
    """Normalise `axis=None | int | tuple[int, ...]` to sorted distinct axes."""
    if axis is None:
        return tuple(range(rank))
    items = axis if isinstance(axis, tuple) else (axis,)
    axes = [normalize_axis(alg, a, rank, what) for a in items]
    if len(set(axes)) != len(axes):
        alg.fail("GPU014", f"`{what}` got a repeated axis in {axis}")
    return tuple(sorted(axes))


def reduction(alg: Algebra, shape: Shape, axis: Any, keepdims: bool, what: str) -> Shape:
    axes = reduce_axes(alg, len(shape), axis, what)
    if what in EMPTY_AXIS_UNDEFINED:
        for a in axes:
            _require_nonempty(alg, shape[a], a, what)
    if keepdims:
        return tuple(1 if i in axes else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in axes)


def along_axis(alg: Algebra, shape: Shape, axis: int, what: str) -> Shape:
    if not shape:
        alg.fail("GPU014", f"`{what}` needs a tensor of rank 1 or more, got a scalar")
    a = normalize_axis(alg, axis, len(shape), what)
    if what in EMPTY_AXIS_UNDEFINED:
        _require_nonempty(alg, shape[a], a, what)
    return tuple(shape)


def topk(alg: Algebra, shape: Shape, k: Any, axis: int, what: str = "topk") -> Shape:
    """`topk(x, k, axis)`: the shape with `axis` cut to k, which must be 1 to its size."""
    if not shape:
        alg.fail("GPU014", f"`{what}` needs a tensor of rank 1 or more, got a scalar")
    a = normalize_axis(alg, axis, len(shape), what)
    alg.require(alg.le(1, k), "GPU018", f"`{what}` takes k of at least 1, got k={{}}", k)
    alg.require(
        alg.le(k, shape[a]),
        "GPU018",
        f"`{what}` takes k={{}} of at most the size of axis {a}, {{}}",
        k,
        shape[a],
    )
    return (*shape[:a], k, *shape[a + 1 :])


def scan(alg: Algebra, shape: Shape, axis: int | None, what: str) -> Shape:
    """`cumsum`/`cumprod`: the input's shape along an axis; `axis=None` scans the
    flattened tensor (NumPy), a rank-1 result of every element."""
    if axis is None:
        return (product(alg, shape),)
    return along_axis(alg, shape, axis, what)


# ---------------------------------------------------------------- layout


def reshape(alg: Algebra, shape: Shape, new: Sequence[Any]) -> Shape:
    unknown = [i for i, s in enumerate(new) if alg.is_literal(s) and alg.literal(s) == -1]
    if len(unknown) > 1:
        alg.fail("GPU013", "reshape can infer at most one dimension, got several -1")
    for s in new:
        lit = alg.literal(s)
        if not alg.is_literal(s):
            # A size expression never means "infer": `reshape(N - 2, -1)` at N=1 is an error.
            alg.require(alg.le(0, s), "GPU013", "reshape size {} may be negative", s)
        elif lit is not None and lit < -1:
            alg.fail("GPU013", f"reshape got a negative size {lit}")
    total = product(alg, shape)
    if unknown:
        known = product(alg, [s for i, s in enumerate(new) if i not in unknown])
        # NumPy cannot infer a size beside others whose product is 0 (0 / 0); neither can we.
        alg.require(
            alg.le(1, known),
            "GPU013",
            "cannot reshape {} into {}: the sizes beside -1 may multiply to 0",
            tuple(shape),
            tuple(new),
        )
        alg.require(
            alg.eq(total % known, 0),
            "GPU013",
            "cannot reshape {} ({} elements) into {}",
            tuple(shape),
            total,
            tuple(new),
        )
        inferred = total // known
        return tuple(inferred if i in unknown else s for i, s in enumerate(new))
    alg.require(
        alg.eq(total, product(alg, new)),
        "GPU013",
        "cannot reshape {} ({} elements) into {} ({} elements)",
        tuple(shape),
        total,
        tuple(new),
        product(alg, new),
    )
    return tuple(new)


def transpose(alg: Algebra, shape: Shape, axes: Sequence[int] | None) -> Shape:
    rank = len(shape)
    if axes is None:
        return tuple(reversed(shape))
    if len(axes) != rank:
        alg.fail(
            "GPU017",
            f"transpose axes {tuple(axes)} do not match a tensor of rank {rank}",
        )
    norm = [normalize_axis(alg, a, rank, "transpose") for a in axes]
    if sorted(norm) != list(range(rank)):
        alg.fail("GPU017", f"transpose axes {tuple(axes)} are not a permutation")
    return tuple(shape[a] for a in norm)


def permutation(rank: int, axes: Sequence[int] | None) -> tuple[int, ...]:
    """The normalised permutation `transpose(axes)` applies (after its rule passed)."""
    if axes is None:
        return tuple(reversed(range(rank)))
    return tuple(a % rank for a in axes)


# ---------------------------------------------------------------- indexing

# An index item is one of:
#   ("slice", start, stop)   start/stop: a size, a negative int literal, or None
#   ("int", index)           index: a size or a negative int literal
#   ("newaxis",)
#   ("ellipsis",)


def expand_index(alg: Algebra, rank: int, items: Sequence[tuple]) -> list[tuple]:
    """Replace `...` by full slices and check the index count."""
    consumed = sum(1 for it in items if it[0] in ("slice", "int"))
    ellipses = sum(1 for it in items if it[0] == "ellipsis")
    if ellipses > 1:
        alg.fail("GPU019", "an index can only have a single ellipsis (`...`)")
    if consumed > rank:
        alg.fail(
            "GPU019",
            f"too many indices: {consumed} for a tensor of rank {rank}",
        )
    out: list[tuple] = []
    for it in items:
        if it[0] == "ellipsis":
            out.extend([("slice", None, None)] * (rank - consumed))
        else:
            out.append(it)
    used = sum(1 for it in out if it[0] in ("slice", "int"))
    out.extend([("slice", None, None)] * (rank - used))
    return out


def resolve_bound(alg: Algebra, bound: Any, size: Any, axis: int, what: str) -> Any:
    """A slice bound or index made non-negative, with its range obligation.

    A negative int literal counts from the end, as in NumPy; a size expression must be
    `>= 0` for every size, so that its meaning never changes with the size.
    """
    if not alg.is_literal(bound):
        alg.require(
            alg.le(0, bound),
            "GPU018",
            f"{what} {{}} may be negative on axis {axis} (a size expression never counts "
            "from the end)",
            bound,
        )
        return bound
    lit = alg.literal(bound)
    if lit is not None and lit < 0:
        alg.require(
            alg.le(-lit, size),
            "GPU018",
            f"{what} {lit} is out of bounds for axis {axis} with size {{}}",
            size,
        )
        return size + lit
    return bound


def index(alg: Algebra, shape: Shape, items: Sequence[tuple]) -> tuple[Shape, list[tuple]]:
    """Output shape of `x[items]`, and the resolved items (non-negative bounds).

    Unlike NumPy, which clamps slice bounds silently, a bound past the end of
    its axis is an error: in a kernel it is nearly always an off-by-one.
    """
    items = expand_index(alg, len(shape), items)
    out: list[Any] = []
    resolved: list[tuple] = []
    axis = 0
    for it in items:
        if it[0] == "newaxis":
            out.append(1)
            resolved.append(it)
            continue
        size = shape[axis]
        if it[0] == "int":
            i = resolve_bound(alg, it[1], size, axis, "index")
            alg.require(
                alg.le(i + 1, size),
                "GPU018",
                f"index {{}} is out of bounds for axis {axis} with size {{}}",
                it[1],
                size,
            )
            resolved.append(("int", i))
        else:
            start = 0 if it[1] is None else resolve_bound(alg, it[1], size, axis, "slice start")
            stop = size if it[2] is None else resolve_bound(alg, it[2], size, axis, "slice stop")
            if it[2] is not None:
                alg.require(
                    alg.le(stop, size),
                    "GPU018",
                    f"slice stop {{}} is out of bounds for axis {axis} with size {{}}",
                    it[2],
                    size,
                )
            alg.require(
                alg.le(start, stop),
                "GPU018",
                f"slice start {{}} is past its stop {{}} on axis {axis}",
                start,
                stop,
            )
            out.append(stop - start if alg.literal(start) != 0 else stop)
            resolved.append(("slice", start, stop))
        axis += 1
    return tuple(out), resolved


# ---------------------------------------------------------------- creation


def creation(alg: Algebra, shape: Sequence[Any]) -> Shape:
    for s in shape:
        lit = alg.literal(s)
        if not alg.is_literal(s):
            alg.require(alg.le(0, s), "GPU025", "the size {} in a tensor shape may be negative", s)
        elif lit is not None and lit < 0:
            alg.fail("GPU025", f"negative size {lit} in a tensor shape")
    return tuple(shape)


def arange(alg: Algebra, n: Any) -> Shape:
    """`arange(n)`: the ints 0..n-1, so `n` must not be negative."""
    return creation(alg, (n,))


# ---------------------------------------------------------------- masks, joins, statistics


def triangle(alg: Algebra, shape: Shape, what: str) -> Shape:
    """`tril` / `triu`: NumPy masks the last two axes, so the tensor needs two."""
    if len(shape) < 2:
        alg.fail("GPU014", f"`{what}` needs a tensor of rank 2 or more, got rank {len(shape)}")
    return tuple(shape)


def join(alg: Algebra, shapes: Sequence[Shape], axis: int, stack: bool) -> Shape:
    """`concatenate` (sizes along `axis` add up) or `stack` (a new axis of len(shapes)).

    Every other axis must have equal sizes for all admissible dims (GPU023); no
    broadcasting, as in NumPy.
    """
    what = "stack" if stack else "concatenate"
    if not shapes:
        alg.fail("GPU036", f"`{what}` needs at least one tensor")
    rank = len(shapes[0])
    for k, s in enumerate(shapes[1:], start=1):
        if len(s) != rank:
            alg.fail(
                "GPU023",
                f"`{what}` got tensors of rank {rank} and {len(s)} (tensor {k})",
            )
    if not stack and rank == 0:
        alg.fail("GPU014", "`concatenate` needs tensors of rank 1 or more, got scalars")
    a = normalize_axis(alg, axis, rank + 1 if stack else rank, what)
    first = shapes[0]
    for k, s in enumerate(shapes[1:], start=1):
        for i in range(rank):
            if i == a and not stack:
                continue
            alg.require(
                alg.eq(first[i], s[i]),
                "GPU023",
                f"`{what}` shape mismatch on axis {i}: tensor 0 has {{}}, tensor {k} has {{}}",
                first[i],
                s[i],
            )
    if stack:
        return (*first[:a], len(shapes), *first[a:])
    total: Any = first[a]
    for s in shapes[1:]:
        total = total + s[a]
    return (*first[:a], total, *first[a + 1 :])


def argreduction(alg: Algebra, shape: Shape, axis: int | None, keepdims: bool, what: str) -> Shape:
    """`argmax` / `argmin`: one axis or all (the flat index), never an empty one."""
    axes = reduce_axes(alg, len(shape), axis, what)
    for a in axes:
        _require_nonempty(alg, shape[a], a, what)
    if keepdims:
        return tuple(1 if i in axes else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in axes)


def moments(alg: Algebra, shape: Shape, axis: Any, ddof: int, keepdims: bool, what: str) -> Shape:
    """`var` / `std`: divides by count - ddof, which must be positive (GPU024)."""
    if ddof < 0:
        alg.fail("GPU036", f"`ddof` of `{what}` must be 0 or more, got {ddof}")
    axes = reduce_axes(alg, len(shape), axis, what)
    count = product(alg, [shape[a] for a in axes])
    alg.require(
        alg.le(ddof + 1, count),
        "GPU024",
        f"`{what}` with ddof={ddof} over {{}} elements: the count must be more than ddof",
        count,
    )
    if keepdims:
        return tuple(1 if i in axes else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in axes)
