"""Python's operators on host values: `and`/`or`, arithmetic that makes floats, `math`
functions of literals, comparisons of sizes, and a module's dtype conversion.

Functions of values only (no interpreter state), so the interpreter and its mixins share
them; a comparison of sizes is a Z3 condition, a float computed from literals keeps its
value (`int(2 * 4096 / 3)` is 2730).
"""

from __future__ import annotations

import ast
from typing import Any

from mimir.host import torch_table as tt
from mimir.host.values import (
    UNKNOWN,
    BoolV,
    DTypeV,
    FloatV,
    IntV,
    LayerV,
    ObjectV,
    StrV,
    TensorV,
    TupleV,
    const,
    join,
    literal,
)
from mimir.solve.z3lib import z3


def short_circuit(values: list[Any], truths: list[bool | None], is_or: bool) -> Any:
    """`a or b`, `a and b` on values that are not all bools: the operand Python returns
    (`out_features or in_features`), or what every operand it may return agrees on."""
    stop = True if is_or else False
    candidates = []
    for v, t in zip(values[:-1], truths[:-1], strict=True):
        if t is stop:
            candidates.append(v)
            break
        if t is None:
            candidates.append(v)
    else:
        candidates.append(values[-1])
    out = candidates[0]
    for v in candidates[1:]:
        out = join(out, v)
    return out


def float_op(op: ast.operator, a: IntV | FloatV, b: IntV | FloatV) -> FloatV:
    """Arithmetic that makes a float; its value when both sides are literals."""
    x = a.value if isinstance(a, FloatV) else literal(a.sym)
    y = b.value if isinstance(b, FloatV) else literal(b.sym)
    if x is None or y is None:
        return FloatV()
    ops = {
        ast.Add: lambda: x + y,
        ast.Sub: lambda: x - y,
        ast.Mult: lambda: x * y,
        ast.Div: lambda: x / y,
        ast.Pow: lambda: float(x) ** y,
        ast.FloorDiv: lambda: float(x // y),
    }
    make = ops.get(type(op))
    try:
        value = make() if make else None
    except (ZeroDivisionError, OverflowError, ValueError):
        return FloatV()
    return FloatV(float(value)) if isinstance(value, (int, float)) else FloatV()


def module_dtype(name: str, args: list, kwargs: dict) -> str | None:
    """The dtype `module.double()`, `.half()`, `.to(torch.float64)` converts weights to."""
    if name in ("float", "double", "half", "bfloat16"):
        return tt.DTYPE_ALIASES[name]
    if name == "to":
        for v in [*args, *kwargs.values()]:
            if isinstance(v, DTypeV):
                return v.name
    return None


def convert(module: Any, dtype: str, seen: set[int]) -> None:
    """Every layer inside `module` now holds weights of `dtype` (conversion is in place)."""
    if id(module) in seen:
        return
    seen.add(id(module))
    if isinstance(module, LayerV):
        module.dtype = dtype
        for m in [*module.items, *module.named.values()]:
            convert(m, dtype, seen)
    elif isinstance(module, ObjectV):
        if isinstance(module.layer, LayerV):
            convert(module.layer, dtype, seen)
        for name, v in list(module.attrs.items()):
            if isinstance(v, (LayerV, ObjectV)):
                convert(v, dtype, seen)
            elif isinstance(v, TensorV) and tt.is_float(v.dtype) is not False:
                module.attrs[name] = v.with_dtype(dtype)  # a parameter or a float buffer


def math_call(name: str, args: list) -> Any:
    """`math.sqrt(d)`, `math.log(n)`: a float, known when its arguments are."""
    import math

    values = []
    for a in args:
        if isinstance(a, FloatV) and a.value is not None:
            values.append(a.value)
        elif isinstance(a, IntV) and literal(a.sym) is not None:
            values.append(float(literal(a.sym)))  # type: ignore[arg-type]
        else:
            return IntV(None) if name in ("ceil", "floor", "prod", "gcd", "lcm") else FloatV()
    fn = getattr(math, name, None)
    if fn is None or not callable(fn):
        return UNKNOWN
    try:
        out = fn(*values)
    except (ValueError, OverflowError, TypeError, ZeroDivisionError):
        return UNKNOWN
    if isinstance(out, bool):
        return BoolV(out)
    if isinstance(out, int):
        return IntV(const(out))
    return FloatV(out) if isinstance(out, float) else UNKNOWN


def relation(op: ast.cmpop, a: Any, b: Any) -> Any:
    table = {
        ast.Eq: lambda: a == b,
        ast.NotEq: lambda: a != b,
        ast.Lt: lambda: a < b,
        ast.LtE: lambda: a <= b,
        ast.Gt: lambda: a > b,
        ast.GtE: lambda: a >= b,
    }
    make = table.get(type(op))
    return make() if make else None


def tuples_equal(a: TupleV, b: TupleV) -> Any:
    """Two tuples of sizes are equal: a bool, a Z3 condition, or None when unknown."""
    if len(a.items) != len(b.items):
        return False
    conds = []
    for x, y in zip(a.items, b.items, strict=True):
        if x.sym is None or y.sym is None:
            return None
        if x.sym.value is not None and y.sym.value is not None:
            if x.sym.value != y.sym.value:
                return False
            continue
        conds.append(x.sym.term == y.sym.term)
    return True if not conds else z3.And(*conds)


def percent(fmt: StrV, arg: Any) -> Any:
    """`"denselayer%d" % (i + 1)` of literal values: the text (unknown otherwise; `""`
    stands for any string)."""
    values = []
    for v in arg.items if isinstance(arg, TupleV) else (arg,):
        if isinstance(v, IntV) and not v.loose and literal(v.sym) is not None:
            values.append(literal(v.sym))
        elif isinstance(v, StrV) and v.value:
            values.append(v.value)
        else:
            return UNKNOWN
    if not fmt.value:
        return UNKNOWN
    try:
        return StrV(fmt.value % tuple(values))
    except (TypeError, ValueError):
        return UNKNOWN
