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
    OTHER_KEYS,
    UNKNOWN,
    BoolV,
    DictV,
    DTypeV,
    FloatV,
    IntV,
    LayerV,
    NoneV,
    ObjectV,
    StrV,
    TensorV,
    TupleV,
    const,
    join_all,
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
    return join_all(candidates)


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


# Methods of `str` that take only strings and give a string or a bool: read on a string
# known to the letter (`name.lower()` picks an activation from a table by its name).
_STR_TO_STR = ("lower", "upper", "casefold", "strip", "lstrip", "rstrip", "removeprefix",
               "removesuffix", "replace", "title", "capitalize")  # fmt: skip
_STR_TO_BOOL = ("startswith", "endswith", "isdigit", "isidentifier", "islower", "isupper")


def string_method(text: StrV, name: str, args: list) -> Any:
    """`"GELU".lower()`, `name.startswith("conv")`: the result when `text` and every
    argument are known strings; unknown otherwise (`""` stands for any string)."""
    if not text.value or name not in (*_STR_TO_STR, *_STR_TO_BOOL):
        return UNKNOWN
    if not all(isinstance(a, StrV) and a.value for a in args):
        return UNKNOWN
    try:
        out = getattr(text.value, name)(*(a.value for a in args))
    except (TypeError, ValueError):
        return UNKNOWN
    return StrV(out) if isinstance(out, str) else BoolV(bool(out))


def change_dict(d: DictV, name: str, args: list, kwargs: dict) -> Any:
    """`d.setdefault("k", v)`, `d.update(other)`, `d.pop("k", None)`, `d.clear()`: what
    the call returns, with `d.items` changed as Python would; any other change (a key
    that is not known, a dict that is not) leaves it holding keys nobody knows
    (`OTHER_KEYS`) and no other."""
    items = d.items
    key = args[0].value if args and isinstance(args[0], StrV) and args[0].value else None
    if name == "setdefault" and key is not None and not kwargs:
        if key not in items and OTHER_KEYS in items:
            items[key] = UNKNOWN  # it may be there already, with a value not known
        return items.setdefault(key, args[1] if len(args) > 1 else NoneV())
    if (
        name == "update"
        and len(args) <= 1
        and all(isinstance(a, DictV) for a in args)
        and "**" not in kwargs  # `d.update(**unreadable)`
    ):
        items.update(args[0].items if args else {})
        items.update(kwargs)
        return NoneV()
    if name == "pop" and key is not None and not kwargs and len(args) <= 2:
        if key in items:
            return items.pop(key)
        return args[1] if len(args) == 2 and OTHER_KEYS not in items else UNKNOWN
    if name == "clear" and not args:
        items.clear()
        return NoneV()
    items.clear()  # a change not read: any key may have come or gone
    items[OTHER_KEYS] = UNKNOWN
    return UNKNOWN


def contains(container: Any, key: str) -> bool | None:
    """`"k" in d` of a dict or a tuple of strings known to the letter (None: not known)."""
    if isinstance(container, DictV):
        if key in container.items:
            return True
        return None if OTHER_KEYS in container.items else False
    if isinstance(container, TupleV) and all(
        isinstance(v, StrV) and v.value for v in container.items
    ):
        return any(v.value == key for v in container.items)
    return None
