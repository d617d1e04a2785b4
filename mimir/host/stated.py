"""Configurations a project states: literal constructor calls of a class, anywhere in it.

`ViT(image_size=256, patch_size=32, dim=1024, ...)` in a test or an example says which
sizes the class is built with. `literal_call(path, name)` finds the first call of a class
named `name` whose arguments are all literals: in the file itself first, then in the
project's other files (sorted by path) that import that name. The project is the folder
above the file's outermost package (one more up from a `src` layout). Files are read as
text and only those that mention the name are parsed; nothing is imported or executed.
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mimir.project.resolve import package_root

_MAX_FILES = 3000
_MAX_BYTES = 400_000
_SKIP = {".git", ".venv", "venv", "node_modules", "__pycache__", "build", "dist", ".tox"}


@dataclass(frozen=True)
class StatedCall:
    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    args: tuple[Any, ...]
    kwargs: tuple[tuple[str, Any], ...]
    text: str  # the call as written (shortened)


def literal_call(
    path: str, tree: ast.Module, name: str, accepts: set[str] | None
) -> StatedCall | None:
    """The first literal call of class `name`, in this file's tree or in a project file
    that imports it from this module (or from a package above it that re-exports it).
    `accepts`: the keywords `__init__` takes (None: any); a call passing others is not a
    configuration of this class."""
    found = _in_tree(path, tree, name, accepts)
    if found is not None:
        return found
    root = _project_root(Path(path))
    module = _dotted(Path(path).resolve(), root)
    for other, text in _project_files(str(root)):
        if other == os.path.abspath(path) or f"{name}(" not in text or "import" not in text:
            continue
        if not any(name in line and "import" in line for line in text.splitlines()):
            continue
        try:
            parsed = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        if not _imports(parsed, Path(other), root, module, name):
            continue
        found = _in_tree(other, parsed, name, accepts)
        if found is not None:
            return found
    return None


def _dotted(path: Path, root: Path) -> str:
    try:
        rel = path.with_suffix("").relative_to(root)
    except ValueError:
        return path.stem
    parts = [p for p in rel.parts if p != "src"]
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(tree: ast.Module, path: Path, root: Path, module: str, name: str) -> bool:
    """Whether the file imports `name` from `module` or a package above it."""
    here = _dotted(path, root).split(".")
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or not any(a.name == name for a in node.names):
            continue
        source = node.module or ""
        if node.level:
            base = here[: len(here) - node.level]
            source = ".".join([*base, *([source] if source else [])])
        if source == module or (source and module.startswith(source + ".")):
            return True
    return False


def _in_tree(path: str, tree: ast.Module, name: str, accepts: set[str] | None) -> StatedCall | None:
    calls = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and (
            (isinstance(n.func, ast.Name) and n.func.id == name)
            or (isinstance(n.func, ast.Attribute) and n.func.attr == name)
        )
    ]
    for call in sorted(calls, key=lambda c: (c.lineno, c.col_offset)):
        try:
            args = tuple(ast.literal_eval(a) for a in call.args)
            kwargs = tuple((k.arg, ast.literal_eval(k.value)) for k in call.keywords if k.arg)
        except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
            continue
        if any(isinstance(a, ast.Starred) for a in call.args) or any(
            k.arg is None for k in call.keywords
        ):
            continue
        if not args and not kwargs:
            continue
        if accepts is not None and any(k not in accepts for k, _ in kwargs):
            continue  # a keyword this class does not take: another class of that name
        text = ast.unparse(call)
        return StatedCall(
            path,
            call.lineno,
            call.col_offset + 1,
            call.end_lineno or call.lineno,
            (call.end_col_offset or call.col_offset) + 1,
            args,
            kwargs,
            text if len(text) <= 60 else text[:57] + "...",
        )
    return None


def _project_root(path: Path) -> Path:
    root = package_root(path.resolve())
    return root.parent if root.name == "src" else root


_TEXTS: dict[str, tuple[int, int, str]] = {}  # path -> (mtime_ns, size, text), per process


def _project_files(root: str) -> tuple[tuple[str, str], ...]:
    """Every Python file of the project (bounded), with its text; a file is read again
    only when its size or modification time changed."""
    out: list[tuple[str, str]] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP and not d.startswith("."))
        for f in sorted(files):
            if not f.endswith(".py"):
                continue
            full = os.path.abspath(os.path.join(folder, f))
            try:
                st = os.stat(full)
                if st.st_size > _MAX_BYTES:
                    continue
                seen = _TEXTS.get(full)
                if seen is None or seen[:2] != (st.st_mtime_ns, st.st_size):
                    with open(full, encoding="utf-8") as handle:
                        seen = (st.st_mtime_ns, st.st_size, handle.read())
                    _TEXTS[full] = seen
                out.append((full, seen[2]))
            except (OSError, UnicodeDecodeError):
                continue
            if len(out) >= _MAX_FILES:
                return tuple(out)
    return tuple(out)
