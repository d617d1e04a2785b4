"""Checking files: read, parse, build each kernel's graph, prove it.

`check_source` is the whole static pipeline for one file's text;
`check_paths` expands files and directories and checks each file. Neither
imports or executes user code.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mimir.constraints.checker import KernelChecker
from mimir.constraints.devices import check_devices
from mimir.constraints.index_kernels import IndexKernelChecker
from mimir.diagnostics.diagnostic import Diagnostic, Span
from mimir.discover import SKIPPED_DIRS, discover  # noqa: F401 - re-exported
from mimir.host import check_host
from mimir.parse.graph import KernelGraph, build_graph
from mimir.parse.module import ModuleInfo, read_module
from mimir.parse.spans import SourceFile, read_source
from mimir.solve.prover import DEFAULT_TIMEOUT_MS
from mimir.suppressions import apply_suppressions


@dataclass
class FileResult:
    path: str
    diagnostics: list[Diagnostic] = field(default_factory=list)
    unreadable: bool = False  # GPU001/GPU002: the input itself is bad (exit 2)
    # The checked kernels, for code generation (not pickled across processes).
    kernels: list[CheckedKernel] = field(default_factory=list, repr=False, compare=False)


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


def check_source(path: str, text: str, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> FileResult:
    """Every diagnostic for one file's source text, in source order."""
    try:
        tree = ast.parse(text, filename=path)
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
    info = read_module(SourceFile(path, text), tree)
    diagnostics = [Diagnostic(p.code, p.message, p.span) for p in info.problems]
    kernels = []
    for kernel in info.kernels:
        kg = build_graph(info, kernel)
        checker_type = KernelChecker if kernel.grid is None else IndexKernelChecker
        checker = checker_type(info, kg, timeout_ms)
        found = checker.run()
        diagnostics.extend(found)
        kernels.append(
            CheckedKernel(
                info,
                kg,
                checker.values,
                proven=not found,
                solve_seconds=checker.prover.solve_seconds,
                queries=checker.prover.queries,
            )
        )
    diagnostics.extend(check_devices(info))
    diagnostics.extend(check_host(info, timeout_ms).diagnostics)  # shapes through host code
    diagnostics.sort(key=Diagnostic.sort_key)
    diagnostics = apply_suppressions(path, text, diagnostics)  # `# mimir: ignore[...]`
    return FileResult(path, diagnostics, kernels=kernels)


def check_file(path: Path, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> FileResult:
    text, unreadable = read_source(path)
    if unreadable is not None:
        return FileResult(str(path), [unreadable], unreadable=True)
    return check_source(str(path), text or "", timeout_ms)


def check_paths(paths: Iterable[Path], timeout_ms: int = DEFAULT_TIMEOUT_MS) -> list[FileResult]:
    return [check_file(p, timeout_ms) for p, _ in discover(paths)]
