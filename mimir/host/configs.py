"""Configuration classes a model file imports: their `__init__`'s literal defaults.

A model file of a library such as transformers builds every module from `config`, an
instance of a configuration class defined in another module of the project (`from
.configuration_bert import BertConfig`) whose `__init__` takes each size with a literal
default and stores it (`self.hidden_size = hidden_size`). Those defaults are a
configuration the project states: `imported_config` reads them, without importing
anything, when the file imports exactly one class named `...Config` from a module of its
project. A class-level `attribute_map` (`{"hidden_size": "n_embd"}`) gives the other
names an attribute is read by. An attribute set any other way stays unknown, except
`_attn_implementation` of a transformers configuration that leaves it open: "eager", the
implementation whose code the model file holds.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mimir.diagnostics.diagnostic import Span
from mimir.project.resolve import resolve_module


@dataclass(frozen=True)
class ConfigClass:
    name: str
    defaults: dict[str, Any]  # attribute -> its literal default
    aliases: dict[str, str] = field(default_factory=dict)  # attribute_map
    span: Span | None = None  # the class, for the label that names the configuration


_PARSED: dict[tuple[str, int, int], ast.Module | None] = {}


def imported_config(path: str, tree: ast.Module) -> ConfigClass | None:
    """The one configuration class the module at `path` imports from its project."""
    found = [
        (stmt, alias.name)
        for stmt in tree.body
        if isinstance(stmt, ast.ImportFrom)
        for alias in stmt.names
        if alias.name.endswith("Config") and alias.asname is None
    ]
    if len(found) != 1:
        return None
    stmt, name = found[0]
    try:
        target = resolve_module(Path(path).resolve(), stmt.module, stmt.level, ())
    except (OSError, ValueError):
        return None
    if target.path is None:
        return None
    module = _parse(target.path)
    body = module.body if module is not None else []
    cls = next((c for c in body if isinstance(c, ast.ClassDef) and c.name == name), None)
    if cls is None:
        return None
    init = next(
        (f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None
    )
    if init is None:
        return None
    params = [*init.args.posonlyargs, *init.args.args][1:]
    given: dict[str, Any] = {}
    with_default = params[len(params) - len(init.args.defaults) :]
    for p, d in zip(with_default, init.args.defaults, strict=True):
        value = _literal(d)
        if value is not _NOT:
            given[p.arg] = value
    for p, d in zip(init.args.kwonlyargs, init.args.kw_defaults, strict=True):
        value = _literal(d)
        if d is not None and value is not _NOT:
            given[p.arg] = value
    defaults: dict[str, Any] = {}
    if not _run(init.body, dict(given), defaults):
        return None  # the defaults raise: no configuration
    aliases: dict[str, str] = {}
    for s in cls.body:
        if (
            isinstance(s, ast.Assign)
            and len(s.targets) == 1
            and isinstance(s.targets[0], ast.Name)
            and s.targets[0].id == "attribute_map"
            and isinstance(s.value, ast.Dict)
        ):
            for k, v in zip(s.value.keys, s.value.values, strict=True):
                if isinstance(k, ast.Constant) and isinstance(v, ast.Constant):
                    if isinstance(k.value, str) and isinstance(v.value, str):
                        aliases[k.value] = v.value
    if not defaults:
        return None
    if any(_base_name(b) in _PRETRAINED for b in cls.bases):
        # `PreTrainedModel.__init__` picks the attention implementation the configuration
        # leaves open; every one transformers registers returns what the eager one does
        # (the output as batch, tokens, heads, head size), so the eager path stands for them
        defaults.setdefault("_attn_implementation", "eager")
    lines = target.path.read_text(encoding="utf-8").splitlines()
    col = lines[cls.lineno - 1].find(cls.name) + 1 if cls.lineno <= len(lines) else 1
    span = Span(str(target.path), cls.lineno, max(col, 1), cls.lineno, max(col, 1) + len(name))
    return ConfigClass(name, defaults, aliases, span)


_NOT = object()
# transformers' base class of configurations, under both spellings it has had
_PRETRAINED = frozenset({"PretrainedConfig", "PreTrainedConfig"})


def _base_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else None


def _run(body: list[ast.stmt], env: dict[str, Any], attrs: dict[str, Any]) -> bool:
    """`__init__`'s statements over the defaults: `self.x = ...` and local names of values
    computed from literals (`act_info = self.feed_forward_proj.split("-")`, `act_info[-1]`,
    `a == "gated"`, `x if x is not None else self.n`), an `if` whose test is known taken
    or not; what a branch of unknown test assigns is unknown. False when the defaults
    reach a `raise`."""
    for s in body:
        if isinstance(s, ast.Assign) and len(s.targets) == 1:
            target, value = s.targets[0], _value(s.value, env, attrs)
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
                if target.value.id == "self":
                    if not isinstance(value, _FLAT):  # `_NOT`, or a tuple a list would be
                        attrs.pop(target.attr, None)
                    else:
                        attrs[target.attr] = value
            elif isinstance(target, ast.Name):
                if value is _NOT:
                    env.pop(target.id, None)
                else:
                    env[target.id] = value
        elif isinstance(s, ast.If):
            test = _value(s.test, env, attrs)
            if isinstance(test, bool):
                if not _run(s.body if test else s.orelse, env, attrs):
                    return False
            else:
                for n in ast.walk(s):
                    if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store):
                        if isinstance(n.value, ast.Name) and n.value.id == "self":
                            attrs.pop(n.attr, None)
                    elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                        env.pop(n.id, None)
        elif isinstance(s, ast.Raise):
            return False
        else:  # a loop, a with, an augmented assignment: what it assigns is unknown
            for n in ast.walk(s):
                if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store):
                    if isinstance(n.value, ast.Name) and n.value.id == "self":
                        attrs.pop(n.attr, None)
                elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                    env.pop(n.id, None)
    return True


_FLAT = (type(None), bool, int, float, str)


def _value(node: ast.expr, env: dict[str, Any], attrs: dict[str, Any]) -> Any:
    """A literal expression over `env` and the attributes set so far, or `_NOT`."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, _FLAT) else _NOT
    if isinstance(node, ast.Name):
        return env.get(node.id, _NOT)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return attrs.get(node.attr, _NOT) if node.value.id == "self" else _NOT
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not node.keywords:
        base = _value(node.func.value, env, attrs)
        args = [_value(a, env, attrs) for a in node.args]
        if isinstance(base, str) and node.func.attr == "split" and len(args) == 1:
            if isinstance(args[0], str) and args[0]:
                return tuple(base.split(args[0]))
        return _NOT
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len":
        if len(node.args) == 1 and not node.keywords:
            v = _value(node.args[0], env, attrs)
            return len(v) if isinstance(v, (str, tuple)) else _NOT
        return _NOT
    if isinstance(node, ast.Subscript):
        base, index = _value(node.value, env, attrs), _value(node.slice, env, attrs)
        if isinstance(base, tuple) and isinstance(index, int) and not isinstance(index, bool):
            return base[index] if -len(base) <= index < len(base) else _NOT
        return _NOT
    if isinstance(node, ast.IfExp):
        test = _value(node.test, env, attrs)
        if isinstance(test, bool):
            return _value(node.body if test else node.orelse, env, attrs)
        return _NOT
    if isinstance(node, ast.BoolOp):
        values = [_value(v, env, attrs) for v in node.values]
        if any(not isinstance(v, bool) for v in values):
            return _NOT
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        v = _value(node.operand, env, attrs)
        return (not v) if isinstance(v, bool) else _NOT
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _value(node.operand, env, attrs)
        return -v if isinstance(v, (int, float)) and not isinstance(v, bool) else _NOT
    if isinstance(node, ast.BinOp) and isinstance(
        node.op, (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv)
    ):
        a, b = _value(node.left, env, attrs), _value(node.right, env, attrs)
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (a, b)):
            return _NOT
        if isinstance(node.op, ast.Add):
            return a + b
        if isinstance(node.op, ast.Sub):
            return a - b
        if isinstance(node.op, ast.Mult):
            return a * b
        return a // b if b else _NOT
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        a, b = _value(node.left, env, attrs), _value(node.comparators[0], env, attrs)
        if a is _NOT or b is _NOT:
            return _NOT
        op = node.ops[0]
        if isinstance(op, ast.Is):
            return a is b if b is None or a is None else _NOT
        if isinstance(op, ast.IsNot):
            return a is not b if b is None or a is None else _NOT
        if isinstance(op, (ast.Eq, ast.NotEq)):
            if type(a) is not type(b) and not (
                isinstance(a, (int, float)) and isinstance(b, (int, float))
            ):
                return isinstance(op, ast.NotEq)  # a str is never equal to an int
            return (a == b) == isinstance(op, ast.Eq)
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b)):
            if isinstance(op, ast.Gt):
                return a > b
            if isinstance(op, ast.GtE):
                return a >= b
            if isinstance(op, ast.Lt):
                return a < b
            if isinstance(op, ast.LtE):
                return a <= b
        return _NOT
    return _NOT


def _literal(node: ast.expr | None) -> Any:
    if node is None:
        return _NOT
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        return _NOT
    return value if value is None or isinstance(value, (bool, int, float, str)) else _NOT


def _parse(path: Path) -> ast.Module | None:
    try:
        st = path.stat()
        key = (str(path), st.st_mtime_ns, st.st_size)
        if key not in _PARSED:
            if len(_PARSED) > 256:
                _PARSED.clear()
            _PARSED[key] = ast.parse(path.read_text(encoding="utf-8"))
        return _PARSED[key]
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def config_table(path: str, tree: ast.Module, names: set[str]) -> ConfigClass | None:
    """A table of named configurations the module states: a dict literal of two or more
    entries, each a `dict(n_layer=12, n_head=12, n_embd=768)` (or a `{"n_head": 12}`)
    with the same keys, at least one an int, that the module subscripts (`{...}[model_type]`
    merged into the config, as minGPT's `GPT.__init__` and nanoGPT's `from_pretrained`
    do). Its first entry is one configuration the project states; it is taken only when
    at least two of its keys are attributes the module reads of a configuration (`names`:
    `config.n_head`), so a table of something else is not read as one."""
    read = {
        n.attr
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in names
    }
    subscripted = {
        n.value.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name)
    }
    tables: list[tuple[ast.Dict, str | None]] = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Dict):
            tables.append((n.value, None))
        elif (
            isinstance(n, ast.Assign)
            and len(n.targets) == 1
            and isinstance(n.targets[0], ast.Name)
            and isinstance(n.value, ast.Dict)
            and n.targets[0].id in subscripted
        ):
            tables.append((n.value, n.targets[0].id))
    for table, _ in tables:
        entries = [_entry(v) for v in table.values]
        if len(entries) < 2 or any(e is None for e in entries):
            continue
        if any(not (isinstance(k, ast.Constant) and isinstance(k.value, str)) for k in table.keys):
            continue
        keys = set(entries[0])  # type: ignore[arg-type]
        if any(set(e) != keys for e in entries) or len(keys & read) < 2:  # type: ignore[arg-type]
            continue
        first = entries[0]
        assert first is not None
        if not any(isinstance(v, int) and not isinstance(v, bool) for v in first.values()):
            continue
        key = table.keys[0]
        assert isinstance(key, ast.Constant)
        value = table.values[0]
        span = Span(
            path,
            key.lineno,
            key.col_offset + 1,
            value.end_lineno or value.lineno,
            (value.end_col_offset or value.col_offset) + 1,
        )
        return ConfigClass(repr(key.value), first, {}, span)
    return None


def _entry(node: ast.expr) -> dict[str, Any] | None:
    """`dict(a=1, b=2)` or `{"a": 1, "b": 2}` of literals, as a dict."""
    out: dict[str, Any] = {}
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
        if node.args:
            return None
        for kw in node.keywords:
            value = _literal(kw.value)
            if kw.arg is None or value is _NOT:
                return None
            out[kw.arg] = value
        return out or None
    if isinstance(node, ast.Dict):
        for k, v in zip(node.keys, node.values, strict=True):
            value = _literal(v)
            if not (isinstance(k, ast.Constant) and isinstance(k.value, str)) or value is _NOT:
                return None
            out[k.value] = value
        return out or None
    return None
