"""Host-code plumbing the interpreter shares: environments and their joins, truth of
conditions known statically, literal values, import aliases, source text of a node."""

from __future__ import annotations

import ast
from typing import Any

from mimir.host.values import (
    UNKNOWN,
    ApiV,
    BoolV,
    ClassV,
    DTypeV,
    FloatV,
    FuncV,
    IntV,
    KernelV,
    LayerV,
    MethodV,
    NoneV,
    ObjectV,
    StrV,
    TensorV,
    TupleV,
    agree,
    const,
    join_all,
    literal,
)
from mimir.parse.module import ModuleInfo, import_statements

DEAD = "<dead>"  # an environment key: this path has returned or raised


def segment(lines: list[str], node: ast.AST) -> str:
    """The source text of `node` (`ast.get_source_segment` re-splits the file on every call)."""
    first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1  # type: ignore[attr-defined]
    if not 0 <= first <= last < len(lines):
        return ast.unparse(node)
    raw = [line.encode("utf-8") for line in lines[first : last + 1]]
    end = node.end_col_offset or 0  # type: ignore[attr-defined]
    if first == last:
        return raw[0][node.col_offset : end].decode("utf-8", "replace")  # type: ignore[attr-defined]
    raw[0] = raw[0][node.col_offset :]  # type: ignore[attr-defined]
    raw[-1] = raw[-1][:end]
    return "\n".join(r.decode("utf-8", "replace") for r in raw)


def uninformative(v: Any) -> bool:
    if isinstance(v, IntV):
        return v.sym is None
    if isinstance(v, FloatV):  # `_make_divisible(24 * width)` after `(32 * width)`
        return v.value is None
    return v is UNKNOWN or isinstance(v, (NoneV, StrV, BoolV, FloatV, ApiV))


def aliases(info: ModuleInfo) -> dict[str, str]:
    out: dict[str, str] = {}
    for node in import_statements(info.tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def constant(value: Any) -> Any:
    if isinstance(value, bool):
        return BoolV(value)
    if isinstance(value, int):
        return IntV(const(value))
    if isinstance(value, float):
        return FloatV(value)
    if isinstance(value, str):
        return StrV(value)
    if value is None:
        return NoneV()
    return UNKNOWN


def truth_of(v: Any) -> bool | None:
    if isinstance(v, BoolV):
        return v.value
    if isinstance(v, IntV):
        k = literal(v.sym)
        return None if k is None or v.loose else k != 0
    if isinstance(v, NoneV):
        return False
    if isinstance(v, StrV):
        return bool(v.value)
    if isinstance(v, (ObjectV, LayerV, FuncV, ClassV, KernelV, DTypeV)):
        return True
    return None


def is_none(a: Any, b: Any) -> bool | None:
    if isinstance(b, NoneV):
        if isinstance(a, NoneV):
            return True
        if a is UNKNOWN or isinstance(a, (MethodV,)):
            return None
        return False
    return None


def unpack(value: Any, n: int) -> list[Any] | None:
    if isinstance(value, TupleV):
        return list(value.items) if len(value.items) == n else None
    if isinstance(value, LayerV) and value.kind in ("ModuleList", "Sequential") and value.exact:
        return list(value.items) if len(value.items) == n else None
    if isinstance(value, TensorV) and value.shape:
        size = literal(value.shape[0])
        if size == n:
            return [TensorV(value.shape[1:], value.dtype, value.lib)] * n
    return None


def literal_items(v: Any) -> list[Any] | None:
    if isinstance(v, TupleV):
        return list(v.items)
    if isinstance(v, LayerV) and v.kind in ("ModuleList", "Sequential") and v.exact:
        return list(v.items)
    if isinstance(v, LayerV) and v.kind == "ModuleDict":
        return [StrV(k) for k in v.named]
    return None


def has_break(body: list[ast.stmt]) -> bool:
    return any(isinstance(n, (ast.Break, ast.Continue)) for s in body for n in ast.walk(s))


def join_envs(envs: list[dict]) -> dict:
    live = [e for e in envs if not e.get(DEAD)]
    if not live:
        return {DEAD: True}
    out: dict[str, Any] = {}
    for name in dict.fromkeys(n for e in live for n in e):  # in order: `self.items()` reads it
        values = [e.get(name, UNKNOWN) for e in live]
        if any(name not in e for e in live):
            out[name] = UNKNOWN
            continue
        out[name] = join_all(values)
    return out


def envs_agree(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(agree(a[k], b[k]) for k in a)


def replace_env(env: dict, new: dict) -> None:
    env.clear()
    env.update(new)


def as_load(target: ast.expr) -> ast.expr:
    if isinstance(target, ast.Name):
        return ast.Name(target.id, ast.Load(), lineno=target.lineno, col_offset=target.col_offset)
    return target


def decorator_name(d: ast.expr) -> str | None:
    return d.id if isinstance(d, ast.Name) else None


_READS = frozenset({"get", "keys", "items", "values", "pop", "copy"})  # none adds a keyword


def unseen_keywords(fn: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> frozenset[str]:
    """The keywords `fn`'s own `**name` can never hold when it is passed on as it came:
    the names of `fn`'s parameters that a keyword can give (Python binds those to the
    parameters). Empty when `name` is not `fn`'s `**` parameter, or when `fn` may rebind it
    or add to it (any use but `**name` in a call or a read such as `name.get(...)`)."""
    if fn.args.kwarg is None or fn.args.kwarg.arg != name:
        return frozenset()
    allowed: set[int] = set()
    for n in ast.walk(fn):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and n is not fn:
            a = n.args
            every = [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
            if any(p is not None and p.arg == name for p in every):
                return frozenset()  # a nested function's own parameter of that name
        if isinstance(n, ast.keyword) and n.arg is None and isinstance(n.value, ast.Name):
            allowed.add(id(n.value))
        if isinstance(n, ast.Attribute) and n.attr in _READS and isinstance(n.value, ast.Name):
            allowed.add(id(n.value))
    for n in ast.walk(fn):
        if isinstance(n, ast.Name) and n.id == name and id(n) not in allowed:
            return frozenset()
    return frozenset(p.arg for p in [*fn.args.args, *fn.args.kwonlyargs])
