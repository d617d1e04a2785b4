"""Building kernel bodies: scoped statement lists, reuse of values, index arithmetic.

`Body` collects statements into nested blocks. `Body.memo` binds an expression
to a `let` the first time it is asked for under a key and hands back the same
variable afterwards, but only within the block that defined it (a value
computed inside an `if` is not visible after it). The tensor evaluator keys
every graph node's value by (node, index), which is what fuses a chain of
element-wise ops into one kernel without recomputing shared subexpressions.

`Idx` is an element position in a tensor of a given shape, held as a flat
row-major offset, as per-axis indices, or both; each form is derived from the
other on demand (`linearise`, `unravel`) with u32 arithmetic over sizes, which
come from the uniform block at run time (`size_ir`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from mimir.codegen import sizes as sz
from mimir.codegen.ir import (
    Binary,
    Builtin,
    Const,
    Expr,
    For,
    If,
    Let,
    Stmt,
    Uniform,
    Var,
    VarDecl,
)
from mimir.dims import BinOp, Dim, Size

U32 = "u32"


def u32(v: int) -> Const:
    return Const(v, U32)


# ---------------------------------------------------------------- folding integer arithmetic


def ibin(op: str, a: Expr, b: Expr) -> Expr:
    """u32 index arithmetic with the identities folded (sizes are never negative);
    `/` and `%` by a power-of-two literal are a shift and a mask."""
    ca = a.value if isinstance(a, Const) else None
    cb = b.value if isinstance(b, Const) else None
    if ca is not None and cb is not None:
        if op in ("/", "%") and cb == 0:
            return Binary(op, a, b, a.type)
        value = {
            "+": lambda: ca + cb,
            "-": lambda: ca - cb,
            "*": lambda: ca * cb,
            "/": lambda: ca // cb,
            "%": lambda: ca % cb,
        }[op]()
        if 0 <= value < 2**32:
            return u32(value)
    if op == "+" and ca == 0:
        return b
    if op in ("+", "-") and cb == 0:
        return a
    if op == "*" and (ca == 0 or cb == 0):
        return u32(0)
    if op == "*" and ca == 1:
        return b
    if op in ("*", "/") and cb == 1:
        return a
    if op == "%" and cb == 1:
        return u32(0)
    # by a power of two, a shift or a mask (u32, so no sign to round towards)
    if op in ("/", "%") and isinstance(cb, int) and cb > 1 and cb & (cb - 1) == 0:
        if op == "/":
            return Binary(">>", a, u32(cb.bit_length() - 1), U32)
        return Binary("&", a, u32(cb - 1), U32)
    return Binary(op, a, b, U32)


def size_ir(size: Size) -> Expr:
    """A size as a u32 expression: literals fold, dims read the uniform block."""
    if isinstance(size, int):
        return u32(size)
    if isinstance(size, Dim):
        return Uniform(size.name, U32)
    if isinstance(size, sz.CDiv):
        a, b = size_ir(size.left), size_ir(size.right)
        return ibin("/", ibin("-", ibin("+", a, b), u32(1)), b)
    if isinstance(size, BinOp):
        op = {"//": "/"}.get(size.op, size.op)
        return ibin(op, size_ir(size.left), size_ir(size.right))
    raise TypeError(f"not a size: {size!r}")


def dims_used(size: Size) -> list[str]:
    return [d.name for d in size.dims()] if not isinstance(size, int) else []


# ---------------------------------------------------------------- bodies


class Body:
    def __init__(self) -> None:
        self.root: list[Stmt] = []
        self._blocks: list[list[Stmt]] = [self.root]
        self._memo: list[dict[Any, Expr]] = [{}]
        self._counter = itertools.count()

    def emit(self, stmt: Stmt) -> None:
        self._blocks[-1].append(stmt)

    def fresh(self, hint: str, t: str) -> Var:
        return Var(f"${hint}{next(self._counter)}", t)

    def let(self, e: Expr, hint: str = "t") -> Expr:
        """Bind `e` to a new immutable variable (constants and variables stay as they are)."""
        if isinstance(e, (Const, Var, Uniform, Builtin)):
            return e
        v = self.fresh(hint, e.type)
        self.emit(Let(v, e))
        return v

    def var(self, init: Expr, hint: str) -> Var:
        v = self.fresh(hint, init.type)
        self.emit(VarDecl(v, init))
        return v

    def memo(self, key: Any, make: Callable[[], Expr], hint: str = "t") -> Expr:
        for scope in reversed(self._memo):
            if key in scope:
                return scope[key]
        value = self.let(make(), hint)
        self._memo[-1][key] = value
        return value

    @contextmanager
    def block(self) -> Iterator[list[Stmt]]:
        stmts: list[Stmt] = []
        self._blocks.append(stmts)
        self._memo.append({})
        try:
            yield stmts
        finally:
            self._blocks.pop()
            self._memo.pop()

    @contextmanager
    def at_top(self) -> Iterator[None]:
        """What is emitted inside goes to the end of the body's outermost block: before
        every block open now (each is emitted there when it closes), so it is computed
        once and visible to all of them. For values no thread or element changes (a
        scalar's arithmetic on uniforms, `Evaluator.scalar`)."""
        self._blocks.append(self.root)
        self._memo.append({})
        try:
            yield
        finally:
            self._blocks.pop()
            self._memo.pop()

    @contextmanager
    def taken(self) -> Iterator[list[Stmt]]:
        """The statements emitted into the current block inside the `with`, taken out of
        it into the list (for the caller to rewrite and emit again). Unlike `block`, what
        `memo` binds inside stays bound: the caller must emit the `let`s it keeps."""
        block = self._blocks[-1]
        start = len(block)
        out: list[Stmt] = []
        try:
            yield out
        finally:
            out.extend(block[start:])
            del block[start:]

    @contextmanager
    def if_(self, cond: Expr) -> Iterator[None]:
        with self.block() as then:
            yield
        self.emit(If(cond, then))

    @contextmanager
    def for_(
        self, hint: str, start: Expr, end: Expr, step: Expr, unroll: bool = True
    ) -> Iterator[Var]:
        v = self.fresh(hint, U32)
        with self.block() as body:
            yield v
        self.emit(For(v, start, end, step, body, unroll))


# ---------------------------------------------------------------- element positions


class Idx:
    """A position in a tensor of `shape`: a flat offset, per-axis indices, or both."""

    def __init__(
        self, shape: tuple[Size, ...], flat: Expr | None = None, axes: list[Expr] | None = None
    ) -> None:
        assert flat is not None or axes is not None
        self.shape = tuple(shape)
        self._flat = flat
        self._axes = None if axes is None else list(axes)
        form = ("flat", flat) if flat is not None else ("axes", tuple(self._axes or ()))
        self.key = (tuple(sz.key(s) for s in self.shape), form)

    def flat(self, body: Body) -> Expr:
        if self._flat is not None:
            return self._flat
        return body.memo(("flat", self.key), lambda: linearise(self._axes or [], self.shape), "i")

    def axes(self, body: Body) -> list[Expr]:
        if self._axes is not None:
            return self._axes
        flat = self._flat
        assert flat is not None
        return unravel(body, flat, self.shape, self.key)


def linearise(axes: list[Expr], shape: tuple[Size, ...]) -> Expr:
    """Row-major offset (Horner form); axes of literal size 1 contribute nothing."""
    acc: Expr | None = None
    for a, s in zip(axes, shape, strict=True):
        if isinstance(s, int) and s == 1:
            continue
        acc = a if acc is None else ibin("+", ibin("*", acc, size_ir(s)), a)
    return u32(0) if acc is None else acc


def unravel(body: Body, flat: Expr, shape: tuple[Size, ...], key: Any = None) -> list[Expr]:
    """Per-axis indices of a row-major offset `flat` (which is below numel(shape))."""

    def make() -> list[Expr]:
        out: list[Expr] = [u32(0)] * len(shape)
        rest = flat
        nontrivial = [k for k, s in enumerate(shape) if not (isinstance(s, int) and s == 1)]
        for pos, k in enumerate(reversed(nontrivial)):
            if pos == len(nontrivial) - 1:
                out[k] = rest
                break
            s = size_ir(shape[k])
            out[k] = body.let(ibin("%", rest, s), "i")
            rest = body.let(ibin("/", rest, s), "i")
        return out

    memo_key = ("unravel", key if key is not None else (tuple(sz.key(s) for s in shape), flat))
    for scope in reversed(body._memo):
        if memo_key in scope:
            return scope[memo_key]  # type: ignore[return-value]
    result = make()
    body._memo[-1][memo_key] = result  # type: ignore[assignment]
    return result


def group_id(body: Body, dispatch: tuple[Size, Size, Size]) -> Expr:
    """The linear workgroup id for a dispatch folded by `sizes.dispatch`."""
    if isinstance(dispatch[1], int) and dispatch[1] == 1:
        return Builtin("group_x")
    y = ibin("*", Builtin("group_y"), Builtin("groups_x"))
    return body.let(ibin("+", y, Builtin("group_x")), "g")


def over_dispatched(dispatch: tuple[Size, Size, Size]) -> bool:
    """Whether some workgroups of the dispatch lie past the linear count."""
    return not (isinstance(dispatch[1], int) and dispatch[1] == 1)
