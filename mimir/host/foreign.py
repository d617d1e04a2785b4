"""Names a file imports from other modules of its project, read by running those modules.

`HostChecker` mixes this in. `from .pytorch_utils import Conv1D` binds what `Conv1D`
is in `pytorch_utils.py`: when the name is first read, that module's top level is run
once by the same interpreter (and, the same way, what it imports, no deeper; a package's
`__init__` re-exporting a name is no level of its own; a module of over 1,500 lines is
not run), in its own scope, reporting nothing. A
function or method defined there runs in that module's scope (its globals, its source
for spans and text); what fails inside it because of what the checked file passed is
reported at the checked file's call, the innermost line of the checked file a crash
would show. Nothing computed there counts for the checked file's coverage or hover.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mimir.host import hf_cache
from mimir.host.flow import aliases
from mimir.host.values import UNKNOWN, ApiV
from mimir.parse.module import ModuleInfo, read_module, walk_statements
from mimir.parse.spans import SourceFile
from mimir.project.index import parsed_once, shown_path
from mimir.project.resolve import resolve_module

MAX_DEPTH = 2  # an imported module and what it imports are read; one level more is not
MAX_LINES = 1500  # a larger module is not run: its names stay unknown


@dataclass
class Home:
    """One imported module as the interpreter runs it."""

    info: ModuleInfo
    aliases: dict[str, str]
    globals: dict[str, Any] = field(default_factory=dict)
    depth: int = 0  # imports between the checked file and this module (packages not counted)


@dataclass(frozen=True)
class LazyName:
    """`from m import name`, not looked at yet: `m` is run when the name is first read."""

    path: str
    name: str
    depth: int  # of module `m`


_TREES: dict[tuple[str, int, int], tuple[str, ast.Module] | None] = {}


class Foreign:
    """Imported modules of the project; `HostChecker` inherits them."""

    globals: dict[str, Any]
    info: ModuleInfo
    src: SourceFile
    aliases: dict[str, str]
    quiet: int

    def _init_foreign(self) -> None:
        self._homes: dict[int, Home] = {}  # id() of a def or class node -> its module
        self._modules: dict[str, Home | None] = {}  # path -> its module (None: not run)
        self._depth_abroad = 0  # imported modules being run, nested
        self.site: ast.AST | None = None  # the checked file's call running code abroad
        self.local_src = self.src
        self.local_info = self.info
        self.local_globals = self.globals
        self.local_aliases = self.aliases
        self._running: Home | None = None  # the imported module whose code runs

    @property
    def abroad(self) -> bool:
        """Whether the code running is another module's."""
        return self.site is not None or self._depth_abroad > 0

    def imported_name(self, stmt: ast.ImportFrom, name: str) -> Any:
        """What `from m import name` binds: `m`'s `name`, read when first used (UNKNOWN
        when `m` is not in the project or lies too deep); a cache class of transformers is
        the table's (`mimir.host.hf_cache`), wherever it is read from."""
        table = hf_cache.imported(stmt.module, stmt.level, name, None)
        if table is not None:
            return ApiV(table)
        try:
            target = resolve_module(Path(self.src.path).resolve(), stmt.module, stmt.level, ())
        except (OSError, ValueError):
            return UNKNOWN
        if target.path is None:
            return UNKNOWN
        table = hf_cache.imported(stmt.module, stmt.level, name, target.path)
        if table is not None:
            return ApiV(table)
        depth = self._here_depth() + (target.path.name != "__init__.py")
        if depth > MAX_DEPTH:
            return UNKNOWN
        return LazyName(str(target.path.resolve()), name, depth)

    def star_imported(self, stmt: ast.ImportFrom) -> dict[str, Any]:
        """What `from m import *` binds: each public name of module `m` (its `__all__` when
        that is a literal list), each read when first used; nothing when `m` is not a
        module of the project (or is a package)."""
        try:
            target = resolve_module(Path(self.src.path).resolve(), stmt.module, stmt.level, ())
        except (OSError, ValueError):
            return {}
        if target.path is None or target.path.name == "__init__.py":
            return {}  # a package's `__init__` (its own star imports would run much of it)
        parsed = _parse(target.path)
        if parsed is None:
            return {}
        return {name: self.imported_name(stmt, name) for name in public_names(parsed[1])}

    def resolve_name(self, value: Any, seen: int = 0) -> Any:
        """A name read for the first time: its module is run (once) and looked up."""
        if not isinstance(value, LazyName):
            return value
        home = self._module(Path(value.path), value.depth)
        found = UNKNOWN if home is None else home.globals.get(value.name, UNKNOWN)
        return self.resolve_name(found, seen + 1) if seen < 8 else UNKNOWN

    def global_value(self, name: str) -> Any:
        """A module-level name of the code running, read through its imports."""
        value = self.globals.get(name)
        if isinstance(value, LazyName):
            value = self.resolve_name(value)
            self.globals[name] = value
        return value

    def _here_depth(self) -> int:
        return self._running.depth if self._running is not None else 0

    def _module(self, path: Path, depth: int) -> Home | None:
        key = str(path.resolve())
        if key == str(Path(self.local_src.path).resolve()):
            return None
        if key in self._modules:
            return self._modules[key]
        self._modules[key] = None  # a cycle meanwhile sees nothing
        parsed = _parse(path)
        if parsed is None:
            return None
        text, tree = parsed
        source = SourceFile(shown_path(Path(key)), text)  # named as the checked files are
        info = read_module(source, tree)
        home = Home(info, aliases(info), depth=depth)
        for node in walk_statements(tree):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                self._homes[id(node)] = home
        self._depth_abroad += 1
        self.quiet += 1
        try:
            with self.at_home(home):
                self.block(tree.body, home.globals, None)  # type: ignore[attr-defined]
        finally:
            self.quiet -= 1
            self._depth_abroad -= 1
        self._modules[key] = home
        return home

    def home_of(self, node: ast.AST) -> Home | None:
        return self._homes.get(id(node))

    @contextmanager
    def at_home(self, home: Home | None) -> Iterator[None]:
        """Run in `home`'s scope (nothing changes when it is None or already current)."""
        if home is None or home.globals is self.globals:
            yield
            return
        saved = (self.globals, self.info, self.src, self.aliases, self._running)
        self.globals, self.info, self.src, self.aliases = (
            home.globals,
            home.info,
            home.info.source,
            home.aliases,
        )
        self._running = home if home.globals is not self.local_globals else None
        try:
            yield
        finally:
            self.globals, self.info, self.src, self.aliases, self._running = saved

    @contextmanager
    def calling_abroad(self, fn: ast.AST, node: ast.AST | None) -> Iterator[None]:
        """Run `fn` in its module's scope; the checked file's `node` is where what fails
        inside it is reported (nothing, when there is no such call)."""
        home = self.home_of(fn)
        if home is None:
            with self.at_home(self._local_home()):
                yield
            return
        entering = self.site is None
        silent = entering and node is None
        if entering and node is not None:
            self.site = node
        self.quiet += silent
        try:
            with self.at_home(home):
                yield
        finally:
            self.quiet -= silent
            if entering:
                self.site = None

    def _local_home(self) -> Home | None:
        """The checked file's scope, when a local function is called from abroad."""
        if self.globals is self.local_globals:
            return None
        return Home(self.local_info, self.local_aliases, self.local_globals)


def public_names(tree: ast.Module) -> list[str]:
    """The names `from m import *` takes from module `m`: its literal `__all__`, or every
    top-level name not starting with an underscore."""
    names: list[str] = []
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in stmt.targets
        ):
            if isinstance(stmt.value, (ast.List, ast.Tuple)) and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) for e in stmt.value.elts
            ):
                return [e.value for e in stmt.value.elts]  # type: ignore[attr-defined]
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(stmt.name)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for target in targets:
                for node in ast.walk(target):
                    if isinstance(node, ast.Name):
                        names.append(node.id)
        elif isinstance(stmt, ast.Import):
            names += [a.asname or a.name.split(".")[0] for a in stmt.names]
        elif isinstance(stmt, ast.ImportFrom):
            names += [a.asname or a.name for a in stmt.names if a.name != "*"]
    return [n for n in dict.fromkeys(names) if not n.startswith("_")]


def _parse(path: Path) -> tuple[str, ast.Module] | None:
    try:
        st = path.stat()
        key = (str(path), st.st_mtime_ns, st.st_size)
        if key not in _TREES:
            if len(_TREES) > 256:
                _TREES.clear()
            text = path.read_bytes().decode("utf-8").removeprefix("\ufeff")
            if text.count("\n") > MAX_LINES:
                _TREES[key] = None
            else:  # the tree the project's import reader parsed, if it did (only read here)
                tree = parsed_once(str(path.resolve()), text)
                _TREES[key] = None if tree is None else (text, tree)
        return _TREES[key]
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None
