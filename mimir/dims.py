"""Symbolic sizes: `Dim` and arithmetic on dims.

A `Dim` is a named size with optional constraints (`min`, `max`, `multiple_of`).
Arithmetic on dims (`N + 1`, `2 * N`, `N // 4`, `N % 3`) builds a `DimExpr`
tree that prints as the user wrote it and evaluates against a binding of dim
names to ints. This module is stdlib-only: the shim imports it at run time and
the checker translates the same trees into Z3 terms.

Division and modulo are Python's floor semantics; every size is a positive
integer, and a divisor is a positive int literal or a positive dim, so floor and
truncation agree on everything a well-formed annotation can express.

Inside a running kernel (the shim), a dim is the number its call bound it to:
arithmetic on it gives a `SizeInt` (an int that remembers it was computed from
sizes, so the shape rules never read it as a literal), and `/`, `**` and floats
give Python numbers, so `q @ k.T / (D ** 0.5)` runs as the checker types it.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Union

Size = Union[int, "DimExpr"]

_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "//": 2, "%": 2}


# The shim installs a function returning the running kernel's dim bindings, so that
# `range(N)` works inside a kernel executed as plain Python.
def _no_bindings() -> Mapping[str, int] | None:
    return None


_binding_hook: Callable[[], Mapping[str, int] | None] = _no_bindings


def set_binding_hook(hook: Callable[[], Mapping[str, int] | None]) -> None:
    global _binding_hook
    _binding_hook = hook


class DimExpr:
    """Base class of symbolic size expressions; supports `+ - * // %` with ints."""

    __slots__ = ()

    def __add__(self, other: Size) -> DimExpr:
        return _arith("+", self, other)

    def __radd__(self, other: Size) -> DimExpr:
        return _arith("+", other, self)

    def __sub__(self, other: Size) -> DimExpr:
        return _arith("-", self, other)

    def __rsub__(self, other: Size) -> DimExpr:
        return _arith("-", other, self)

    def __mul__(self, other: Size) -> DimExpr:
        return _arith("*", self, other)

    def __rmul__(self, other: Size) -> DimExpr:
        return _arith("*", other, self)

    def __floordiv__(self, other: Size) -> DimExpr:
        return _arith("//", self, other)

    def __rfloordiv__(self, other: Size) -> DimExpr:
        return _arith("//", other, self)

    def __mod__(self, other: Size) -> DimExpr:
        return _arith("%", self, other)

    def __rmod__(self, other: Size) -> DimExpr:
        return _arith("%", other, self)

    # Only inside a running kernel: a dim used as a value (`1.0 / D`, `D ** 0.5`, `-D`).
    def __truediv__(self, other: Any) -> Any:
        return _arith("/", self, other)

    def __rtruediv__(self, other: Any) -> Any:
        return _arith("/", other, self)

    def __pow__(self, other: Any) -> Any:
        return _arith("**", self, other)

    def __rpow__(self, other: Any) -> Any:
        return _arith("**", other, self)

    def __neg__(self) -> Any:
        return _arith("-", 0, self)

    # Bit operations of a dim's value, only inside a running kernel (`x + (N >> 1)`): a
    # plain int, as the checker reads them (a scalar, not a size).
    def __and__(self, other: Any) -> Any:
        return _bits(operator.and_, self, other)

    def __rand__(self, other: Any) -> Any:
        return _bits(operator.and_, other, self)

    def __or__(self, other: Any) -> Any:
        return _bits(operator.or_, self, other)

    def __ror__(self, other: Any) -> Any:
        return _bits(operator.or_, other, self)

    def __xor__(self, other: Any) -> Any:
        return _bits(operator.xor, self, other)

    def __rxor__(self, other: Any) -> Any:
        return _bits(operator.xor, other, self)

    def __lshift__(self, other: Any) -> Any:
        return _bits(operator.lshift, self, other)

    def __rlshift__(self, other: Any) -> Any:
        return _bits(operator.lshift, other, self)

    def __rshift__(self, other: Any) -> Any:
        return _bits(operator.rshift, self, other)

    def __rrshift__(self, other: Any) -> Any:
        return _bits(operator.rshift, other, self)

    def __float__(self) -> float:
        return float(self.__index__())

    def __int__(self) -> int:
        return self.__index__()

    def __index__(self) -> int:
        env = _binding_hook()
        if env is None:
            raise TypeError(f"the size `{self}` has no value outside a running kernel")
        return self.evaluate(env)

    # Inside a running kernel (the shim), a size compares as its bound value, so
    # `if i + 1 < N:` works under plain Python.
    def _compare(self, other: object, op: Callable[[int, int], bool]) -> bool:
        env = _binding_hook()
        if env is None or isinstance(other, bool) or not isinstance(other, (int, DimExpr)):
            return NotImplemented  # type: ignore[return-value]
        return op(self.evaluate(env), evaluate(other, env))

    def __lt__(self, other: object) -> bool:
        return self._compare(other, lambda a, b: a < b)

    def __le__(self, other: object) -> bool:
        return self._compare(other, lambda a, b: a <= b)

    def __gt__(self, other: object) -> bool:
        return self._compare(other, lambda a, b: a > b)

    def __ge__(self, other: object) -> bool:
        return self._compare(other, lambda a, b: a >= b)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DimExpr) and _binding_hook() is None:
            return self is other
        return self._compare(other, lambda a, b: a == b)

    def __ne__(self, other: object) -> bool:
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    __hash__ = object.__hash__

    def dims(self) -> list[Dim]:
        """The distinct `Dim`s in this expression, in first-appearance order."""
        found: list[Dim] = []
        _collect_dims(self, found)
        return found

    def evaluate(self, env: Mapping[str, int]) -> int:
        raise NotImplementedError


class Dim(DimExpr):
    """A named symbolic size: `Dim("N")`, `Dim("T", min=1, max=4096, multiple_of=4)`.

    A dim is at least 1 unless `min` says otherwise (`min=0` admits empty tensors).
    `min` and `max` may be sizes of other dims (`Dim("T", max=MAXT)`, `max=2 * MAXT`): a
    relation every proof uses and every call checks once all its dims are bound; `min` and
    `max` then hold the int bounds it implies on its own (MAXT's `max`, when it has one),
    and `min_of` and `max_of` the relation.
    """

    __slots__ = ("name", "min", "max", "multiple_of", "min_of", "max_of")

    def __init__(
        self,
        name: str,
        *,
        min: int | DimExpr = 1,  # noqa: A002 - the public keyword is `min`
        max: int | DimExpr | None = None,  # noqa: A002
        multiple_of: int | None = None,
    ) -> None:
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"dim name must be an identifier, got {name!r}")
        self.name = name
        self.min_of = min if isinstance(min, DimExpr) else None
        self.max_of = max if isinstance(max, DimExpr) else None
        self.min = max_(0, static_bound(min, upper=False) or 0) if self.min_of else min
        self.max = static_bound(max, upper=True) if self.max_of else max
        self.multiple_of = multiple_of

    def evaluate(self, env: Mapping[str, int]) -> int:
        try:
            return env[self.name]
        except KeyError:
            raise UnboundDimError(self.name) from None

    def admits(self, value: int) -> bool:
        """Whether `value` satisfies this dim's constraints of its own (not its relations
        with other dims: `relation_error`)."""
        if value < self.min:
            return False
        if self.max is not None and value > self.max:
            return False
        return not (self.multiple_of is not None and value % self.multiple_of != 0)

    def relation_error(self, value: int, env: Mapping[str, int]) -> str | None:
        """Why `value` breaks a `min=`/`max=` relation with other dims under `env` (None: it
        keeps them, or a dim of the relation is not bound, so there is nothing to check)."""
        for bound, upper in ((self.min_of, False), (self.max_of, True)):
            if bound is None:
                continue
            try:
                limit = bound.evaluate(env)
            except UnboundDimError:
                continue
            if (value > limit) if upper else (value < limit):
                which = "above its maximum" if upper else "below its minimum"
                return f"{self.name}={value} is {which} {bound}={limit}"
        return None

    def describe_constraints(self) -> str:
        parts = [f"min={self.min_of if self.min_of is not None else self.min}"]
        if self.max_of is not None:
            parts.append(f"max={self.max_of}")
        elif self.max is not None:
            parts.append(f"max={self.max}")
        if self.multiple_of is not None:
            parts.append(f"multiple_of={self.multiple_of}")
        return ", ".join(parts)

    def __repr__(self) -> str:
        return self.name

    def __str__(self) -> str:
        return self.name

    # Dims are compared by identity of their declaration, hashed by name so that
    # checker-side copies of a declaration (same name) key the same dict slot.
    def __hash__(self) -> int:
        return hash(("Dim", self.name))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Dim):
            return other.name == self.name
        return super().__eq__(other)


@dataclass(frozen=True, eq=False)
class BinOp(DimExpr):
    op: str
    left: Size
    right: Size

    def evaluate(self, env: Mapping[str, int]) -> int:
        a = evaluate(self.left, env)
        b = evaluate(self.right, env)
        return _apply(self.op, a, b)

    def __str__(self) -> str:
        return _format(self, 0)

    def __repr__(self) -> str:
        return str(self)


class SizeInt(int):
    """An int computed from sizes in a running kernel: a bound `Dim`, a tensor's `.shape`.

    It is the int it is, but the shape rules read it as a size expression, not a
    literal, exactly as the checker reads the same source: it never counts from the
    end (`x[N - 3:]` at N=1 is out of bounds, not `x[-2:]`) and never means "infer"
    in a reshape. Size arithmetic keeps the mark; `//` and `%` refuse a divisor that
    is not positive (the checker's GPU036); `/` is IEEE division, as on a GPU, and `**`
    the kernel language's (`mimir.ops.numerics.power`).
    """

    __slots__ = ()

    def _size_op(self, op: str, other: Any, reflected: bool = False) -> Any:
        if isinstance(other, bool) or not isinstance(other, int):
            return NotImplemented
        a, b = (other, self) if reflected else (self, other)
        if op in ("//", "%") and b <= 0:
            raise SizeDivisionError(f"the divisor {b} of `{a} {op} {b}` is zero or negative")
        return SizeInt(_apply(op, int(a), int(b)))

    def __add__(self, o: Any) -> Any:
        return self._size_op("+", o)

    def __radd__(self, o: Any) -> Any:
        return self._size_op("+", o, True)

    def __sub__(self, o: Any) -> Any:
        return self._size_op("-", o)

    def __rsub__(self, o: Any) -> Any:
        return self._size_op("-", o, True)

    def __mul__(self, o: Any) -> Any:
        return self._size_op("*", o)

    def __rmul__(self, o: Any) -> Any:
        return self._size_op("*", o, True)

    def __floordiv__(self, o: Any) -> Any:
        return self._size_op("//", o)

    def __rfloordiv__(self, o: Any) -> Any:
        return self._size_op("//", o, True)

    def __mod__(self, o: Any) -> Any:
        return self._size_op("%", o)

    def __rmod__(self, o: Any) -> Any:
        return self._size_op("%", o, True)

    def __neg__(self) -> Any:
        return SizeInt(-int(self))

    def __truediv__(self, o: Any) -> Any:
        return _true_divide(self, o)

    def __pow__(self, o: Any) -> Any:
        return _power(self, o)

    def __rpow__(self, o: Any) -> Any:
        return _power(o, self)

    def __rtruediv__(self, o: Any) -> Any:
        return _true_divide(o, self)


class SizeDivisionError(ArithmeticError):
    """Size `//` or `%` by a divisor that is not positive, in a running kernel."""


def _true_divide(a: Any, b: Any) -> Any:
    """`a / b` on Python numbers with IEEE semantics (a GPU divides by 0 to inf or nan)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return NotImplemented
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
        return NotImplemented
    a, b = float(a), float(b)
    if b == 0.0:
        if a == 0.0 or a != a:
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


_NUMBER_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "//": operator.floordiv,
    "%": operator.mod,
    "/": operator.truediv,
    "**": operator.pow,
}


def _bits(fn: Callable[[int, int], int], left: Any, right: Any) -> Any:
    env = _binding_hook()
    if env is None or isinstance(left, bool) or isinstance(right, bool):
        return NotImplemented
    values = [v.evaluate(env) if isinstance(v, DimExpr) else v for v in (left, right)]
    if not all(isinstance(v, int) for v in values):
        return NotImplemented
    return fn(int(values[0]), int(values[1]))


def _arith(op: str, left: Any, right: Any) -> Any:
    """`left op right` where one side is a dim expression.

    Outside a kernel (annotations, module-level sizes) this builds a `DimExpr`;
    inside a running kernel the dims are bound, so it computes with their values.
    """
    env = _binding_hook()
    if env is None:
        if op in ("/", "**"):
            return NotImplemented
        return binop(op, left, right)
    if isinstance(left, DimExpr):
        left = SizeInt(left.evaluate(env))
    if isinstance(right, DimExpr):
        right = SizeInt(right.evaluate(env))
    if op == "/":
        quotient = _true_divide(left, right)
        if quotient is not NotImplemented:
            return quotient
    if op == "**":
        result = _power(left, right)
        if result is not NotImplemented:
            return result
    return _NUMBER_OPS[op](left, right)


def _power(a: Any, b: Any) -> Any:
    """The kernel language's `**` on Python numbers: `0.0 ** -1` is inf, never complex."""
    numbers = (int, float)
    if isinstance(a, bool) or isinstance(b, bool):
        return NotImplemented
    if not isinstance(a, numbers) or not isinstance(b, numbers):
        return NotImplemented
    from mimir.ops.numerics import power  # lazily: mimir.ops imports this module

    return power(int(a) if isinstance(a, int) else a, int(b) if isinstance(b, int) else b)


class UnboundDimError(LookupError):
    """Raised when an expression is evaluated without a value for one of its dims."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def _apply(op: str, a: int, b: int) -> int:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "//":
        return a // b
    if op == "%":
        return a % b
    raise ValueError(f"unknown dim operator {op!r}")


def binop(op: str, left: Size, right: Size) -> Size:
    """Build `left op right`, folding constants and the identities users expect."""
    if not isinstance(left, (int, DimExpr)) or not isinstance(right, (int, DimExpr)):
        return NotImplemented  # type: ignore[return-value]
    if isinstance(left, bool) or isinstance(right, bool):
        raise TypeError("a size cannot be a bool")
    if isinstance(left, int) and isinstance(right, int):
        return _apply(op, left, right)
    if op == "+" and isinstance(right, int) and right == 0:
        return left
    if op == "+" and isinstance(left, int) and left == 0:
        return right
    if op == "-" and isinstance(right, int) and right == 0:
        return left
    if op == "*" and isinstance(right, int) and right == 1:
        return left
    if op == "*" and isinstance(left, int) and left == 1:
        return right
    if op == "//" and isinstance(right, int) and right == 1:
        return left
    return BinOp(op, left, right)


max_ = max  # the builtin, which `Dim.__init__`'s keyword shadows


def static_bound(size: Size, upper: bool) -> int | None:
    """The largest (`upper`) or smallest value `size` can take by its dims' own int bounds,
    when they say (sums, products and differences of sizes, `//` by a positive int)."""
    if isinstance(size, int):
        return size
    if isinstance(size, Dim):
        return size.max if upper else size.min
    if not isinstance(size, BinOp):
        return None
    if size.op == "-":
        a, b = static_bound(size.left, upper), static_bound(size.right, not upper)
        return None if a is None or b is None else a - b
    a, b = static_bound(size.left, upper), static_bound(size.right, upper)
    if a is None or b is None:
        return None
    if size.op == "+":
        return a + b
    if size.op == "*" and a >= 0 and b >= 0:
        return a * b
    if size.op == "//" and isinstance(size.right, int) and size.right > 0:
        return a // size.right
    return None


def evaluate(size: Size, env: Mapping[str, int]) -> int:
    """The int value of `size` under `env` (dim name -> value)."""
    if isinstance(size, int):
        return size
    return size.evaluate(env)


def _format(expr: Size, parent_prec: int, right_side: bool = False) -> str:
    if isinstance(expr, int):
        return str(expr) if expr >= 0 else f"({expr})"
    if isinstance(expr, BinOp):
        prec = _PRECEDENCE[expr.op]
        sep = " " if prec == 1 else ""
        text = f"{_format(expr.left, prec)}{sep}{expr.op}{sep}{_format(expr.right, prec, True)}"
        if prec < parent_prec or (prec == parent_prec and right_side):
            return f"({text})"
        return text
    return str(expr)


def _collect_dims(expr: Size, found: list[Dim]) -> None:
    if isinstance(expr, Dim):
        if expr not in found:
            found.append(expr)
    elif isinstance(expr, BinOp):
        _collect_dims(expr.left, found)
        _collect_dims(expr.right, found)


# ---------------------------------------------------------------- equal sizes

# A polynomial over atoms with int coefficients: {monomial: coefficient}, a monomial a
# sorted tuple of atom keys. A dim declared `multiple_of=m` is `m` times an atom of its
# own (its quotient), so divisions the declaration makes exact cancel.
_Poly = dict[tuple[str, ...], int]


def same_size(a: Size, b: Size) -> bool:
    """Whether two size expressions are equal for every binding their dims admit, as
    far as polynomial normal form can tell (`2*H - H` and `H`; `D - D//2` and `D//2`
    for a `D` declared `multiple_of=2`). False means "not shown equal", never "unequal"."""
    difference = _size_poly(binop("-", a, b))
    return not difference


def _size_poly(e: Size) -> _Poly:
    if isinstance(e, int):
        return {(): e} if e else {}
    if isinstance(e, Dim):
        m = e.multiple_of or 1
        return {(f"{e.name}/{m}",): m} if m > 1 else {(e.name,): 1}
    if isinstance(e, BinOp) and e.op in ("+", "-", "*"):
        a, b = _size_poly(e.left), _size_poly(e.right)
        if e.op == "*":
            out: _Poly = {}
            for ma, ca in a.items():
                for mb, cb in b.items():
                    m = tuple(sorted(ma + mb))
                    out[m] = out.get(m, 0) + ca * cb
            return {m: c for m, c in out.items() if c}
        sign = 1 if e.op == "+" else -1
        out = dict(a)
        for m, c in b.items():
            out[m] = out.get(m, 0) + sign * c
        return {m: c for m, c in out.items() if c}
    if isinstance(e, BinOp) and e.op in ("//", "%") and isinstance(e.right, int) and e.right > 0:
        # exact when every coefficient is a multiple of the divisor: P // c is P / c and
        # P % c is 0 (floor division of a multiple of c, whatever P's sign)
        p, c = _size_poly(e.left), e.right
        if all(k % c == 0 for k in p.values()):
            return {m: k // c for m, k in p.items()} if e.op == "//" else {}
        return {(f"({_poly_key(p)}){e.op}{c}",): 1}
    return {(str(e),): 1}


def _poly_key(p: _Poly) -> str:
    return " + ".join(f"{c}*{'*'.join(m) or 1}" for m, c in sorted(p.items()))


# ---------------------------------------------------------------- dims fixed by an equation


def affine_in(size: Size, dim: Dim) -> tuple[Size, Size] | None:
    """`(scale, offset)` with `size == scale * dim + offset` for every binding, neither
    holding `dim`; None when `size` is not affine in `dim` (`dim * dim`, `dim // 2`)."""
    if isinstance(size, int) or (isinstance(size, Dim) and size != dim):
        return 0, size
    if isinstance(size, Dim):
        return 1, 0
    assert isinstance(size, BinOp)
    if dim not in size.dims():
        return 0, size
    left, right = affine_in(size.left, dim), affine_in(size.right, dim)
    if left is None or right is None:
        return None
    (a, b), (c, d) = left, right
    if size.op in ("+", "-"):
        return binop(size.op, a, c), binop(size.op, b, d)
    if size.op == "*":
        if _is_zero(a):  # b * (c D + d)
            return _times(b, c), _times(b, d)
        if _is_zero(c):  # (a D + b) * d
            return _times(a, d), _times(b, d)
    return None  # D * D, D // k, D % k


def _times(a: Size, b: Size) -> Size:
    return 0 if _is_zero(a) or _is_zero(b) else binop("*", a, b)


def _is_zero(size: Size) -> bool:
    return isinstance(size, int) and size == 0


def positive(size: Size) -> bool:
    """Whether `size` is at least 1 for every binding its dims admit, by construction: a
    positive int, a dim declared `min >= 1`, or sums and products of these."""
    if isinstance(size, int):
        return size >= 1
    if isinstance(size, Dim):
        return isinstance(size.min, int) and size.min >= 1
    if isinstance(size, BinOp) and size.op in ("+", "*"):
        return positive(size.left) and positive(size.right)
    return False


@dataclass(frozen=True)
class Solved:
    """A dim fixed by an equation: parameter `param`'s `axis` is `scale * dim + offset`, so
    `dim` is `(size - offset) / scale` (exactly: a size the scale does not divide fits no
    binding). `scale` and `offset` hold only dims bound before this one."""

    dim: Dim
    param: str
    axis: int
    scale: Size
    offset: Size


def solve_dims(shapes: list[tuple[str, tuple[Size, ...]]]) -> list[Solved]:
    """The dims of `shapes` (each parameter's name and annotated sizes, in order) that no
    axis names alone but one axis fixes by an equation with dims already known, in the order
    they can be solved: the first axis, parameter by parameter, that is affine in its one
    unknown dim with a positive scale (`3 * C`, `T + P`, `3 * NH * HS`), until none is left.
    The shim, the checker, the manifest and every host solve in this one order."""
    known = {d.name for _, sizes in shapes for d in sizes if isinstance(d, Dim)}
    out: list[Solved] = []
    progress = True
    while progress:
        progress = False
        for name, sizes in shapes:
            for axis, size in enumerate(sizes):
                if not isinstance(size, BinOp):
                    continue
                free = [d for d in size.dims() if d.name not in known]
                if len(free) != 1:
                    continue
                found = affine_in(size, free[0])
                if found is None or not positive(found[0]):
                    continue
                out.append(Solved(free[0], name, axis, found[0], found[1]))
                known.add(free[0].name)
                progress = True
    return out
