"""Size expressions for kernels and manifests.

A size is a `mimir.dims` size (an int or a `DimExpr` over the kernel's dims)
plus one node the annotations cannot spell, `CDiv` (ceiling division, for
dispatch sizes). `manifest_text` prints a size in the manifest's expression
language: integers, dim names, `+ - * // %`, parentheses and `cdiv(a, b)`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from mimir.dims import BinOp, Dim, DimExpr, Size, binop, evaluate

# WebGPU's guaranteed `maxComputeWorkgroupsPerDimension`.
MAX_GROUPS_PER_DIM = 65535
# Dims travel in `u32` uniform fields, and kernels index with 32-bit integers.
U32_MAX = 2**32 - 1


@dataclass(frozen=True, eq=False)
class CDiv(DimExpr):
    """`cdiv(a, b)`: ceiling division of a size by a positive size."""

    left: Size
    right: Size

    def evaluate(self, env: Mapping[str, int]) -> int:
        a, b = evaluate(self.left, env), evaluate(self.right, env)
        return -(-a // b)

    def __str__(self) -> str:
        return manifest_text(self)


def cdiv(a: Size, b: Size) -> Size:
    if isinstance(a, int) and isinstance(b, int):
        return -(-a // b)
    if isinstance(b, int) and b == 1:
        return a
    return CDiv(a, b)


def add(a: Size, b: Size) -> Size:
    return binop("+", a, b)


def mul(a: Size, b: Size) -> Size:
    if isinstance(a, int) and a == 0 or isinstance(b, int) and b == 0:
        return 0
    return binop("*", a, b)


def floordiv(a: Size, b: Size) -> Size:
    return binop("//", a, b)


def mod(a: Size, b: Size) -> Size:
    if isinstance(b, int) and b == 1:
        return 0
    return binop("%", a, b)


def product(sizes: list[Size]) -> Size:
    total: Size = 1
    for s in sizes:
        total = mul(total, s)
    return total


def key(size: Size) -> str:
    """A canonical key: two sizes with equal keys are equal for every binding
    (`N + 2 - 2` and `N` share one)."""
    return manifest_text(simplify(size))


# ---------------------------------------------------------------- normal form

# A polynomial over atoms (dims, and `//`, `%`, `cdiv` terms kept whole), with
# int coefficients: {monomial: coefficient}, a monomial a sorted tuple of atom keys.
_Poly = dict[tuple[str, ...], int]


def _poly(e: Size, atoms: dict[str, Size]) -> _Poly:
    if isinstance(e, int):
        return {(): e} if e else {}
    if isinstance(e, BinOp) and e.op in ("+", "-", "*"):
        a, b = _poly(e.left, atoms), _poly(e.right, atoms)
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
    if isinstance(e, BinOp):
        atom: Size = BinOp(e.op, simplify(e.left), simplify(e.right))
    elif isinstance(e, CDiv):
        atom = cdiv(simplify(e.left), simplify(e.right))
        if isinstance(atom, int) or not isinstance(atom, CDiv):
            return _poly(atom, atoms)
    else:
        atom = e
    k = manifest_text(atom)
    atoms.setdefault(k, atom)
    return {(k,): 1}


def simplify(size: Size) -> Size:
    """`size` with its sums and products collected (`N + 1 - 1` is `N`, `2*N - N` is `N`)."""
    if isinstance(size, (int, Dim)):
        return size
    atoms: dict[str, Size] = {}
    poly = _poly(size, atoms)
    terms: list[tuple[int, Size]] = []
    for monomial, coefficient in poly.items():
        if not monomial:
            continue
        term: Size = atoms[monomial[0]]
        for a in monomial[1:]:
            term = binop("*", term, atoms[a])
        terms.append((coefficient, term))
    constant = poly.get((), 0)
    positive = [(c, t) for c, t in terms if c > 0]
    negative = [(c, t) for c, t in terms if c < 0]
    out: Size | None = None
    for c, t in positive:
        part = t if c == 1 else binop("*", c, t)
        out = part if out is None else binop("+", out, part)
    if out is None:
        out = constant if constant >= 0 or not negative else 0
        constant = 0 if constant >= 0 or not negative else constant
    for c, t in negative:
        part = t if c == -1 else binop("*", -c, t)
        out = binop("-", out, part)
    if constant > 0:
        out = binop("+", out, constant)
    elif constant < 0:
        out = binop("-", out, -constant)
    return out


_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "//": 2, "%": 2}


def manifest_text(size: Size) -> str:
    return _text(size, 0, False)


def _text(e: Size, parent: int, right: bool) -> str:
    if isinstance(e, int):
        return str(e) if e >= 0 else f"({e})"
    if isinstance(e, Dim):
        return e.name
    if isinstance(e, CDiv):
        return f"cdiv({_text(e.left, 0, False)}, {_text(e.right, 0, False)})"
    if isinstance(e, BinOp):
        prec = _PRECEDENCE[e.op]
        sep = " " if prec == 1 else ""
        text = f"{_text(e.left, prec, False)}{sep}{e.op}{sep}{_text(e.right, prec, True)}"
        if prec < parent or (prec == parent and right):
            return f"({text})"
        return text
    raise TypeError(f"not a size: {e!r}")


def manifest_value(size: Size) -> int | str:
    """An int stays an int; an expression becomes its text."""
    return size if isinstance(size, int) else manifest_text(size)


def upper_bound(size: Size, dims: Mapping[str, Dim]) -> int | None:
    """The largest value `size` can take, when every dim has a `max` and the
    expression is monotone (no `%`, and `-` only of a literal); else None."""
    if isinstance(size, int):
        return size
    if isinstance(size, BinOp) and size.op == "-" and isinstance(size.right, int):
        a = upper_bound(size.left, dims)
        return None if a is None else max(0, a - size.right)
    if isinstance(size, Dim):
        d = dims.get(size.name, size)
        return d.max
    if isinstance(size, CDiv):
        a = upper_bound(size.left, dims)
        return None if a is None or not isinstance(size.right, int) else -(-a // size.right)
    if isinstance(size, BinOp) and size.op in ("+", "*", "//"):
        a = upper_bound(size.left, dims)
        if a is None:
            return None
        if size.op == "//":
            return a // size.right if isinstance(size.right, int) else None
        b = upper_bound(size.right, dims)
        return None if b is None else (a + b if size.op == "+" else a * b)
    return None


def divisor(size: Size, dims: Mapping[str, Dim]) -> int:
    """A number `size` is proven a multiple of for every admissible binding (0 for the
    literal 0, which every number divides): literals, dims' `multiple_of`, products
    and sums of them; 1 when nothing is known."""
    from math import gcd

    if isinstance(size, int):
        return abs(size)
    if isinstance(size, Dim):
        return dims.get(size.name, size).multiple_of or 1
    if isinstance(size, BinOp) and size.op == "*":
        return divisor(size.left, dims) * divisor(size.right, dims)
    if isinstance(size, BinOp) and size.op in ("+", "-"):
        return gcd(divisor(size.left, dims), divisor(size.right, dims)) or 1
    return 1


def multiple_proof(size: Size, of: int, dims: Mapping[str, Dim]) -> str | None:
    """Why `size` is always a multiple of `of` (for the manifest), or None."""
    d = divisor(size, dims)
    if d == 0 or (d > 0 and d % of == 0):
        if isinstance(size, int):
            return f"{size} is a multiple of {of}"
        used = sorted({x.name for x in size.dims()})
        why = ", ".join(
            f"{n} multiple_of {dims[n].multiple_of}"
            for n in used
            if n in dims and dims[n].multiple_of
        )
        return f"{manifest_text(size)} is a multiple of {of}" + (f" ({why})" if why else "")
    return None


def lower_bound(size: Size, dims: Mapping[str, Dim]) -> int | None:
    """The smallest value `size` can take, when the expression is monotone (no `-` or
    `%`); else None. Every dim is at least its `min`."""
    if isinstance(size, int):
        return size
    if isinstance(size, Dim):
        return dims.get(size.name, size).min
    if isinstance(size, CDiv):
        a = lower_bound(size.left, dims)
        return None if a is None or not isinstance(size.right, int) else -(-a // size.right)
    if isinstance(size, BinOp) and size.op in ("+", "*", "//"):
        a = lower_bound(size.left, dims)
        if a is None:
            return None
        if size.op == "//":
            return a // size.right if isinstance(size.right, int) else None
        b = lower_bound(size.right, dims)
        return None if b is None else (a + b if size.op == "+" else a * b)
    return None


def u32_overflow(size: Size, dims: Mapping[str, Dim]) -> int | None:
    """A value above `U32_MAX` that `size` can take for some admissible dims, or None.

    None means `size` is proven to fit a `u32`, or cannot be bounded here because a dim
    has no `max` (then the runtime checks each launch's sizes, `mimir.runtime.manifest`).
    """
    low = lower_bound(size, dims)
    if low is not None and low > U32_MAX:
        return low
    high = upper_bound(size, dims)
    return high if high is not None and high > U32_MAX else None


def dispatch(groups: Size, dims: Mapping[str, Dim]) -> tuple[Size, Size, Size]:
    """Fold a 1-D count of workgroups into x and y, each at most 65535.

    y = groups // 65535 + 1 and x = cdiv(groups, y): then x <= 65535 and
    x * y - groups < y, and a count of 0 dispatches nothing. Kernels recover the
    linear group id as `group_y * groups_x + group_x` and skip ids past `groups`.
    """
    bound = upper_bound(groups, dims)
    if bound is not None and bound <= MAX_GROUPS_PER_DIM:
        return (groups, 1, 1)
    y = add(floordiv(groups, MAX_GROUPS_PER_DIM), 1)
    return (cdiv(groups, y), y, 1)
