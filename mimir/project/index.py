"""A project's modules, read on demand: what each import brings into a module.

`Project.resolver(path)` is the hook `read_module` calls at each top-level
import. It finds the imported module (`mimir.project.resolve`), reads that
module the same way (recursively, memoized), and copies into the importing
module what the imported names mean there: a `Dim` keeps its declaration
(constraints and span), an int constant its value, a `@gpu` function its
definition, a name re-exported from `mimir.array` its meaning; `from m import *`
brings every public name (or those in a literal `__all__`). Nothing is imported
or executed.

Problems, reported at the import statement, with their own codes:
GPU080 the import closes a cycle of project modules (it then brings nothing),
GPU081 the module is not in the project though its package is, or a relative
import finds nothing, GPU082 the module has no such name. Modules outside the
project (the standard library, installed packages) bring nothing and are never
reported.

`Project.digest(path)` hashes the text of every project module `path` imports,
directly or not: with the file's own text it keys a per-module cache, so a change
to `dims.py` re-checks exactly its dependents.
"""

from __future__ import annotations

import ast
import hashlib
import re
from collections import OrderedDict, deque
from dataclasses import fields
from pathlib import Path

import networkx as nx

from mimir.diagnostics.diagnostic import Span
from mimir.parse.module import ImportResolver, ModuleInfo, Problem, dotted_name, read_module
from mimir.parse.spans import SourceFile
from mimir.project.resolve import Target, package_root, resolve_module

MIMIR_MODULES = ("mimir", "mimir.array")
# Name-keyed tables of a module that describe the module itself, not what a name means.
_LOCAL_TABLES = frozenset({"origins", "non_size_uses"})


class Project:
    """The modules reachable from the files being checked, read from disk or an overlay."""

    def __init__(self, roots: tuple[Path, ...] = (), overlay: dict[str, str] | None = None):
        self.roots = tuple(Path(r).resolve() for r in roots)
        # Unsaved editor buffers win over the files on disk.
        self.overlay = {str(Path(p).resolve()): t for p, t in (overlay or {}).items()}
        self._texts: dict[Path, str | None] = {}
        self._trees: dict[Path, ast.Module | None] = {}
        # (module, the import statements read) -> what it exports
        self._exports: dict[tuple[Path, frozenset[int] | None], ModuleInfo | None] = {}
        self._reading: set[Path] = set()  # modules being read: an import cycle is cut there
        self._graph = nx.DiGraph()
        self._explored: set[Path] = set()
        self._import_lists: dict[Path, list[Path]] = {}
        self._opaque: set[Path] = set()  # modules with a `*` import Mimir cannot see into

    # -- reading

    def text(self, path: Path) -> str | None:
        path = path.resolve()
        if path not in self._texts:
            text = self.overlay.get(str(path))
            if text is None:
                try:
                    text = path.read_bytes().decode("utf-8").removeprefix("\ufeff")
                except (OSError, UnicodeDecodeError):
                    text = None
            self._texts[path] = text
        return self._texts[path]

    def opaque(self, path: Path) -> bool:
        """A module too large to read for what it may bring (transformers' 6,000-line
        `modeling_utils`), unless it reads `mimir`: its names are taken on trust, unparsed,
        as the host checker leaves such a module unrun."""
        text = self.text(path)
        return text is not None and text.count("\n") > OPAQUE_LINES and "mimir" not in text

    def tree(self, path: Path) -> ast.Module | None:
        path = path.resolve()
        if path not in self._trees:
            text = self.text(path)
            shared = None if text is None else parsed_once(str(path), text)
            if shared is not None and self._rewritten(path, shared):
                shared = ast.parse(text or "", filename=str(path))  # its own, to rewrite
            self._trees[path] = shared
        return self._trees[path]

    def _rewritten(self, path: Path, tree: ast.Module) -> bool:
        """Whether reading the module rewrites its tree (`import pkg.dims as d` of a project
        module makes each `d.N` one name), so it cannot share the parsed tree."""
        return any(
            t.path is not None
            for stmt in tree.body
            if isinstance(stmt, ast.Import)
            for t in self.targets(path, stmt)
        )

    def targets(self, path: Path, stmt: ast.Import | ast.ImportFrom) -> list[Target]:
        """The modules one import statement names: for `from m import a, b`, `m` and then
        each of `a`, `b` that is a submodule of `m`."""
        if isinstance(stmt, ast.ImportFrom):
            if stmt.level == 0 and stmt.module in MIMIR_MODULES:
                return []
            found = [resolve_module(path, stmt.module, stmt.level, self.roots)]
            for alias in stmt.names:
                if alias.name == "*":
                    continue
                name = f"{stmt.module}.{alias.name}" if stmt.module else alias.name
                sub = resolve_module(path, name, stmt.level, self.roots)
                if sub.path is not None:
                    found.append(sub)
            return found
        return [
            resolve_module(path, alias.name, 0, self.roots)
            for alias in stmt.names
            if alias.name not in MIMIR_MODULES and not alias.name.startswith("mimir.")
        ]

    def imports(self, path: Path) -> list[Path]:
        tree = self.tree(path)
        return [] if tree is None else self._imports_in(path, tree)

    def known_imports(self, path: Path, tree: ast.Module) -> None:
        """Read `path`'s imports from `tree`, a parse of its text the caller holds already
        (the document being checked), rather than parsing that text a second time."""
        path = path.resolve()
        if path not in self._import_lists:
            self._import_lists[path] = self._imports_in(path, tree)

    def _imports_in(self, path: Path, tree: ast.Module) -> list[Path]:
        out = []
        for stmt in tree.body:
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                out += [t.path.resolve() for t in self.targets(path, stmt) if t.path is not None]
        return out

    # -- the import graph

    def _explore(self, start: Path) -> None:
        todo = [start.resolve()]
        while todo:
            p = todo.pop()
            if p in self._explored:
                continue
            self._explored.add(p)
            self._graph.add_node(p)
            for q in self._imports_of(p):
                self._graph.add_edge(p, q)
                todo.append(q)

    def reachable(self, path: Path) -> set[Path]:
        """Every project module `path` imports, directly or through others (not itself)."""
        path = path.resolve()
        self._explore(path)
        return nx.descendants(self._graph, path)

    def cycle(self, importer: Path, imported: Path) -> list[Path] | None:
        """The cycle `importer -> imported -> ... -> importer`, when the import closes one
        (the shortest way back). Only the modules `imported` reaches are read, not
        everything the importer imports."""
        a, b = importer.resolve(), imported.resolve()
        if a == b:
            return [a, a]
        back: dict[Path, Path | None] = {b: None}
        todo = deque([b])
        while todo:
            p = todo.popleft()
            for q in self._imports_of(p):
                if q in back:
                    continue
                back[q] = p
                if q == a:
                    way: list[Path] = []
                    at: Path | None = a
                    while at is not None:
                        way.append(at)
                        at = back[at]
                    return [a, *reversed(way)]
                todo.append(q)
        return None

    def _imports_of(self, path: Path) -> list[Path]:
        if path not in self._import_lists:
            self._import_lists[path] = self.imports(path)
        return self._import_lists[path]

    def digest(self, path: Path) -> str:
        """A hash of the text of every project module `path` depends on."""
        h = hashlib.sha256()
        for p in sorted(self.reachable(path)):
            h.update(str(p).encode() + b"\0" + (self.text(p) or "").encode() + b"\0")
        return h.hexdigest()

    # -- what a module exports

    def exports(self, path: Path, wanted: frozenset[str] | None = None) -> ModuleInfo | None:
        """The imported module as read; None if unreadable, or if it is being read (an
        import cycle: it brings nothing there, and `_Importer.reachable` reports a cycle
        that hides facts). `wanted`: the names the importer asks for. Only the module's
        own imports that can bind what those names and its module-level facts read are
        followed (`_chosen`), so importing one name from a package whose `__init__`
        imports everything reads the one module that defines it, not the package."""
        path = path.resolve()
        tree = self.tree(path)
        if tree is None:
            return None
        chosen = None if wanted is None else _chosen(tree, wanted)
        key = (path, chosen)
        if key not in self._exports:
            if path in self._reading:
                return None
            self._reading.add(path)
            try:
                source = SourceFile(shown_path(path), self.text(path) or "")
                self._exports[key] = read_module(source, tree, self.resolver(path, chosen))
            finally:
                self._reading.discard(path)
        return self._exports[key]

    def resolver(self, path: Path, chosen: frozenset[int] | None = None) -> ImportResolver:
        """Resolves each import statement as `read_module` meets it (only those whose id is
        in `chosen`, when given)."""
        importer = Path(path).resolve()

        def resolve(info: ModuleInfo, stmt: ast.Import | ast.ImportFrom) -> None:
            if chosen is None or id(stmt) in chosen:
                _Importer(self, importer, info).statement(stmt)

        return resolve

    def module_name(self, path: Path) -> str:
        path = path.resolve()
        rel = path.relative_to(package_root(path)).with_suffix("")
        parts = list(rel.parts)
        if parts and parts[-1] == "__init__":
            parts.pop()
        return ".".join(parts) or path.stem


class _Importer:
    """Copies what one import statement brings into the importing module's facts."""

    def __init__(self, project: Project, importer: Path, info: ModuleInfo) -> None:
        self.project = project
        self.importer = importer
        self.info = info

    def problem(self, code: str, message: str, node: ast.AST) -> None:
        self.info.problems.append(Problem(code, message, self.info.source.span(node)))

    def reachable(self, stmt: ast.stmt, target: Target) -> bool:
        """Whether `target` is a readable project module that this import may read."""
        if target.missing:
            self.problem("GPU081", f"cannot find module `{target.name}` in the project", stmt)
            return False
        if target.path is None:
            return False
        if not self.hides_facts(stmt, target.path):
            # nothing Mimir reads is lost to a cycle: the import graph is not walked (a
            # module read again while it is being read brings nothing, see `exports`)
            return True
        cycle = self.project.cycle(self.importer, target.path)
        if cycle is not None:
            names = " -> ".join(f"`{self.project.module_name(p)}`" for p in cycle)
            self.problem("GPU080", f"import cycle: {names}", stmt)
            return False
        return True

    def hides_facts(self, stmt: ast.stmt, path: Path) -> bool:
        """Whether a cycle keeps from the importer something Mimir reads: a `Dim`, an int
        constant, a `@gpu` kernel or a name from mimir. A cycle that imports only what
        Mimir does not read (a helper function of a PyTorch package) loses nothing."""
        tree = self.project.tree(path)
        if tree is None:
            return True
        facts = _fact_names(tree)
        if isinstance(stmt, ast.ImportFrom) and not any(a.name == "*" for a in stmt.names):
            if any(a.name == path.stem for a in stmt.names):  # `from . import m`: the module
                return bool(facts)
            return any(a.name in facts for a in stmt.names)
        return bool(facts)

    def statement(self, stmt: ast.Import | ast.ImportFrom) -> None:
        targets = self.project.targets(self.importer, stmt)
        if isinstance(stmt, ast.Import):
            aliases = [
                a
                for a in stmt.names
                if a.name not in MIMIR_MODULES and not a.name.startswith("mimir.")
            ]
            for alias, target in zip(aliases, targets, strict=True):
                if self.reachable(stmt, target) and target.path is not None:
                    self.module_alias(alias.asname or alias.name, target.path)
            return
        if not targets:
            return
        module = targets[0]
        subs = {t.name.rsplit(".", 1)[-1]: t for t in targets[1:]}
        if stmt.module is None and module.missing and len(subs) == len(stmt.names):
            # `from . import a, b` of submodules, in a directory without `__init__.py`
            for alias in stmt.names:
                t = subs[alias.name]
                if self.reachable(stmt, t) and t.path is not None:
                    self.module_alias(alias.asname or alias.name, t.path)
            return
        if module.external or (module.path is not None and self.project.opaque(module.path)):
            if any(a.name == "*" for a in stmt.names):
                self.project._opaque.add(self.importer)
            return
        if not self.reachable(stmt, module):
            if any(a.name == "*" for a in stmt.names):
                self.project._opaque.add(self.importer)
            return
        wanted = frozenset(a.name for a in stmt.names if a.name != "*")
        star = any(a.name == "*" for a in stmt.names)
        exports = self.project.exports(module.path, None if star else wanted)
        if exports is None:  # its own check reports why (GPU001/GPU002), or a cycle
            return
        for alias in stmt.names:
            if alias.name == "*":
                self.star(exports, module.path)
                continue
            local = alias.asname or alias.name
            if alias.name in subs:  # `from pkg import submodule`
                if self.reachable(stmt, subs[alias.name]) and subs[alias.name].path is not None:
                    self.module_alias(local, subs[alias.name].path)
                continue
            if self.bring(exports, alias.name, local):
                continue
            if module.path.resolve() in self.project._opaque:
                continue
            self.problem(
                "GPU082",
                f"cannot resolve `{alias.name}`: module `{module.name}` does not define it",
                alias,
            )

    def module_alias(self, prefix: str, path: Path) -> None:
        """`import pkg.dims as d`: each `d.N` in the module means `N` of dims.py.

        The reference becomes the single name `d.N` (same span, same text), bound as
        `bring` binds an imported name, so annotations, kernels and host code read it
        as they read `from pkg.dims import N`.
        """
        # what the text reads of `prefix` first (a superset, found without walking the
        # tree): a module none of whose names the importer can read is done with at once
        written = _attributes_written(self.info.source.content, prefix)
        exports = self.project.exports(path, written)
        if exports is None or written.isdisjoint(exports.module_names):
            return
        used = _attributes_of(self.info.tree, prefix)
        if used != written:
            exports = self.project.exports(path, used)
        if exports is None or used.isdisjoint(exports.module_names):
            return
        for parent, name, index, node in _attribute_sites(self.info.tree).get(prefix, ()):
            local = f"{prefix}.{node.attr}"
            if self.bring(exports, node.attr, local):
                new = ast.copy_location(ast.Name(id=local, ctx=node.ctx), node)
                if index is None:
                    setattr(parent, name, new)
                else:
                    getattr(parent, name)[index] = new

    def bring(self, exports: ModuleInfo, name: str, local: str) -> bool:
        """Copy what `name` means in `exports` to `local` here; False when it is not bound.

        Every name-keyed table of `ModuleInfo` is copied (Dims, constants, size
        expressions, `mimir.array` re-exports, module aliases, kernels, functions), so a
        kind of module-level fact added later travels through imports too.
        """
        info = self.info
        known = False
        for f in fields(ModuleInfo):
            if f.name in _LOCAL_TABLES:
                continue
            table = getattr(exports, f.name)
            if isinstance(table, dict) and name in table:
                getattr(info, f.name)[local] = table[name]
                known = True
        if name in exports.dims:
            info.bad_dims.discard(local)
        if name in exports.bad_dims:
            info.bad_dims.add(local)
            known = True
        kernel = next((k for k in exports.kernels if k.node.name == name), None)
        if kernel is not None:
            info.imported_kernels[local] = kernel
            known = True
        function = next(
            (f for f in exports.tree.body if isinstance(f, ast.FunctionDef) and f.name == name),
            None,
        )
        if function is not None:  # callable inside a kernel (inlined at each call)
            info.imported_functions[local] = (exports, function)
            known = True
        origin = exports.origins.get(name) or _binding_span(exports, name)
        if origin is not None:
            info.origins[local] = origin
        return known or name in exports.module_names

    def star(self, exports: ModuleInfo, path: Path) -> None:
        names = _all_of(exports)
        if names is None:
            names = [n for n in exports.module_names if not n.startswith("_")]
        if path.resolve() in self.project._opaque:
            self.project._opaque.add(self.importer)
        for name in sorted(names):
            self.info.module_names.add(name)
            self.bring(exports, name, name)


def _all_of(info: ModuleInfo) -> list[str] | None:
    """A literal `__all__ = [...]` of the module, when it has one."""
    for stmt in info.tree.body:
        if (
            isinstance(stmt, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "__all__" for t in stmt.targets)
            and isinstance(stmt.value, (ast.List, ast.Tuple))
        ):
            items = [e.value for e in stmt.value.elts if isinstance(e, ast.Constant)]
            if all(isinstance(i, str) for i in items):
                return items
    return None


def _binding_span(info: ModuleInfo, name: str) -> Span | None:
    """Where `name` is bound at the top of the module (its def or assignment target)."""
    bound = getattr(info.tree, "_mimir_bound", None)
    if bound is None:  # once per tree: each statement's top-level names
        bound = set()
        for stmt in info.tree.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound.add(stmt.name)
            elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                bound |= {t.id for t in targets if isinstance(t, ast.Name)}
        info.tree._mimir_bound = bound  # type: ignore[attr-defined]
    if name not in bound:
        return None
    for stmt in info.tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if stmt.name == name:
                line = info.source.lines[stmt.lineno - 1] if info.source.lines else ""
                col = line.find(name, line.find("def ") + 4 if "def " in line else 0)
                col = col + 1 if col >= 0 else 1
                return Span(info.source.path, stmt.lineno, col, stmt.lineno, col + len(name))
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for t in targets:
                if isinstance(t, ast.Name) and t.id == name:
                    return info.source.span(t)
    return None


def shown_path(path: Path) -> str:
    """How a diagnostic names another module of the project: relative to the working
    directory when it lies below it (as the checked files are named), else absolute."""
    try:
        return str(path.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _fact_names(tree: ast.Module) -> set[str]:
    """Top-level names a module binds to what Mimir reads across modules."""
    out: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and isinstance(
            stmt.value, (ast.Constant, ast.BinOp, ast.Call)
        ):
            value = stmt.value
            fact = (
                isinstance(value, ast.Constant)
                and isinstance(value.value, int)
                or isinstance(value, ast.BinOp)
                or isinstance(value, ast.Call)
                and (dotted_name(value.func) or "").endswith("Dim")
            )
            if fact:
                out |= {t.id for t in stmt.targets if isinstance(t, ast.Name)}
        elif isinstance(stmt, ast.FunctionDef) and any(
            (dotted_name(d.func if isinstance(d, ast.Call) else d) or "").endswith("gpu")
            for d in stmt.decorator_list
        ):
            out.add(stmt.name)
        elif isinstance(stmt, ast.ImportFrom) and (stmt.module or "").startswith("mimir"):
            out |= {a.asname or a.name for a in stmt.names}
    return out


_Site = tuple[ast.AST, str, "int | None", ast.Attribute]


def _attribute_sites(tree: ast.Module) -> dict[str, list[_Site]]:
    """Where `tree` reads an attribute of a dotted name, by that name: each `d.N` with its
    parent, the parent's field and the index in it (to rewrite it in place). Made once per
    tree: a module imported whole rewrites only these nodes, never walking the tree again."""
    table = getattr(tree, "_mimir_attribute_sites", None)
    if table is None:
        table = {}
        for parent in ast.walk(tree):
            for name, value in ast.iter_fields(parent):
                items = enumerate(value) if isinstance(value, list) else ((None, value),)
                for index, node in items:
                    if isinstance(node, ast.Attribute):
                        base = dotted_name(node.value)
                        if base is not None:
                            table.setdefault(base, []).append((parent, name, index, node))
        tree._mimir_attribute_sites = table  # type: ignore[attr-defined]
    return table


def _attributes_written(text: str, prefix: str) -> frozenset[str]:
    """Each `N` the text has after `prefix.` (in code, comments or strings alike)."""
    pattern = r"(?<![\w.])" + r"\s*\.\s*".join(map(re.escape, prefix.split("."))) + r"\s*\.\s*(\w+)"
    return frozenset(re.findall(pattern, text))


def _attributes_of(tree: ast.Module, prefix: str) -> frozenset[str]:
    """The attributes `tree` reads of the dotted name `prefix` (`d.N` of `import pkg.dims as
    d`)."""
    return frozenset(site[3].attr for site in _attribute_sites(tree).get(prefix, ()))


def _chosen(tree: ast.Module, wanted: frozenset[str]) -> frozenset[int] | None:
    """The ids of the top-level imports of a module that can bind a name `wanted` asks
    for or that one of its module-level assignments reads (a `Dim`, a size computed from
    imported ones); None (every import) when the module holds a kernel, reads
    `mimir`, or a wanted name is a function (a kernel may inline it, reading any name
    of its module). A `*` import is always followed: what it binds is not written."""
    needed = set(wanted)
    for stmt in tree.body:
        if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            if stmt.value is not None:
                needed |= {n.id for n in ast.walk(stmt.value) if isinstance(n, ast.Name)}
        elif isinstance(stmt, ast.FunctionDef) and (
            stmt.name in wanted
            or any(
                (dotted_name(d.func if isinstance(d, ast.Call) else d) or "").endswith("gpu")
                for d in stmt.decorator_list
            )
        ):
            return None
        elif isinstance(stmt, ast.ImportFrom) and (stmt.module or "").startswith("mimir"):
            return None
    chosen: set[int] = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.ImportFrom) and any(
            a.name == "*" or (a.asname or a.name) in needed for a in stmt.names
        ):
            chosen.add(id(stmt))
        elif isinstance(stmt, ast.Import) and any(
            (a.asname or a.name).split(".")[0] in needed for a in stmt.names
        ):
            chosen.add(id(stmt))
    return frozenset(chosen)


OPAQUE_LINES = 1500  # see `Project.opaque` (the host's `foreign.MAX_LINES`)


class _ParsedTrees:
    """(path, text) -> tree for this process, the least recently used dropped first beyond
    `texts` trees or `characters` characters of source: a language server parses a new text
    of a document at every edit, and a tree takes about 40 times the memory of its text."""

    def __init__(self, texts: int, characters: int) -> None:
        self.texts, self.characters = texts, characters
        self._trees: OrderedDict[tuple[str, str], ast.Module | None] = OrderedDict()
        self._held = 0  # characters of the texts held

    def tree(self, path: str, text: str) -> ast.Module | None:
        key = (path, text)
        if key in self._trees:
            self._trees.move_to_end(key)
            return self._trees[key]
        try:
            tree = ast.parse(text, filename=path)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            tree = None
        self._trees[key] = tree
        self._held += len(text)
        while len(self._trees) > self.texts or (
            self._held > self.characters and len(self._trees) > 1
        ):
            (_, dropped), _ = self._trees.popitem(last=False)
            self._held -= len(dropped)
        return tree


_PARSED = _ParsedTrees(texts=2048, characters=16_000_000)


def parsed_once(path: str, text: str) -> ast.Module | None:
    """A module's tree, parsed once per process for each text it has: every module of a
    package that imports its `__init__` walks the whole package, and parsing is most of
    that walk. A shared tree is only read (`Project.tree` gives a module whose reading
    rewrites it a tree of its own)."""
    return _PARSED.tree(path, text)
