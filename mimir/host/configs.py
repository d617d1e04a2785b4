"""Configuration classes a model file imports: their `__init__`'s literal defaults.

A model file of a library such as transformers builds every module from `config`, an
instance of a configuration class defined in another module of the project (`from
.configuration_bert import BertConfig`) whose `__init__` takes each size with a literal
default and stores it (`self.hidden_size = hidden_size`). Those defaults are a
configuration the project states: `imported_config` reads them, without importing
anything, when the file imports exactly one class named `...Config` from a module of its
project. A class-level `attribute_map` (`{"hidden_size": "n_embd"}`) gives the other
names an attribute is read by. An attribute set any other way stays unknown.
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
    for s in init.body:  # the top level of __init__ only: a branch may not run
        if (
            isinstance(s, ast.Assign)
            and len(s.targets) == 1
            and isinstance(s.targets[0], ast.Attribute)
            and isinstance(s.targets[0].value, ast.Name)
            and s.targets[0].value.id == "self"
        ):
            attr = s.targets[0].attr
            if isinstance(s.value, ast.Name) and s.value.id in given:
                defaults[attr] = given[s.value.id]
            elif _literal(s.value) is not _NOT:
                defaults[attr] = _literal(s.value)
            else:
                defaults.pop(attr, None)
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
    lines = target.path.read_text(encoding="utf-8").splitlines()
    col = lines[cls.lineno - 1].find(cls.name) + 1 if cls.lineno <= len(lines) else 1
    span = Span(str(target.path), cls.lineno, max(col, 1), cls.lineno, max(col, 1) + len(name))
    return ConfigClass(name, defaults, aliases, span)


_NOT = object()


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
