"""Evaluate the dim expressions of a Mimir manifest, safely.

A manifest (`FUNCTION.manifest.json`) states buffer shapes and workgroup counts
as ints or as expression strings over the kernel's dims, e.g. `"N"`,
`"cdiv(N * M, 256)"` or `"(K + 3) // 4"`. This module is what host code needs
to turn them into numbers:

    >>> from mimir.runtime.dimexpr import evaluate
    >>> evaluate("cdiv(N * M, 256)", {"N": 7, "M": 131})
    4

The grammar is deliberately tiny, so that any host language can implement it:

    expr := INT | NAME | expr ("+" | "-" | "*" | "//" | "%") expr
          | "-" expr | "(" expr ")" | "cdiv(" expr "," expr ")"

`//` and `%` are Python's floor division and modulo, and `cdiv(a, b)` is the
ceiling of `a / b`; every size in a manifest is non-negative and every divisor
positive, where floor and truncation agree. Anything else (calls other than
`cdiv`, attributes, subscripts, floats, `/`, `**`, comparisons, keywords)
raises `DimExprError`: the text is parsed with `ast` and never executed.

Stdlib-only.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Mapping

__all__ = ["DimExprError", "cdiv", "evaluate", "names", "parse"]


class DimExprError(ValueError):
    """A dim expression is malformed, uses a forbidden construct, or cannot be evaluated."""


def cdiv(a: int, b: int) -> int:
    """The ceiling of `a / b` for integers (`b` positive)."""
    if b <= 0:
        raise DimExprError(f"cdiv by a non-positive divisor: cdiv({a}, {b})")
    return -(-a // b)


_BINARY = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)


@functools.lru_cache(maxsize=1024)
def parse(text: str) -> ast.expr:
    """Parse and validate `text`; the tree holds only the allowed constructs."""
    if not isinstance(text, str):
        raise DimExprError(f"a dim expression must be a string, got {type(text).__name__}")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as err:
        raise DimExprError(f"malformed dim expression {text!r}: {err.msg}") from None
    _validate(tree.body, text)
    return tree.body


def _validate(node: ast.AST, text: str) -> None:
    if isinstance(node, ast.Constant):
        # bool is an int subclass in Python; a manifest never means True by 1.
        if type(node.value) is not int:
            raise DimExprError(f"only integer literals are allowed in {text!r}, got {node.value!r}")
    elif isinstance(node, ast.Name):
        pass
    elif isinstance(node, ast.BinOp):
        if not isinstance(node.op, _BINARY):
            op = type(node.op).__name__
            raise DimExprError(f"operator {op} is not allowed in dim expression {text!r}")
        _validate(node.left, text)
        _validate(node.right, text)
    elif isinstance(node, ast.UnaryOp):
        if not isinstance(node.op, (ast.USub, ast.UAdd)):
            op = type(node.op).__name__
            raise DimExprError(f"operator {op} is not allowed in dim expression {text!r}")
        _validate(node.operand, text)
    elif isinstance(node, ast.Call):
        if not (isinstance(node.func, ast.Name) and node.func.id == "cdiv"):
            raise DimExprError(f"only `cdiv(a, b)` may be called in dim expression {text!r}")
        if len(node.args) != 2 or node.keywords:
            raise DimExprError(f"`cdiv` takes exactly two positional arguments in {text!r}")
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                raise DimExprError(f"`cdiv` takes exactly two positional arguments in {text!r}")
            _validate(arg, text)
    else:
        what = type(node).__name__
        raise DimExprError(f"{what} is not allowed in dim expression {text!r}")


def names(expr: int | str) -> set[str]:
    """The dim names `expr` mentions (the `cdiv` being called is not a name)."""
    if isinstance(expr, int) and not isinstance(expr, bool):
        return set()
    tree = parse(expr)
    callees = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    return {
        node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and id(node) not in callees
    }


def evaluate(expr: int | str, env: Mapping[str, int]) -> int:
    """The int value of a manifest dim expression (an int or a string) under `env`.

    Raises `DimExprError` for a forbidden construct, an unknown name, or a
    division by zero.
    """
    if isinstance(expr, bool):
        raise DimExprError("a dim expression cannot be a bool")
    if isinstance(expr, int):
        return expr
    return _eval(parse(expr), env, expr)


def _eval(node: ast.expr, env: Mapping[str, int], text: str) -> int:
    if isinstance(node, ast.Constant):
        return int(node.value)
    if isinstance(node, ast.Name):
        try:
            value = env[node.id]
        except KeyError:
            raise DimExprError(f"dim `{node.id}` has no value (in {text!r})") from None
        if isinstance(value, bool) or not isinstance(value, int):
            raise DimExprError(f"dim `{node.id}` must be bound to an int, got {value!r}")
        return value
    if isinstance(node, ast.UnaryOp):
        operand = _eval(node.operand, env, text)
        return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.Call):
        a, b = (_eval(arg, env, text) for arg in node.args)
        return cdiv(a, b)
    assert isinstance(node, ast.BinOp)
    a = _eval(node.left, env, text)
    b = _eval(node.right, env, text)
    op = node.op
    if isinstance(op, ast.Add):
        return a + b
    if isinstance(op, ast.Sub):
        return a - b
    if isinstance(op, ast.Mult):
        return a * b
    if b == 0:
        raise DimExprError(f"division by zero in dim expression {text!r}")
    if isinstance(op, ast.FloorDiv):
        return a // b
    return a % b
