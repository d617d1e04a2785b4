"""Checking files: read, parse, build each kernel's graph, prove it.

`check_source` is the whole static pipeline for one file's text;
`check_paths` expands files and directories and checks each file. Neither
imports or executes user code.
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Callable, Iterable, MutableMapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mimir.constraints.checker import KernelChecker, refuse_unsatisfiable_relations
from mimir.constraints.devices import check_devices
from mimir.constraints.index_kernels import IndexKernelChecker
from mimir.diagnostics.diagnostic import Diagnostic, Span
from mimir.gate.discover import SKIPPED_DIRS, discover  # noqa: F401 - re-exported
from mimir.gate.suppressions import apply_suppressions
from mimir.host import check_host
from mimir.parse.depth import MAX_EXPRESSION_DEPTH, on_deep_stack, too_deep
from mimir.parse.graph import KernelGraph, build_graph
from mimir.parse.module import ModuleInfo, read_module
from mimir.parse.spans import SourceFile, read_source
from mimir.project import Project
from mimir.solve.prover import DEFAULT_TIMEOUT_MS

if TYPE_CHECKING:
    from mimir.parse.module import KernelDef


@dataclass
class FileResult:
    path: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    unreadable: bool = False  # GPU001/GPU002: the input itself is bad (exit 2)
    # The checked kernels, for code generation (not pickled across processes).
    kernels: list[CheckedKernel] = field(default_factory=list, repr=False, compare=False)
    # The module as read (Dims, constants, kernels), for front doors that answer queries.
    info: ModuleInfo | None = field(default=None, repr=False, compare=False)
    # Shapes host code binds to names, by (line, column) of the name: for hovers.
    host_shapes: dict[tuple[int, int], str] = field(default_factory=dict, repr=False, compare=False)


@dataclass
class CheckedKernel:
    """One `@gpu` function after checking: its graph and every node's abstract value.

    `values[node_id]` is a `TensorVal` (shape as `Sym`s whose `.expr` is a dim
    expression, dtype), a `SizeVal`, a `ScalarVal`, ... (see
    `mimir.constraints.checker`). `proven` is True when the kernel has no error.
    """

    info: ModuleInfo
    graph: KernelGraph
    values: dict[int, Any]
    proven: bool
    solve_seconds: float = 0.0  # wall time spent in Z3 for this kernel
    queries: int = 0


class CheckCancelledError(Exception):
    """Raised between kernels when the caller's `cancelled()` says the result is not wanted."""


KernelCache = MutableMapping[str, tuple[list[Diagnostic], CheckedKernel]]

# What a cached kernel holds in place of its module: the module of the check that stored it
# (its whole tree) would otherwise live as long as the entry, one copy of the file per edit
# in a language server's cache. A hit takes the module of the check that reads it.
_DETACHED = ModuleInfo(SourceFile("", ""), ast.Module(body=[], type_ignores=[]))


def check_source(
    path: str,
    text: str,
    timeout_ms: int = DEFAULT_TIMEOUT_MS,
    *,
    kernel_cache: KernelCache | None = None,
    cancelled: Callable[[], bool] | None = None,
    project: Project | None = None,
) -> FileResult:
    """Every diagnostic for one file's source text, in source order.

    `kernel_cache` (used by the language server) keeps each kernel's diagnostics
    and checked graph under a hash of the kernel's text, its position and the
    module-level facts it can see, so an edit re-proves only the kernels it
    touched. `project` resolves imports of other modules (default: the file's own
    package root and nothing else configured). `cancelled` is polled between
    kernels: when it returns True the check stops with `CheckCancelledError` (a
    newer edit made it stale).

    Runs with room for `MAX_EXPRESSION_DEPTH` levels of nesting (`on_deep_stack`); a file
    with a deeper expression gets GPU004 there and nothing else.
    """
    return on_deep_stack(
        lambda: _check_source(
            path,
            text,
            timeout_ms,
            kernel_cache=kernel_cache,
            cancelled=cancelled,
            project=project,
        )
    )


def _check_source(
    path: str,
    text: str,
    timeout_ms: int,
    *,
    kernel_cache: KernelCache | None,
    cancelled: Callable[[], bool] | None,
    project: Project | None,
) -> FileResult:
    try:
        tree = ast.parse(text, filename=path)
    except (RecursionError, MemoryError) as err:
        # Python's own parser gives up ("too complex", "maximum recursion depth")
        reason = type(err).__name__ + (f": {err}" if str(err) else "")
        message = f"syntax error: nested too deeply for Python's parser ({reason})"
        span = Span(path, 1, 1, 1, 1)
        return FileResult(path, [Diagnostic("GPU001", message, span)], unreadable=True)
    except SyntaxError as err:
        line = err.lineno or 1
        col = err.offset or 1
        span = Span(path, line, col, err.end_lineno or line, err.end_offset or col)
        return FileResult(
            path, [Diagnostic("GPU001", f"syntax error: {err.msg}", span)], unreadable=True
        )
    except ValueError as err:  # e.g. source holding a NUL byte
        return FileResult(
            path,
            [Diagnostic("GPU001", f"syntax error: {err}", Span(path, 1, 1, 1, 1))],
            unreadable=True,
        )
    project = project if project is not None else Project()
    source = SourceFile(path, text)
    deep = too_deep(tree, lines=source.lines)
    if deep:
        return FileResult(path, [_too_deep(source, e) for e in deep])
    info = read_module(source, tree, project.resolver(Path(path)))
    diagnostics = [
        Diagnostic(p.code, p.message, p.span, function=p.function) for p in info.problems
    ]
    diagnostics += refuse_unsatisfiable_relations(info)
    kernels = []
    facts = _facts_key(info, timeout_ms) if kernel_cache is not None else ""
    for kernel in info.kernels:
        if cancelled is not None and cancelled():
            raise CheckCancelledError(path)
        key = _kernel_key(info, kernel.node, facts) if kernel_cache is not None else ""
        if kernel_cache is not None and key in kernel_cache:
            found, stored = kernel_cache[key]
            checked = replace(stored, info=info)  # same text at the same place: same spans
        else:
            found, checked = _check_kernel(info, kernel, timeout_ms)
            if kernel_cache is not None:
                kernel_cache[key] = (found, replace(checked, info=_DETACHED))
        diagnostics.extend(found)
        kernels.append(checked)
    diagnostics = _one_per_site(diagnostics)
    diagnostics.extend(check_devices(info))
    host = check_host(info, timeout_ms)  # shapes through host code
    diagnostics.extend(host.diagnostics)
    diagnostics.sort(key=Diagnostic.sort_key)
    diagnostics = _suppressed(path, text, diagnostics, project)  # `# mimir: ignore[...]`
    return FileResult(path, diagnostics, kernels=kernels, info=info, host_shapes=host.shapes)


def _check_kernel(
    info: ModuleInfo, kernel: KernelDef, timeout_ms: int
) -> tuple[list[Diagnostic], CheckedKernel]:
    """One kernel's diagnostics and its checked graph."""
    kg = build_graph(info, kernel)
    checker_type = KernelChecker if kernel.grid is None else IndexKernelChecker
    checker = checker_type(info, kg, timeout_ms)
    found = checker.run()
    checked = CheckedKernel(
        info,
        kg,
        checker.values,
        proven=not found,
        solve_seconds=checker.prover.solve_seconds,
        queries=checker.prover.queries,
    )
    return list(found), checked


def _suppressed(
    path: str, text: str, diagnostics: list[Diagnostic], project: Project
) -> list[Diagnostic]:
    """Apply each file's `# mimir: ignore[...]` comments to the diagnostics located in it.

    A failure inside a function imported from another module is located there, so that
    module's comments decide; its unused comments are its own check's business.
    """
    here = [d for d in diagnostics if d.span.path == path]
    if "ignore" in text.lower():  # no comment can suppress anything otherwise (no tokenizing)
        here = apply_suppressions(path, text, here)
    for other in sorted({d.span.path for d in diagnostics} - {path}):
        theirs = [d for d in diagnostics if d.span.path == other]
        other_text = project.text(Path(other)) or ""
        if "ignore" in other_text.lower():
            theirs = [
                d for d in apply_suppressions(other, other_text, theirs) if d.code != "GPU090"
            ]
        here.extend(theirs)
    here.sort(key=Diagnostic.sort_key)
    return here


def _one_per_site(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    """A failure inside a function that several kernels call (or that is itself a kernel)
    is one root cause: keep one diagnostic per code, span and message, the one with the
    fewest notes (the function's own check, when it is a kernel)."""
    best: dict[tuple, Diagnostic] = {}
    for d in diagnostics:
        key = (d.code, d.span, d.message)
        if key not in best or len(d.labels) < len(best[key].labels):
            best[key] = d
    return [d for d in diagnostics if best[(d.code, d.span, d.message)] is d]


def _callee_texts(info: ModuleInfo, fn: ast.FunctionDef) -> list[str]:
    """The source of every function `fn` calls by name, transitively (they are inlined)."""
    from mimir.parse.graph import callable_function

    out: list[str] = []
    seen: set[int] = set()
    names = {f.name for f in info.tree.body if isinstance(f, ast.FunctionDef)}
    names |= set(info.imported_functions)
    body = "\n".join(info.source.lines[fn.body[0].lineno - 1 : fn.end_lineno])
    if not any(f"{name}(" in body for name in names):
        return out  # calls nothing that could be inlined (the cheap, common case)
    todo = [(info, fn)]
    while todo:
        where, f = todo.pop()
        for node in ast.walk(f):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                callee = callable_function(where, node.func.id)
                if callee is not None and id(callee[1]) not in seen:
                    seen.add(id(callee[1]))
                    where_, g = callee
                    out.append(f"{where_.source.path}:{g.lineno}\0{where_.source.text(g)}")
                    todo.append(callee)
    return out


def _facts_key(info: ModuleInfo, timeout_ms: int) -> str:
    """Everything at module level that a kernel's check can read, as one string.

    Every field of `ModuleInfo` counts, except the module's own text and tree (a
    kernel's key has its own text), its problems (reported once, outside kernels) and
    where imported names are declared; a field added later counts without an edit here.
    """
    parts: list[object] = [info.source.path, timeout_ms]
    for f in fields(info):
        if f.name in _NOT_FACTS:
            continue
        value = getattr(info, f.name)
        if f.name == "dims":  # a Dim's repr is its name: spell out its constraints
            value = [
                (n, d.dim.name, d.dim.describe_constraints(), d.span) for n, d in value.items()
            ]
        elif f.name == "imported_kernels":
            value = sorted((n, k.span) for n, k in value.items())
        elif f.name == "imported_functions":  # their text is in each caller's own key
            value = sorted((n, m.source.path, fn.lineno) for n, (m, fn) in value.items())
        elif isinstance(value, dict):
            value = sorted(value.items(), key=lambda kv: str(kv[0]))
        elif isinstance(value, set):
            value = sorted(value, key=str)
        parts.append((f.name, value))
    return repr(parts)


_NOT_FACTS = frozenset({"source", "tree", "kernels", "problems", "origins", "non_size_uses"})


def _kernel_key(info: ModuleInfo, fn: ast.FunctionDef, facts: str) -> str:
    # The position is part of the key: diagnostics carry absolute lines and columns.
    first = min([fn.lineno, *(d.lineno for d in fn.decorator_list)])
    lines = info.source.lines[first - 1 : fn.end_lineno]
    text = "\n".join([*lines, *_callee_texts(info, fn)])
    digest = hashlib.sha256(f"{first}\0{text}\0{facts}".encode()).hexdigest()
    return digest


def _too_deep(source: SourceFile, expr: ast.expr) -> Diagnostic:
    message = (
        f"expression nested more than {MAX_EXPRESSION_DEPTH:,} levels deep; "
        "nothing else in this file is checked"
    )
    return Diagnostic("GPU004", message, source.span(expr))


def check_file(path: Path, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> FileResult:
    text, unreadable = read_source(path)
    if unreadable is not None:
        return FileResult(str(path), [unreadable], unreadable=True)
    return check_source(str(path), text or "", timeout_ms)


def check_paths(paths: Iterable[Path], timeout_ms: int = DEFAULT_TIMEOUT_MS) -> list[FileResult]:
    return [check_file(p, timeout_ms) for p, _ in discover(paths)]
