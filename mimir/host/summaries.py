"""Summaries: a function checked once per kind of input, applied at every such call.

A call is keyed by the function and a fingerprint of what it is given: each tensor's
sizes (Z3 terms are hash-consed, so equal sizes have equal ids), dtype and origin;
each int's size; each instance's class and the attributes its methods read (not the
ones only `__init__` writes: `layer_id` does not make two blocks differ). A second
call with the same key gets the first call's result and what that call assumed of its
inputs, without running the body again: 32 identical transformer blocks are checked
once. A function that writes attributes or fills containers is never summarised, as its
effect is more than its result.
"""

from __future__ import annotations

import ast
from functools import cache
from typing import Any

from mimir.host.values import (
    UNKNOWN,
    ApiV,
    BoolV,
    CachesV,
    CacheV,
    ClassV,
    ConfigV,
    DictV,
    DTypeV,
    FloatV,
    FuncV,
    IntV,
    LayerV,
    NoneV,
    ObjectV,
    OptionalV,
    ShapeOfV,
    StrV,
    TensorV,
    TupleV,
)

_DEPTH = 4
_MUTATING = {"append", "extend", "insert", "pop", "remove", "clear", "update", "add_module"}
_MUTATING |= {"register_buffer", "register_parameter", "setdefault"}


def fingerprint(v: Any, depth: int = 0) -> Any:
    """A hashable key equal for values the interpreter cannot tell apart (None: no key)."""
    if v is UNKNOWN:
        return "?"
    if isinstance(v, TensorV):
        # of unknown rank, a tensor's sizes are read off its origin as the callee goes (free
        # sizes of their own): a summary made for one origin says nothing of another's (not
        # last: a part whose last item is None has no key, see `HostChecker._summary_key`)
        origin = v.origin if v.shape is None else None
        return ("T", origin, _sizes(v.shape), v.dtype, v.lib, _sizes(v.tail))
    if isinstance(v, IntV):
        return ("I", None if v.sym is None else v.sym.term.get_id(), v.loose)
    if isinstance(v, BoolV):
        return ("B", v.value, None if v.term is None else v.term.get_id())
    if isinstance(v, CacheV):
        parts = tuple(fingerprint(p, depth + 1) for p in v.parts)
        return None if None in parts else ("Ca", v.kind, parts)
    if isinstance(v, CachesV):
        options = tuple(fingerprint(c, depth + 1) for c in v.options)
        return None if None in options else ("Cs", options)
    if isinstance(v, (StrV, FloatV, NoneV, DTypeV, ApiV)):
        return (type(v).__name__, getattr(v, "value", getattr(v, "name", None)))
    if isinstance(v, TupleV):
        items = tuple(fingerprint(x, depth + 1) for x in v.items)
        return None if None in items else ("Tu", v.is_list, items)
    if isinstance(v, OptionalV):
        inner = fingerprint(v.value, depth + 1)
        return None if inner is None else ("Op", inner)
    if isinstance(v, ShapeOfV):
        inner = fingerprint(v.tensor, depth + 1)
        return None if inner is None else ("S", inner)
    if isinstance(v, (ConfigV, DictV)):
        return ("id", id(v))
    if isinstance(v, ClassV):
        return ("Cl", id(v.node))
    if isinstance(v, FuncV):
        owner = fingerprint(v.owner, depth + 1) if v.owner is not None else "-"
        return None if owner is None else ("F", id(v.node), owner)
    if depth >= _DEPTH:
        return ("id", id(v))
    if isinstance(v, LayerV):
        parts = (
            tuple(fingerprint(x, depth + 1) for x in v.args),
            tuple(sorted((k, fingerprint(x, depth + 1)) for k, x in v.kwargs.items())),
            tuple(fingerprint(x, depth + 1) for x in v.items),
            tuple(sorted((k, fingerprint(x, depth + 1)) for k, x in v.named.items())),
        )
        return ("L", v.kind, v.exact, v.open, v.dtype, parts)
    if isinstance(v, ObjectV):
        attrs = tuple(
            (k, fingerprint(v.attrs.get(k, UNKNOWN), depth + 1)) for k in attributes_read(v.cls)
        )
        layer = fingerprint(v.layer, depth + 1) if v.layer is not None else "-"
        return ("O", id(v.cls), attrs, layer)
    return None


def _sizes(shape: Any) -> Any:
    if shape is None:
        return None
    return tuple(None if s is None else s.term.get_id() for s in shape)


@cache
def attributes_read(cls: ast.ClassDef) -> tuple[str, ...]:
    """The `self.X` a class's methods other than `__init__` read, sorted."""
    names: set[str] = set()
    for fn in cls.body:
        if not isinstance(fn, ast.FunctionDef) or fn.name == "__init__" or not fn.args.args:
            continue
        me = fn.args.args[0].arg
        for n in ast.walk(fn):
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == me:
                names.add(n.attr)
    return tuple(sorted(names))


@cache
def summarisable(fn: ast.FunctionDef) -> bool:
    """Whether a call's whole effect is its result (it writes no attribute, fills nothing)."""
    for n in ast.walk(fn):
        if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            if any(isinstance(t, (ast.Attribute, ast.Subscript)) for t in targets):
                return False
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
            if n.func.attr in _MUTATING:
                return False
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "setattr":
            return False
        if isinstance(n, (ast.Global, ast.Nonlocal, ast.Yield, ast.YieldFrom)):
            return False
    return True
