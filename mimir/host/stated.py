"""Configurations a project states: literal constructor calls of a class, anywhere in it.

`ViT(image_size=256, patch_size=32, dim=1024, ...)` in a test or an example says which
sizes the class is built with. `literal_call(path, name)` finds the first call of a class
named `name` whose arguments are all literals: in the file itself first, then in the
project's other files (sorted by path) that import that name, then in the Python blocks
of the project's README that import it (`v = ViT(image_size=256, ...)` of a usage
example). The project is the folder
above the file's outermost package (one more up from a `src` layout). Files are read as
text and only those that mention the name are parsed; nothing is imported or executed.
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mimir.parse.module import walk_statements
from mimir.project.index import shown_path
from mimir.project.resolve import package_root

_MAX_FILES = 3000
_CANDIDATES = 12  # other files parsed per class at most
_OWN = "<own calls>"  # the key under which `listed` keeps the checked file's own calls
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
    path: str,
    tree: ast.Module,
    name: str,
    accepts: set[str] | None,
    listed: dict[str, Any] | None = None,
) -> StatedCall | None:
    """The first literal call of class `name`, in this file's tree or in a project file
    that imports it from this module (or from a package above it that re-exports it).
    `accepts`: the keywords `__init__` takes (None: any); a call passing others is not a
    configuration of this class. At most `_CANDIDATES` other files are parsed; `listed`
    keeps the project's files between calls of one check."""
    own = listed.get(_OWN) if listed is not None else None
    if own is None:
        own = _calls(tree)
        if listed is not None:
            listed[_OWN] = own  # type: ignore[assignment]
    found = _in_calls(path, own.get(name, []), name, accepts)  # type: ignore[union-attr]
    if found is not None:
        return found
    root = _project_root(Path(path))
    module = _dotted(Path(path).resolve(), root)
    here = os.path.abspath(path)
    mention = re.compile(rf"import[^\n]*\b{re.escape(name)}\b")
    # a literal call's first argument is a literal, positional or by keyword: a file with
    # no such call of `name` is not parsed
    literal = re.compile(
        rf"\b{re.escape(name)}\(\s*(?:\w+\s*=\s*)?(?:[-+.\d'\"(\[{{]|True\b|False\b|None\b)"
    )
    parsed = 0
    key = str(root)
    if listed is None or key not in listed:
        files = _project_files(key)
        if listed is not None:
            listed[key] = files
    else:
        files = listed[key]
    for k in _calling(files, name):
        other, text = files[k]
        if other == here or not mention.search(text) or not literal.search(text):
            continue
        if parsed >= _CANDIDATES:
            break
        parsed += 1
        index = _index(other, text)
        if index is None or not _imports(index[1], Path(other), root, module, name):
            continue
        found = _in_calls(other, index[0].get(name, []), name, accepts)
        if found is not None:
            return found
    for readme, blocks in _readme_blocks(key):
        for tree in blocks:
            calls = _calls(tree)
            imports = [n for n in walk_statements(tree) if isinstance(n, ast.ImportFrom)]
            if name in calls and _imports(imports, Path(readme), root, module, name):
                found = _in_calls(readme, calls[name], name, accepts)
                if found is not None:
                    return found
    return None


_READMES = ("README.md", "readme.md", "README.markdown")
_FENCE = re.compile(r"^(\s*)(```|~~~)\s*([\w+-]*)")
_BLOCKS: dict[str, tuple[tuple[int, int], list[tuple[str, list[ast.Module]]]]] = {}


def _readme_blocks(root: str) -> list[tuple[str, list[ast.Module]]]:
    """The Python code blocks of the project's README (fenced, marked `python` or not),
    each parsed with the README's own line numbers; a block that does not parse (a shell
    session, `>>>` prompts) is left out. Read again only when the README changes."""
    for name in _READMES:
        path = os.path.join(root, name)
        try:
            st = os.stat(path)
        except OSError:
            continue
        if st.st_size > _MAX_BYTES:
            return []
        cached = _BLOCKS.get(path)
        if cached is None or cached[0] != (st.st_mtime_ns, st.st_size):
            try:
                with open(path, encoding="utf-8") as handle:
                    text = handle.read()
            except (OSError, UnicodeDecodeError):
                return []
            cached = ((st.st_mtime_ns, st.st_size), [(os.path.abspath(path), _code_blocks(text))])
            _BLOCKS[path] = cached
        return cached[1]
    return []


def _code_blocks(text: str) -> list[ast.Module]:
    """Each fenced block of `text` in Python (or no language), parsed where it stands."""
    blocks: list[ast.Module] = []
    lines = text.splitlines()
    k = 0
    while k < len(lines):
        opening = _FENCE.match(lines[k])
        if opening is None:
            k += 1
            continue
        indent, fence, language = opening.groups()
        end = next(
            (j for j in range(k + 1, len(lines)) if lines[j].strip().startswith(fence)),
            len(lines),
        )
        if language.lower() in ("", "python", "py", "python3"):
            body = [row.removeprefix(indent) for row in lines[k + 1 : end]]
            try:  # blank lines before it: the README's line numbers
                blocks.append(ast.parse("\n" * (k + 1) + "\n".join(body)))
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                pass
        k = end + 1
    return blocks


_CALLERS: list[Any] = [None, {}]  # the files tuple the table was made from, name -> indices


def _calling(files: tuple[tuple[str, str], ...], name: str) -> list[int]:
    """The indices of the files whose text calls `name(`, found once for each listing of
    the project and each name (an unchanged project keeps its listing between checks)."""
    if _CALLERS[0] is not files:
        _CALLERS[:] = [files, {}]
    table = _CALLERS[1]
    if name not in table:
        written = f"{name}("
        table[name] = [k for k, (_, text) in enumerate(files) if written in text]
    return table[name]


_INDEX: dict[tuple[str, str], tuple[dict[str, list[ast.Call]], list[ast.ImportFrom]] | None] = {}


def _index(path: str, text: str) -> tuple[dict[str, list[ast.Call]], list[ast.ImportFrom]] | None:
    """A file's calls by the name they call, and its `from ... import`s (once per text)."""
    key = (path, text)
    if key not in _INDEX:
        if len(_INDEX) > 512:
            _INDEX.clear()
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            _INDEX[key] = None
            return None
        imports = [n for n in walk_statements(tree) if isinstance(n, ast.ImportFrom)]
        _INDEX[key] = (_calls(tree), imports)
    return _INDEX[key]


def _calls(tree: ast.Module) -> dict[str, list[ast.Call]]:
    out: dict[str, list[ast.Call]] = {}
    for n in ast.walk(tree):
        if isinstance(n, ast.Call):
            f = n.func
            name = (
                f.id
                if isinstance(f, ast.Name)
                else f.attr
                if isinstance(f, ast.Attribute)
                else None
            )
            if name is not None and name[:1].isupper():
                out.setdefault(name, []).append(n)
    return out


def _dotted(path: Path, root: Path) -> str:
    try:
        rel = path.with_suffix("").relative_to(root)
    except ValueError:
        return path.stem
    parts = [p for p in rel.parts if p != "src"]
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(imports: list[ast.ImportFrom], path: Path, root: Path, module: str, name: str) -> bool:
    """Whether the file imports `name` from `module` or a package above it."""
    here = _dotted(path, root).split(".")
    for node in imports:
        if not any(a.name == name for a in node.names):
            continue
        source = node.module or ""
        if node.level:
            base = here[: len(here) - node.level]
            source = ".".join([*base, *([source] if source else [])])
        if source == module or (source and module.startswith(source + ".")):
            return True
    return False


def _in_calls(
    path: str, calls: list[ast.Call], name: str, accepts: set[str] | None
) -> StatedCall | None:
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
            shown_path(Path(path)),
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
_LISTINGS: dict[str, tuple[tuple, tuple[tuple[str, str], ...]]] = {}  # root -> (stats, files)


def _project_files(root: str) -> tuple[tuple[str, str], ...]:
    """Every Python file of the project (bounded), with its text; a file is read again
    only when its size or modification time changed, and an unchanged project gives the
    same tuple as before (so tables made from it, `_calling`, are kept)."""
    out: list[tuple[str, str]] = []
    stats: list[tuple[str, int, int]] = []
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
                stats.append((full, st.st_mtime_ns, st.st_size))
            except (OSError, UnicodeDecodeError):
                continue
            if len(out) >= _MAX_FILES:
                break
        if len(out) >= _MAX_FILES:
            break
    signature = tuple(stats)
    before = _LISTINGS.get(root)
    if before is not None and before[0] == signature:
        return before[1]
    listing = tuple(out)
    _LISTINGS[root] = (signature, listing)
    return listing
