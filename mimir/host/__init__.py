"""Host code as data: shapes, dtypes and devices through the Python around kernels.

`check_host(info)` interprets every statement outside `@gpu` bodies (module level,
functions, classes) over the Z3 size algebra and returns its diagnostics; the
PyTorch/NumPy API is a table of shape rules (`mimir.host.torch_table`,
`mimir.host.nn`, dispatched by `mimir.host.api`). Device placement stays in
`mimir.constraints.devices` (Datalog rules). Nothing is imported or executed.
"""

from __future__ import annotations

from mimir.host.interp import HostChecker, HostResult
from mimir.parse.module import ModuleInfo
from mimir.solve.prover import DEFAULT_TIMEOUT_MS


def check_host(info: ModuleInfo, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> HostResult:
    """Every host-code diagnostic of one module, with counts for reports."""
    return HostChecker(info, timeout_ms).run()


def coverage_of(path: str, text: str, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> str:
    """One line saying how much of a file's host code has known shapes (`Coverage.summary`)."""
    import ast

    from mimir.parse.module import read_module
    from mimir.parse.spans import SourceFile

    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return "not read (not valid Python)"
    info = read_module(SourceFile(path, text), tree)
    return check_host(info, timeout_ms).coverage.summary()


__all__ = ["HostResult", "check_host", "coverage_of"]
