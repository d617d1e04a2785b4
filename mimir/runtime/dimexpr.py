"""Evaluate the dim expressions of a Mimir manifest, safely.

A manifest (`FUNCTION.manifest.json`) states buffer shapes and workgroup counts
as ints or as expression strings over the kernel's dims, e.g. `"N"`,
`"cdiv(N * M, 256)"` or `"(K + 3) // 4"`. This module is what host code needs
to turn them into numbers:

    >>> from mimir.runtime.dimexpr import evaluate
    >>> evaluate("cdiv(N * M, 256)", {"N": 7, "M": 131})
    4

The grammar is deliberately tiny, so that any host language can implement it
(the JavaScript and C hosts implement exactly this one):

    expr  := term (("+" | "-") term)*
    term  := unary (("*" | "//" | "%") unary)*
    unary := ("-" | "+") unary | atom
    atom  := INT | NAME | "cdiv" "(" expr "," expr ")" | "(" expr ")"
    INT   := "0" | [1-9][0-9]*        NAME := [A-Za-z_][A-Za-z0-9_]*

with spaces allowed between tokens. `//` and `%` are Python's floor division
and modulo, `cdiv(a, b)` is the ceiling of `a / b` and needs `b > 0`. Limits
that keep a hostile manifest cheap: at most 1024 characters, and at most 32
levels of parentheses, `cdiv(` and unary signs open at once. Arithmetic is
exact, and every value (literals and each operation's result) must lie in the
signed 64-bit range, so that a host computing in `int64_t` gets the same answer
or the same refusal (`INT64_MIN // -1` is refused; `INT64_MIN % -1` is 0).
Every refusal raises `DimExprError` (code MAN005). The text is parsed, never
executed.

Stdlib-only.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping

from mimir.runtime.errors import ManifestError

__all__ = [
    "INT64_MAX",
    "INT64_MIN",
    "MAX_DEPTH",
    "MAX_LENGTH",
    "DimExprError",
    "cdiv",
    "evaluate",
    "names",
    "parse",
]

MAX_LENGTH = 1024
MAX_DEPTH = 32
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


class DimExprError(ManifestError):
    """A dim expression is malformed, too big, or cannot be evaluated (code MAN005)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message, "MAN005", field)


def cdiv(a: int, b: int) -> int:
    """The ceiling of `a / b` for integers (`b` positive)."""
    if b <= 0:
        raise DimExprError(f"cdiv by a non-positive divisor: cdiv({a}, {b})")
    return -(-a // b)


# A parsed expression is postfix code: ("int", v), ("name", s), ("neg",), ("cdiv",) or a
# binary operator ("+", "-", "*", "//", "%"); evaluating it needs a stack, not recursion.
Code = tuple[tuple, ...]

_TOKEN = re.compile(r" *(?:([0-9]+)|([A-Za-z_][A-Za-z0-9_]*)|(//|[-+*%(),]))")


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    end = len(text.rstrip(" "))
    while pos < end:
        m = _TOKEN.match(text, pos)
        if m is None:
            raise DimExprError(f"malformed dim expression {text!r} at column {pos + 1}")
        pos = m.end()
        if m.group(1) is not None:
            digits = m.group(1)
            if len(digits) > 1 and digits[0] == "0":
                raise DimExprError(f"malformed dim expression {text!r}: leading zeros")
            out.append(("int", digits))
        elif m.group(2) is not None:
            out.append(("name", m.group(2)))
        else:
            out.append(("op", m.group(3)))
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokens(text)
        self.i = 0
        self.depth = 0
        self.code: list[tuple] = []

    def fail(self, why: str) -> DimExprError:
        return DimExprError(f"malformed dim expression {self.text!r}: {why}")

    def is_op(self, op: str) -> bool:
        return self.i < len(self.tokens) and self.tokens[self.i] == ("op", op)

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise DimExprError(
                f"dim expression {_short(self.text)} nests deeper than {MAX_DEPTH} levels"
            )

    def expr(self) -> None:
        self.term()
        while self.is_op("+") or self.is_op("-"):
            op = self.tokens[self.i][1]
            self.i += 1
            self.term()
            self.code.append((op,))

    def term(self) -> None:
        self.unary()
        while self.is_op("*") or self.is_op("//") or self.is_op("%"):
            op = self.tokens[self.i][1]
            self.i += 1
            self.unary()
            self.code.append((op,))

    def unary(self) -> None:
        if self.is_op("-") or self.is_op("+"):
            negate = self.tokens[self.i][1] == "-"
            self.i += 1
            self.enter()
            self.unary()
            self.depth -= 1
            if negate:
                self.code.append(("neg",))
            return
        self.atom()

    def atom(self) -> None:
        if self.i >= len(self.tokens):
            raise self.fail("unexpected end")
        kind, value = self.tokens[self.i]
        self.i += 1
        if kind == "int":
            number = int(value)
            if number > INT64_MAX:
                raise DimExprError(
                    f"integer {_short(value)} in {_short(self.text)} is outside the 64-bit range"
                )
            self.code.append(("int", number))
            return
        if kind == "name":
            if not self.is_op("("):
                self.code.append(("name", value))
                return
            if value != "cdiv":
                raise DimExprError(
                    f"only `cdiv(a, b)` may be called in dim expression {_short(self.text)}"
                )
            self.i += 1
            self.enter()
            self.expr()
            if not self.is_op(","):
                raise DimExprError(f"`cdiv` takes exactly two arguments in {_short(self.text)}")
            self.i += 1
            self.expr()
            if not self.is_op(")"):
                raise DimExprError(f"`cdiv` takes exactly two arguments in {_short(self.text)}")
            self.i += 1
            self.depth -= 1
            self.code.append(("cdiv",))
            return
        if value == "(":
            self.enter()
            self.expr()
            if not self.is_op(")"):
                raise self.fail("expected ')'")
            self.i += 1
            self.depth -= 1
            return
        raise self.fail(f"unexpected {value!r}")


def _short(text: str) -> str:
    return repr(text if len(text) <= 80 else text[:77] + "...")


@functools.lru_cache(maxsize=1024)
def parse(text: str) -> Code:
    """Parse and validate `text` (postfix code); raise `DimExprError` when it is not allowed."""
    if not isinstance(text, str):
        raise DimExprError(f"a dim expression must be a string, got {type(text).__name__}")
    if len(text) > MAX_LENGTH:
        raise DimExprError(f"dim expression is {len(text)} characters long, over {MAX_LENGTH}")
    parser = _Parser(text)
    if not parser.tokens:
        raise parser.fail("empty")
    parser.expr()
    if parser.i != len(parser.tokens):
        raise parser.fail(f"unexpected {parser.tokens[parser.i][1]!r}")
    return tuple(parser.code)


def names(expr: int | str) -> set[str]:
    """The dim names `expr` mentions (the `cdiv` being called is not a name)."""
    if isinstance(expr, int) and not isinstance(expr, bool):
        return set()
    return {step[1] for step in parse(expr) if step[0] == "name"}


def evaluate(expr: int | str, env: Mapping[str, int]) -> int:
    """The int value of a manifest dim expression (an int or a string) under `env`.

    Raises `DimExprError` for a forbidden construct, an unknown name, a division by zero,
    or a value outside the signed 64-bit range.
    """
    if isinstance(expr, bool):
        raise DimExprError("a dim expression cannot be a bool")
    if isinstance(expr, int):
        return expr
    stack: list[int] = []
    for step in parse(expr):
        op = step[0]
        if op == "int":
            stack.append(step[1])
            continue
        if op == "name":
            stack.append(_lookup(env, step[1], expr))
            continue
        if op == "neg":
            stack.append(_fits(-stack.pop(), expr))
            continue
        b = stack.pop()
        a = stack.pop()
        stack.append(_fits(_apply(op, a, b, expr), expr))
    (value,) = stack
    return value


def _lookup(env: Mapping[str, int], name: str, text: str) -> int:
    try:
        value = env[name]
    except KeyError:
        raise DimExprError(f"dim `{name}` has no value (in {_short(text)})") from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise DimExprError(f"dim `{name}` must be bound to an int, got {value!r}")
    return _fits(value, text)


def _apply(op: str, a: int, b: int, text: str) -> int:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "cdiv":
        if b <= 0:
            raise DimExprError(f"cdiv by a non-positive divisor: cdiv({a}, {b}) in {_short(text)}")
        return -(-a // b)
    if b == 0:
        raise DimExprError(f"division by zero in dim expression {_short(text)}")
    return a // b if op == "//" else a % b


def _fits(value: int, text: str) -> int:
    if not INT64_MIN <= value <= INT64_MAX:
        raise DimExprError(f"dim expression {_short(text)} leaves the 64-bit range ({value})")
    return value
