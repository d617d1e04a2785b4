"""The Z3 size algebra: the op table's shape rules, run symbolically.

A size is a `Sym`: a Z3 integer term paired with the text a user would write
for it (`784`, `N`, `N + 1`) and, when known without solving, its int value.
`Z3Algebra.require` does not decide anything; it records an `Obligation` that
the prover must show holds for every admissible size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NoReturn

from mimir.dims import Size, binop, same_size
from mimir.ops.shapes import RuleError
from mimir.solve.z3lib import z3

_PREC = {"+": 1, "-": 1, "*": 2, "//": 2, "%": 2}


class Sym:
    """A symbolic size: Z3 term, display text, literal value when known.

    `expr` is the same size as a `mimir.dims` expression over the kernel's dims,
    for code generation and manifests; None when no such expression is known
    (a broadcast of two different symbolic sizes that only the solver relates).

    `literal` says the size was written as int literals only (`-1`, `3 - 4`), not
    computed from a dim or a shape: only a literal counts from the end when negative.
    """

    __slots__ = ("term", "text", "value", "prec", "expr", "literal")

    def __init__(
        self,
        term: z3.ArithRef,
        text: str,
        value: int | None = None,
        prec: int = 3,
        expr: Size | None = None,
    ):
        self.term = term
        self.text = text
        self.value = value
        self.prec = prec
        self.expr = value if expr is None and value is not None else expr
        self.literal = False

    @staticmethod
    def const(v: int) -> Sym:
        s = Sym(z3.IntVal(v), str(v), v)
        s.literal = True
        return s

    def as_expression(self) -> Sym:
        """The same size, marked as computed (a tensor's `.shape`), never a literal."""
        return Sym(self.term, self.text, self.value, self.prec, self.expr)

    def _op(self, op: str, other: Any, reflected: bool = False) -> Sym:
        o = lift(other)
        a, b = (o, self) if reflected else (self, o)
        if a.value is not None and b.value is not None:
            if op in ("//", "%") and b.value == 0:
                return Sym(_z3_op(op, a.term, b.term), f"{a.text} {op} 0")
            folded = Sym.const(_py_op(op, a.value, b.value))
            folded.literal = a.literal and b.literal
            return folded
        expr = None if a.expr is None or b.expr is None else binop(op, a.expr, b.expr)
        if op == "*" and (a.value == 1 or b.value == 1):
            return b if a.value == 1 else a
        if op == "//" and b.value == 1:  # `N // 1` is `N` (a reshape that infers -1)
            return a
        if op in ("+", "-") and b.value == 0:
            return a
        if op == "+" and a.value == 0:
            return b
        prec = _PREC[op]
        lt = a.text if a.prec >= prec else f"({a.text})"
        rt = b.text if b.prec > prec else f"({b.text})"
        sep = " " if prec == 1 else ""
        return Sym(_z3_op(op, a.term, b.term), f"{lt}{sep}{op}{sep}{rt}", None, prec, expr)

    def __add__(self, o: Any) -> Sym:
        return self._op("+", o)

    def __radd__(self, o: Any) -> Sym:
        return self._op("+", o, True)

    def __sub__(self, o: Any) -> Sym:
        return self._op("-", o)

    def __rsub__(self, o: Any) -> Sym:
        return self._op("-", o, True)

    def __mul__(self, o: Any) -> Sym:
        return self._op("*", o)

    def __rmul__(self, o: Any) -> Sym:
        return self._op("*", o, True)

    def __floordiv__(self, o: Any) -> Sym:
        return self._op("//", o)

    def __rfloordiv__(self, o: Any) -> Sym:
        return self._op("//", o, True)

    def __mod__(self, o: Any) -> Sym:
        return self._op("%", o)

    def __rmod__(self, o: Any) -> Sym:
        # `1 % known` in a rule: the element count of a 0-d tensor is the int 1.
        return self._op("%", o, True)

    def __repr__(self) -> str:
        return self.text


def lift(x: Any) -> Sym:
    if isinstance(x, Sym):
        return x
    if isinstance(x, int) and not isinstance(x, bool):
        return Sym.const(x)
    raise TypeError(f"not a size: {x!r}")


_PY_OPS = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "//": lambda a, b: a // b,
    "%": lambda a, b: a % b,
}


def _py_op(op: str, a: int, b: int) -> int:
    return _PY_OPS[op](a, b)


def _z3_op(op: str, a: z3.ArithRef, b: z3.ArithRef) -> z3.ArithRef:
    # Z3's integer `/` and `%` are Euclidean; for the positive divisors sizes have
    # they equal Python's floor division and modulo.
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "//":
        return a / b
    return a % b


@dataclass
class Obligation:
    condition: z3.BoolRef
    code: str
    message: str
    sizes: tuple[Sym, ...]


class Z3Algebra:
    """Records obligations instead of deciding them (see module docstring)."""

    def __init__(self) -> None:
        self.obligations: list[Obligation] = []

    def eq(self, a: Any, b: Any) -> z3.BoolRef:
        return lift(a).term == lift(b).term

    def le(self, a: Any, b: Any) -> z3.BoolRef:
        return lift(a).term <= lift(b).term

    def any_(self, *conds: Any) -> z3.BoolRef:
        return conds[0] if len(conds) == 1 else z3.Or(*conds)

    def select(self, cond: Any, a: Any, b: Any) -> Sym:
        a, b = lift(a), lift(b)
        # either size, where the two are equal for every binding (`2*H - H` and `H`): the
        # shorter spelling
        expr = None
        if a.expr is not None and b.expr is not None and same_size(a.expr, b.expr):
            expr = a.expr if len(str(a.expr)) < len(str(b.expr)) else b.expr
        return Sym(z3.If(cond, a.term, b.term), b.text, None, b.prec, expr)

    def literal(self, a: Any) -> int | None:
        return lift(a).value

    def is_literal(self, a: Any) -> bool:
        return lift(a).literal

    def require(self, cond: Any, code: str, message: str, *args: Any) -> None:
        if isinstance(cond, bool):
            cond = z3.BoolVal(cond)
        sizes = tuple(_flatten_syms(args))
        self.obligations.append(Obligation(cond, code, self._format(message, args), sizes))

    def fail(self, code: str, message: str, *args: Any) -> NoReturn:
        raise RuleError(code, self._format(message, args))

    def show(self, a: Any) -> str:
        if isinstance(a, (tuple, list)):
            return "[" + ", ".join(self.show(x) for x in a) + "]"
        return lift(a).text

    def _format(self, message: str, args: tuple) -> str:
        return message.format(*(self.show(a) for a in args))


def _flatten_syms(args: Any) -> list[Sym]:
    out: list[Sym] = []
    for a in args:
        if isinstance(a, (tuple, list)):
            out.extend(_flatten_syms(a))
        elif isinstance(a, (Sym, int)):
            out.append(lift(a))
    return out
